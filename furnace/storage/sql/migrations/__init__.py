"""Alembic migrations of the relational store (run by :meth:`furnace.storage.sql.db.SQLDatabase.migrate`)."""

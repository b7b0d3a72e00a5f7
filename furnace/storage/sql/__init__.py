"""The relational store on SQLAlchemy Core: SQLite (WAL) in ``FURNACE_HOME`` by default, PostgreSQL when
``FURNACE_DATABASE_URL`` names one (docs/store.md). Schema migrations with Alembic (``migrations/``)."""

"""Alembic's environment: always run on the connection furnace passes (never from a config file)."""

from __future__ import annotations

from alembic import context

from furnace.storage.sql.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
context.run_migrations()

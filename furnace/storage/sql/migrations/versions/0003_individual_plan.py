"""The plan each individual was made by (``experiment_individuals.plan``), as ``furnace.duckdb``'s migration 0019.

A rerun reads a record back only for the same plan (operator, parents, seed, params), so a slot whose plan
changed after a retried failure is made again. '' for rows written before (their seal was made without it).
Revision 0001 creates its tables from the current schema, so a database made at 0001 today has the column.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _columns() -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns("experiment_individuals")}


def upgrade() -> None:
    if "plan" not in _columns():
        op.add_column("experiment_individuals", sa.Column("plan", sa.String, nullable=False, server_default=""))


def downgrade() -> None:
    if "plan" in _columns():
        with op.batch_alter_table("experiment_individuals") as batch:  # SQLite rebuilds the table
            batch.drop_column("plan")

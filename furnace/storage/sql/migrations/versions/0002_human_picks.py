"""People's picks (``furnace pick``): the table ``human_picks``, as ``furnace.duckdb``'s migration 0018.

Insert-only: undoing a pick sets ``undone_at`` and keeps the row; each pick has its own id, so two people
picking at once add two rows. Each row carries a keyed seal (and its undo another), checked on every read.

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "human_picks",
        sa.Column("pick_id", sa.String, primary_key=True),
        sa.Column("experiment_id", sa.String, nullable=False),
        sa.Column("probe", sa.String, nullable=False),
        sa.Column("agent_a", sa.String, nullable=False),
        sa.Column("generation_a", sa.Integer, nullable=False),
        sa.Column("agent_b", sa.String, nullable=False),
        sa.Column("generation_b", sa.Integer, nullable=False),
        sa.Column(
            "choice",
            sa.String,
            sa.CheckConstraint("choice IN ('A', 'B', 'tie')", name="human_picks_choice"),
            nullable=False,
        ),
        sa.Column("who", sa.String, nullable=False),
        sa.Column("reason", sa.String, nullable=False, server_default=""),
        sa.Column("order_seed", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("undone_at", sa.DateTime),
        sa.Column("seal", sa.String),
        sa.Column("undo_seal", sa.String),
    )


def downgrade() -> None:
    op.drop_table("human_picks")

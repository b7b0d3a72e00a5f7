"""The initial schema: every table of ``furnace.duckdb`` up to its migration 0017, in portable types.

Revision ID: 0001
"""

from __future__ import annotations

from alembic import op

from furnace.storage.sql.schema import metadata

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The tables as they stand at this revision. A later revision changes them with explicit `op` calls and
# lists here the tables it adds, so this one keeps creating exactly what it created.
TABLES = (
    "elixir_versions", "agents", "lineage_edges", "llm_responses", "llm_calls", "kv", "embeddings",
    "experiments", "experiment_generations", "experiment_individuals", "experiment_scores", "contents",
    "content_versions", "chat_sessions", "chat_messages", "revisions", "processed_revisions",
    "arena_sessions", "arena_members", "arena_runs", "arena_replies", "arena_checkpoints", "arena_leases",
    "assistant_sessions",
)  # fmt: skip


def upgrade() -> None:
    metadata.create_all(op.get_bind(), tables=[metadata.tables[name] for name in TABLES])


def downgrade() -> None:
    metadata.drop_all(op.get_bind(), tables=[metadata.tables[name] for name in TABLES])

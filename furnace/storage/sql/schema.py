"""Every table of the relational store, as SQLAlchemy Core metadata (the head of the Alembic migrations).

The tables and columns are those of ``furnace.duckdb`` (so a home moves with ``furnace migrate`` row for
row and the Parquet snapshots keep their columns), in portable types: JSON documents are TEXT (parsed by
the adapters), lists (an elixir's expertise, an embedding vector) are JSON TEXT, timestamps are naive UTC
set by furnace (never the server's clock or zone). ``tests/storage/test_sql_store.py`` checks that the
migrations produce exactly this metadata, and on SQLite two tables more: ``lineage_stamp`` (migration 0004,
the change stamp of the lineage tables that walks are remembered by) and ``lineage_changes`` (migration 0005,
its change log); no data, so neither snapshotted nor moved, and not listed here.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from furnace.domain.times import utc_now

metadata = MetaData()


def _created() -> Column[datetime]:
    return Column("created_at", DateTime, nullable=False, default=utc_now)


# --- the elixir library, agents and the lineage DAG ------------------------------------------------------

elixir_versions = Table(
    "elixir_versions",
    metadata,
    Column("id", String, nullable=False),
    Column("version", Integer, nullable=False),
    Column("origin", String, nullable=False, default="library"),
    Column("name", String, nullable=False),
    Column("content_hash", String, nullable=False),
    Column("body", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("deleted_at", DateTime),
    Column("language", String),
    Column("expertise", Text),  # a JSON list
    Column("seal", String),
    PrimaryKeyConstraint("id", "version"),
    Index("elixir_versions_hash", "content_hash"),
)

agents = Table(
    "agents",
    metadata,
    Column("id", String, primary_key=True),
    Column("lineage", Text, nullable=False),
    Column("lineage_hash", String, nullable=False),
    Column("elixir_version", Integer, nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("tools", Text, nullable=False),
    Column("members", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("seal", Text),
    Index("agents_lineage_hash", "lineage_hash"),
    Index("agents_created", "created_at"),
)

lineage_edges = Table(
    "lineage_edges",
    metadata,
    Column("parent", String, nullable=False),
    Column("child", String, nullable=False),
    Column("operator", String, nullable=False),
    Column("op_version", String, nullable=False, default=""),
    Column("parent_version", Integer, nullable=False, default=0),  # 0 = not pinned to a version
    PrimaryKeyConstraint("parent", "child", "operator", "op_version", "parent_version"),
    Index("lineage_edges_child", "child"),
    Index("lineage_edges_parent", "parent"),
)

# --- the LLM seam: response cache and call ledger ----------------------------------------------------------

llm_responses = Table(
    "llm_responses",
    metadata,
    Column("cache_key", String, primary_key=True),
    Column("model", String, nullable=False),
    Column("task", String, nullable=False),
    Column("completion", Text, nullable=False),
    _created(),
    Column("seal", String),
    Index("llm_responses_created", "created_at"),
)

llm_calls = Table(
    "llm_calls",
    metadata,
    Column("id", String, primary_key=True),
    Column("run_id", String),
    Column("task", String, nullable=False),
    Column("model", String, nullable=False),
    Column("cache_key", String, nullable=False),
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("latency_s", Float, nullable=False, default=0.0),
    Column("cached", Boolean, nullable=False, default=False),
    Column("status", String, nullable=False, default="ok"),
    _created(),
    Column("attempts", Integer, default=1),
    Column("detail", Text, default=""),
    Column("unit", String, default=""),
    Index("llm_calls_run", "run_id"),
)

kv = Table(
    "kv",
    metadata,
    Column("key", String, primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("expires_at", DateTime),
)

embeddings = Table(
    "embeddings",
    metadata,
    Column("model", String, nullable=False),
    Column("text_hash", String, nullable=False),
    Column("vector", Text, nullable=False),  # a JSON list of floats: exact (repr round-trips)
    Column("created_at", DateTime, default=utc_now),
    PrimaryKeyConstraint("model", "text_hash"),
)

# --- experiments -----------------------------------------------------------------------------------------

experiments = Table(
    "experiments",
    metadata,
    Column("experiment_id", String, primary_key=True),
    Column("name", String, nullable=False),
    Column("config", Text, nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("model", String, nullable=False),
    Column("status", String, nullable=False, default="running"),
    Column("summary", Text),
    _created(),
    Column("updated_at", DateTime, nullable=False, default=utc_now),
    Column("seal", String),
    Column("summary_seal", String),
)

experiment_generations = Table(
    "experiment_generations",
    metadata,
    Column("experiment_id", String, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("survivors", Text, nullable=False),
    Column("best_fitness", Float, nullable=False),
    Column("mean_fitness", Float, nullable=False),
    Column("operator_weights", Text, nullable=False),
    Column("calls", Integer, nullable=False, default=0),  # model calls (cache hits excluded)
    Column("cached_calls", Integer, nullable=False, default=0),  # served by the response cache
    Column("tokens", BigInteger, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    Column("finished_at", DateTime, nullable=False, default=utc_now),
    Column("seal", String),
    PrimaryKeyConstraint("experiment_id", "generation"),
)

experiment_individuals = Table(
    "experiment_individuals",
    metadata,
    Column("experiment_id", String, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("agent_id", String, nullable=False),
    Column("slot", Integer, nullable=False),
    Column("operator", String, nullable=False),
    Column("parents", Text, nullable=False),
    Column("lineage_hash", String),
    Column("elixir", Text, nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("fitness", Float, nullable=False),
    Column("objectives", Text, nullable=False),
    Column("failures", Integer, nullable=False, default=0),
    Column("failure_reasons", Text, nullable=False),
    Column("calls", Integer, nullable=False, default=0),  # model calls (cache hits excluded)
    Column("tokens", BigInteger, nullable=False, default=0),
    Column("cost_usd", Float, nullable=False, default=0.0),
    _created(),
    Column("seal", String),
    Column("plan", String, nullable=False, server_default=""),  # revision 0003
    PrimaryKeyConstraint("experiment_id", "generation", "agent_id"),
)

experiment_scores = Table(
    "experiment_scores",
    metadata,
    Column("experiment_id", String, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("agent_id", String, nullable=False),
    Column("probe", String, nullable=False),
    Column("scorer", String, nullable=False),
    Column("value", Float, nullable=False),
    Column("reason", Text, nullable=False),
    Column("failed", Boolean, nullable=False, default=False),
    Column("feedback", Text, default=""),
    PrimaryKeyConstraint("experiment_id", "generation", "agent_id", "probe", "scorer"),
)

# --- content, revision chat, preference marks ----------------------------------------------------------------

contents = Table(
    "contents",
    metadata,
    Column("id", String, primary_key=True),
    Column("persona_id", String, nullable=False),
    Column("persona_version", Integer, nullable=False),
    Column("topic", Text, nullable=False),
    Column("language", String, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Index("contents_persona", "persona_id"),
)

content_versions = Table(
    "content_versions",
    metadata,
    Column("content_id", String, nullable=False),
    Column("version", Integer, nullable=False),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("word_count", Integer, nullable=False),
    Column("source", String, nullable=False),
    Column("revision_id", String),
    Column("note", Text, nullable=False, default=""),
    Column("created_at", DateTime, nullable=False),
    PrimaryKeyConstraint("content_id", "version"),
)

chat_sessions = Table(
    "chat_sessions",
    metadata,
    Column("id", String, primary_key=True),
    Column("content_id", String, nullable=False),
    Column("persona_id", String, nullable=False),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("content_id", name="chat_sessions_content"),
)

chat_messages = Table(
    "chat_messages",
    metadata,
    Column("id", String, primary_key=True),
    Column("session_id", String, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", String, nullable=False),
    Column("kind", String, nullable=False),
    Column("content", Text, nullable=False),
    Column("revision_id", String),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("session_id", "seq", name="chat_messages_seq"),
)

revisions = Table(
    "revisions",
    metadata,
    Column("id", String, primary_key=True),
    Column("content_id", String, nullable=False),
    Column("session_id", String, nullable=False),
    Column("persona_id", String, nullable=False),
    Column("persona_version", Integer, nullable=False),
    Column("suggestions", Text, nullable=False),
    Column("from_version", Integer, nullable=False),
    Column("to_version", Integer, nullable=False),
    Column("original_title", Text, nullable=False),
    Column("original_body", Text, nullable=False),
    Column("revised_title", Text, nullable=False),
    Column("revised_body", Text, nullable=False),
    Column("model", String, nullable=False, default=""),
    Column("created_at", DateTime, nullable=False),
    Index("revisions_content", "content_id"),
)

processed_revisions = Table(
    "processed_revisions",
    metadata,
    Column("revision_id", String, primary_key=True),
    Column("persona_id", String, nullable=False),
    Column("persona_version", Integer),
    Column("preferences", Text, nullable=False),
    Column("status", String, nullable=False),
    Column("processed_at", DateTime, nullable=False, default=utc_now),
)

# --- the arena ---------------------------------------------------------------------------------------------

arena_sessions = Table(
    "arena_sessions",
    metadata,
    Column("session_id", String, primary_key=True),
    Column("title", Text, nullable=False, default=""),
    Column("model", String, nullable=False),
    _created(),
)

arena_members = Table(
    "arena_members",
    metadata,
    Column("session_id", String, nullable=False),
    Column("position", Integer, nullable=False),
    Column("member_id", String, nullable=False),
    PrimaryKeyConstraint("session_id", "position"),
)

arena_runs = Table(
    "arena_runs",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("session_id", String, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("message", Text, nullable=False),
    Column("directive", Text, nullable=False),
    Column("plan", Text),
    Column("status", String, nullable=False, default="running"),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    _created(),
    Column("updated_at", DateTime, nullable=False, default=utc_now),
    Index("arena_runs_session", "session_id"),
)

arena_replies = Table(
    "arena_replies",
    metadata,
    Column("reply_id", String, primary_key=True),
    Column("run_id", String, nullable=False),
    Column("session_id", String, nullable=False),
    Column("speaker_index", Integer, nullable=False),
    Column("member_id", String, nullable=False),
    Column("member_name", String, nullable=False),
    Column("member_version", Integer),
    Column("text", Text, nullable=False),
    Column("ordinal", Integer),
    Column("corrected", Boolean, nullable=False, default=False),
    _created(),
    Column("attempts", Integer, default=1),
    Index("arena_replies_run", "run_id"),
)

arena_checkpoints = Table(
    "arena_checkpoints",
    metadata,
    Column("run_id", String, nullable=False),
    Column("speaker_index", Integer, nullable=False),
    Column("status", String, nullable=False),
    Column("reply_id", String),
    Column("error", Text),
    Column("attempts", Integer, nullable=False, default=1),
    _created(),
    PrimaryKeyConstraint("run_id", "speaker_index"),
)

arena_leases = Table(
    "arena_leases",
    metadata,
    Column("run_id", String, primary_key=True),
    Column("token", String, nullable=False),
    Column("host", String, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("expires_at", DateTime, nullable=False),
)

# --- the lab assistant -------------------------------------------------------------------------------------

assistant_sessions = Table(
    "assistant_sessions",
    metadata,
    Column("session_id", String, primary_key=True),
    Column("state", Text, nullable=False),
    Column("updated_at", DateTime, nullable=False, default=utc_now),
)

# --- people's picks (migration 0002) ------------------------------------------------------------------------

human_picks = Table(
    "human_picks",
    metadata,
    Column("pick_id", String, primary_key=True),
    Column("experiment_id", String, nullable=False),
    Column("probe", String, nullable=False),
    Column("agent_a", String, nullable=False),
    Column("generation_a", Integer, nullable=False),
    Column("agent_b", String, nullable=False),
    Column("generation_b", Integer, nullable=False),
    Column("choice", String, CheckConstraint("choice IN ('A', 'B', 'tie')", name="human_picks_choice"), nullable=False),
    Column("who", String, nullable=False),
    Column("reason", String, nullable=False, default="", server_default=""),
    Column("order_seed", BigInteger, nullable=False, default=0, server_default="0"),
    Column("created_at", DateTime, nullable=False),
    Column("undone_at", DateTime),
    Column("seal", String),  # keyed seal of the pick as made
    Column("undo_seal", String),  # keyed seal of its undo, when undone
)

TABLES: tuple[str, ...] = tuple(metadata.tables)
"""Every table, in creation order (a home's copy and its checks go through all of them)."""

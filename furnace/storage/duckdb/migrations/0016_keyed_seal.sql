-- Keyed record seals (issue #33): an HMAC-SHA-256 whose key lives outside the database
-- (furnace/storage/duckdb/seal_key.py, docs/reliability.md) on every record a reader trusts.
-- Agents keep theirs inside their `seal` JSON (its `mac`). The migration runner then seals the
-- existing rows with the key (furnace/storage/duckdb/seal.py, upgrade_keyed_seal): an elixir
-- version only when its body matches its stored content hash, an agent only when its old unkeyed
-- seal verifies; a row that fails is left unsealed, and every read refuses it.
ALTER TABLE elixir_versions ADD COLUMN seal VARCHAR;
ALTER TABLE llm_responses ADD COLUMN seal VARCHAR;
ALTER TABLE experiments ADD COLUMN seal VARCHAR;
ALTER TABLE experiments ADD COLUMN summary_seal VARCHAR;
ALTER TABLE experiment_generations ADD COLUMN seal VARCHAR;
ALTER TABLE experiment_individuals ADD COLUMN seal VARCHAR;

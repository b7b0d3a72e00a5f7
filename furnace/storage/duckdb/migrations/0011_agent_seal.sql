-- Agent record hash (issue #15): everything an agent is and uses, hashed per field group
-- (lineage, parent refs, resolution notes, child persona, system prompt, tools, members),
-- checked on every read. Existing agents are sealed as they are now, by the
-- furnace_agent_seal() function the migration runner provides (furnace/storage/duckdb/seal.py).
ALTER TABLE agents ADD COLUMN seal JSON;
UPDATE agents SET seal = furnace_agent_seal(
    lineage,
    (SELECT e.content_hash FROM elixir_versions e WHERE e.id = agents.id AND e.version = agents.elixir_version),
    system_prompt,
    tools,
    members
);

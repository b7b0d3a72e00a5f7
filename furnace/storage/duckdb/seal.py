"""SQL functions the migrations may call (registered on the migration connection by :mod:`.db`).

``furnace_agent_seal(lineage, child_hash, system_prompt, tools, members)`` seals an agent row
written before agent record hashes existed (migration 0011), with the same
:func:`furnace.domain.agent.record_seal` new rows get on save. (The keyed seals of migration 0016
are written by :mod:`.reseal`, which reads through the stores.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from furnace.domain.agent import record_seal
from furnace.domain.elixir import ElixirRef
from furnace.domain.lineage import Lineage


def agent_seal_sql(lineage: str, child_hash: str | None, system_prompt: str, tools: str, members: str) -> str:
    """The seal (JSON text) of one stored agent row; a row that cannot be read gets no valid seal."""
    try:
        data = {k: v for k, v in json.loads(lineage).items() if k != "lineage_hash"}
        seal = record_seal(
            Lineage.model_validate(data),
            child_hash or "",
            system_prompt,
            json.loads(tools),
            [ElixirRef.model_validate(m) for m in json.loads(members)],
        )
    except (ValueError, TypeError, AttributeError):
        return json.dumps({"unreadable": True})  # reads report it as an altered record
    return json.dumps(seal, sort_keys=True)


# name -> (function, parameter types, return type)
FUNCTIONS: dict[str, tuple[Callable[..., Any], list[str], str]] = {
    "furnace_agent_seal": (agent_seal_sql, ["VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR"], "VARCHAR"),
}


def register(con: Any) -> None:
    """Make :data:`FUNCTIONS` callable from SQL on ``con``."""
    for name, (function, params, returns) in FUNCTIONS.items():
        con.create_function(name, function, params, returns, null_handling="special")

"""Shared builders for the interop tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from furnace.domain.agent import Agent, agent_id_for  # noqa: E402
from furnace.domain.elixir import Elixir, parse_elixir  # noqa: E402
from furnace.domain.lineage import Lineage  # noqa: E402


def make_native() -> Elixir:
    """An elixir using every field, with text that is awkward for card formats."""
    return parse_elixir(
        {
            "id": "night-editor",
            "name": "Night Editor",
            "language": "en",
            "identity": "A meticulous night-shift copy editor. Works fast, never sloppy.",
            "expertise": ["copy editing", "headlines", "AP style"],
            "principles": [
                "Fix errors of fact before errors of style.",
                "Keep the writer's voice.\nNever rewrite a sentence that only needs a comma.",
                "Say {{char}} never guesses a name's spelling.",
            ],
            "tone": {"formality": 0.8, "conciseness": 0.9, "humor": 0.15, "empathy": 0.4},
            "constraints": {"max_length": 280, "forbidden_topics": ["politics"], "must_use_markdown": True},
            "few_shots": [
                {"input": "Is 'alot' a word?", "output": "No: write 'a lot'."},
                {"input": "Check this:\nTHE END", "output": "Two lines.\n{{user}}: looks like a speaker\nbut is text."},
            ],
            "tools": ["spellcheck", "style_guide.lookup"],
            "priority": 140,
            "conflicts_with": ["chaos-poet"],
            "style_notes": "Prefers en dashes.",
            "style_preferences": [
                {
                    "dimension": "length",
                    "value": "concise",
                    "evidence": "cut para 2",
                    "source_revision": "r1",
                    "weight": 0.7,
                    "count": 2,
                },
            ],
        }
    )


def make_agent(child: Elixir, parent: Elixir) -> Agent:
    """An agent whose lineage names ``parent``."""
    from furnace.domain.render import render_prompt

    lineage = Lineage(
        parents=(parent.ref,), operator="mutation", params={"rate": 0.2, "seed": 7}, op_version="mutation/1"
    )
    return Agent(
        id=agent_id_for(lineage.lineage_hash), elixir=child, lineage=lineage, system_prompt=render_prompt(child)
    )


@pytest.fixture()
def native() -> Elixir:
    return make_native()

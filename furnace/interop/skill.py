"""Export an elixir or agent as a skill: a folder or a byte-reproducible zip.

Layout::

    <slug>/SKILL.md                  YAML front matter (name, description, metadata)
                                     + the rendered persona prompt
    <slug>/references/persona.json   the structured persona (and lineage for agents)

The zip has sorted entries, fixed timestamps (1980-01-01), fixed permissions
and compression level, so the same elixir always gives the same bytes.
Anything that looks like a secret (API keys, bearer tokens, credentials in
URLs) refuses the export with an :class:`~furnace.domain.errors.InputError` naming
the field.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from furnace.domain.agent import Agent
from furnace.domain.elixir import Elixir
from furnace.domain.errors import InputError
from furnace.domain.secrets import refuse_secrets

FORMAT = "furnace.persona/1"
MAX_DESCRIPTION = 1024
ZIP_DATE = (1980, 1, 1, 0, 0, 0)

_INTRO = {
    "en": "Adopt the persona below for the whole conversation. Its structured form "
    "(tone, constraints, few-shots{lineage}) is in `references/persona.json`.",
    "zh": "在整个对话中采用以下人设。其结构化形式（语气、约束、示例{lineage}）见 `references/persona.json`。",
}
_DESCRIPTION = {
    "en": "{identity} Use this skill to answer as {name} (expertise: {expertise}).",
    "zh": "{identity} 需要以{name}的身份回答时使用（专长：{expertise}）。",
}


@dataclass(frozen=True)
class SkillBundle:
    """The files of one skill, by path relative to the skill folder."""

    slug: str
    files: dict[str, bytes]


def skill_slug(text: str) -> str:
    """A skill name: lowercase letters, digits and hyphens, at most 64 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64].strip("-")
    if not slug:
        raise InputError(f"cannot make a skill name from {text!r}", field="id")
    return slug


def _persona(elixir: Elixir, agent: Agent | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": FORMAT,
        "kind": "agent" if agent else "elixir",
        "elixir": elixir.model_dump(mode="json", exclude={"created_at", "deleted_at"}),
    }
    if agent is not None:
        data["agent"] = {
            "id": agent.id,
            "lineage": agent.lineage.model_dump(mode="json"),
            "tools": list(agent.tools),
            "members": [m.model_dump(mode="json") for m in agent.members],
            "system_prompt": agent.system_prompt,
        }
    return data


def build_skill(target: Elixir | Agent) -> SkillBundle:
    """The skill files for an elixir or agent; refuses secrets (InputError naming the field)."""
    from furnace.domain.render import render_prompt

    agent = target if isinstance(target, Agent) else None
    elixir = agent.elixir if agent else target
    assert isinstance(elixir, Elixir)
    persona = _persona(elixir, agent)
    refuse_secrets(persona["elixir"], what=f"elixir {elixir.id!r} as a skill")
    if agent is not None:
        refuse_secrets(persona["agent"], what=f"agent {agent.id!r} as a skill", path="agent")
    slug = skill_slug(agent.id if agent else elixir.id)
    lang = elixir.language
    description = _DESCRIPTION[lang].format(
        identity=elixir.identity, name=elixir.name, expertise=("、" if lang == "zh" else ", ").join(elixir.expertise)
    )
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1].rstrip() + "…"
    metadata = {"furnace-id": elixir.id, "furnace-version": str(elixir.version), "content-hash": elixir.content_hash}
    if agent is not None:
        metadata["lineage-hash"] = agent.lineage_hash
    front = yaml.safe_dump(
        {"name": slug, "description": " ".join(description.split()), "metadata": metadata},
        sort_keys=False,
        allow_unicode=True,
        width=10_000,
    )
    lineage_note = "" if agent is None else (", lineage" if lang == "en" else "、谱系")
    prompt = agent.system_prompt if agent is not None else render_prompt(elixir)
    body = f"# {elixir.name}\n\n{_INTRO[lang].format(lineage=lineage_note)}\n\n{prompt.rstrip()}\n"
    skill_md = f"---\n{front}---\n\n{body}"
    persona_json = json.dumps(persona, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    return SkillBundle(
        slug=slug,
        files={"SKILL.md": skill_md.encode("utf-8"), "references/persona.json": persona_json.encode("utf-8")},
    )


def write_skill_folder(target: Elixir | Agent, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/<slug>/…``; returns the skill folder."""
    bundle = build_skill(target)
    root = Path(out_dir) / bundle.slug
    for rel, content in sorted(bundle.files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


def skill_zip_bytes(target: Elixir | Agent) -> bytes:
    """The skill as a zip (entries under ``<slug>/``), byte-identical for the same input."""
    bundle = build_skill(target)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for rel in sorted(bundle.files):
            info = zipfile.ZipInfo(f"{bundle.slug}/{rel}", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, whatever the host
            info.external_attr = 0o100644 << 16
            zf.writestr(info, bundle.files[rel], compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return buffer.getvalue()

"""Interoperability: Character Card V2/V3 (JSON, PNG) and skill export.

- :mod:`furnace.interop.cards` — import/export cards (``import_card_file``,
  ``is_card_file``, ``card_for``, ``export_card_json``, ``export_card_png``).
- :mod:`furnace.interop.skill` — ``<slug>/SKILL.md`` + ``references/persona.json``
  as a folder or a byte-reproducible zip.
- ``find_secret`` / ``refuse_secrets`` (from :mod:`furnace.domain.secrets`) — the secret scan that guards exports.
"""

from __future__ import annotations

from furnace.domain.secrets import find_secret, refuse_secrets
from furnace.interop.cards import (
    CardImport,
    card_for,
    elixir_from_card,
    export_card_json,
    export_card_png,
    import_card_file,
    is_card_file,
    read_card_bytes,
    read_card_file,
)
from furnace.interop.skill import SkillBundle, build_skill, skill_zip_bytes, write_skill_folder

__all__ = [
    "CardImport",
    "SkillBundle",
    "build_skill",
    "card_for",
    "elixir_from_card",
    "export_card_json",
    "export_card_png",
    "find_secret",
    "import_card_file",
    "is_card_file",
    "read_card_bytes",
    "read_card_file",
    "refuse_secrets",
    "skill_zip_bytes",
    "write_skill_folder",
]

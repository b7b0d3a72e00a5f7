"""Personas: list and search, edit (a save is a new version), preview, history, diff, delete."""

from __future__ import annotations

from typing import Any

import streamlit as st

from furnace.domain.diff import diff_elixirs, format_diff
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import FurnaceError, InputError, NotFound
from furnace.domain.render import render_prompt
from furnace_app.services import picker, services, show_error

NEW = "+ New persona"
ERRORS_KEY = "persona_errors"
FLASH_KEY = "persona_flash"

st.title("Personas")
svc = services()


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _field_error(*fields: str) -> None:
    """Show the validation messages of the last failed save of this editor next to the field."""
    editor, problems = st.session_state.get(ERRORS_KEY, ("", []))
    if editor != st.session_state.get("persona_editor"):
        return
    for name, message in problems:
        if any(name == f or name.startswith(f + ".") or name.startswith(f + "[") for f in fields):
            st.error(message, icon=":material/error:")


def _flash() -> None:
    """The outcome of the save that triggered this rerun (shown once), under the Save button where the
    user's eyes are, and as a toast, which shows wherever the page is scrolled."""
    kind, text = st.session_state.pop(FLASH_KEY, (None, ""))
    if kind:
        getattr(st, kind)(text)
        st.toast(text, icon=":material/error:" if kind == "error" else ":material/check_circle:")


def _editor(base: Elixir | None) -> dict[str, Any]:
    """Render the editor for ``base`` (None = new) and return the edited data."""
    key = f"ed-{base.id}-{base.version}" if base else "ed-new"
    st.session_state["persona_editor"] = key
    b = base
    left, right = st.columns(2)
    with left:
        name = st.text_input("Name *", value=b.name if b else "", key=f"{key}-name")
        _field_error("name")
        ident = st.text_input(
            "Id",
            value=b.id if b else "",
            key=f"{key}-id",
            disabled=b is not None,
            help="Lowercase slug; derived from the name when empty.",
        )
        _field_error("id")
    with right:
        language = st.selectbox(
            "Language", ["en", "zh"], index=(["en", "zh"].index(b.language) if b else 0), key=f"{key}-lang"
        )
        priority = st.number_input("Priority", 0, 10_000, value=b.priority if b else 100, key=f"{key}-prio")
        _field_error("priority")
    identity = st.text_area(
        "Identity * (one sentence)", value=b.identity if b else "", key=f"{key}-identity", height=70
    )
    _field_error("identity")
    expertise = st.text_area(
        "Expertise * (one per line)", value="\n".join(b.expertise) if b else "", key=f"{key}-expertise"
    )
    _field_error("expertise")
    principles = st.text_area(
        "Principles * (one executable instruction per line)",
        value="\n".join(b.principles) if b else "",
        key=f"{key}-principles",
    )
    _field_error("principles")

    tone_base = b.tone if b else None
    with st.expander("Tone"):
        tone = {
            dim: st.slider(
                dim, 0.0, 1.0, float(getattr(tone_base, dim)) if tone_base else 0.5, 0.05, key=f"{key}-tone-{dim}"
            )
            for dim in ("formality", "conciseness", "humor", "empathy")
        }
        _field_error("tone")
    with st.expander("Constraints"):
        c = b.constraints if b else None
        max_length = st.number_input(
            "Max length (0 = none)", 0, 100_000, value=(c.max_length or 0) if c else 0, key=f"{key}-maxlen"
        )
        forbidden = st.text_area(
            "Forbidden topics (one per line)", value="\n".join(c.forbidden_topics) if c else "", key=f"{key}-forbidden"
        )
        markdown = st.checkbox("Must use markdown", value=c.must_use_markdown if c else False, key=f"{key}-md")
        _field_error("constraints")
    with st.expander("Few-shot examples"):
        rows = [{"input": s.input, "output": s.output} for s in (b.few_shots if b else [])]
        shots = st.data_editor(
            rows or [{"input": "", "output": ""}], num_rows="dynamic", key=f"{key}-shots", width="stretch"
        )
        _field_error("few_shots")
    with st.expander("Tools, conflicts and style notes"):
        tools = st.text_area(
            "Tools (allow-list, one per line)", value="\n".join(b.tools) if b else "", key=f"{key}-tools"
        )
        _field_error("tools")
        conflicts = st.text_area(
            "Never fuse with (ids or names, one per line)",
            value="\n".join(b.conflicts_with) if b else "",
            key=f"{key}-conflicts",
        )
        _field_error("conflicts_with")
        notes = st.text_area("Style notes", value=b.style_notes if b else "", key=f"{key}-notes")
        _field_error("style_notes")
    return {
        "id": ident.strip() or None,
        "name": name,
        "language": language,
        "identity": identity,
        "expertise": _lines(expertise),
        "principles": _lines(principles),
        "tone": tone,
        "constraints": {
            "max_length": int(max_length) or None,
            "forbidden_topics": _lines(forbidden),
            "must_use_markdown": markdown,
        },
        "few_shots": [
            r for r in _rows(shots) if str(r.get("input") or "").strip() or str(r.get("output") or "").strip()
        ],
        "tools": _lines(tools),
        "priority": int(priority),
        "conflicts_with": _lines(conflicts),
        "style_notes": notes,
        "style_preferences": [p.model_dump(mode="json") for p in b.style_preferences] if b else [],
    }


def _rows(value: Any) -> list[dict[str, Any]]:
    if hasattr(value, "to_dict"):
        return value.to_dict("records")
    return list(value or [])


def _save(data: dict[str, Any]) -> None:
    """Validate and store; the outcome (and any field errors) shows after a rerun, next to the fields."""
    editor = st.session_state.get("persona_editor")
    try:
        elixir = parse_elixir(data)
        try:
            previous: int | None = svc.store.get_elixir(elixir.id).version
        except NotFound:
            previous = None
        ref = svc.store.save_elixir(elixir)
    except InputError as err:
        st.session_state[ERRORS_KEY] = (editor, err.problems or [(err.field or "", str(err))])
        st.session_state[FLASH_KEY] = ("error", f"Not saved: {err}")
        st.rerun()
    except FurnaceError as err:
        show_error(err)
        return
    st.session_state[ERRORS_KEY] = ("", [])
    if previous == ref.version:
        st.session_state[FLASH_KEY] = ("info", f"No change: {ref.id} v{ref.version} already has this content.")
    else:
        st.session_state[FLASH_KEY] = (
            "success",
            f"Saved {ref.id} v{ref.version} · content_hash {ref.content_hash[:16]}…",
        )
    st.session_state["persona_pick"] = ref.id
    st.rerun()


query = st.text_input("Search by name, id or expertise", key="persona_query")
try:
    library = svc.store.list_elixirs(query=query or None)
except FurnaceError as err:
    show_error(err)
    st.stop()

labels = {e.id: f"{e.name} ({e.id}, v{e.version}, {e.language})" for e in library}
options = [NEW, *labels]
choice = picker(
    "Persona",
    options,
    key="persona_select",
    pick_key="persona_pick",
    format_func=lambda o: labels.get(o, o),
    default=options[1] if labels else NEW,
)
current = None if choice == NEW else svc.store.get_elixir(choice)
st.caption(f"{len(library)} persona(s) in the library")

edit_tab, history_tab = st.tabs(["Edit", "History & diff"])
with edit_tab:
    form_col, preview_col = st.columns([3, 2])
    with form_col:
        data = _editor(current)
        save_col, delete_col = st.columns(2)
        if save_col.button("Save as new version" if current else "Create persona", type="primary", key="persona_save"):
            _save(data)
        if current is not None:
            confirm = delete_col.checkbox("I want to withdraw this persona", key="persona_confirm_delete")
            if delete_col.button("Delete (soft)", disabled=not confirm, key="persona_delete"):
                try:
                    svc.store.delete_elixir(current.id)
                    st.session_state.pop("persona_pick", None)
                    st.session_state[FLASH_KEY] = ("success", f"{current.id} withdrawn; its history stays readable.")
                    st.rerun()
                except FurnaceError as err:
                    show_error(err)
        _flash()
    with preview_col:
        lang = st.radio(
            "Preview language",
            ["zh", "en"],
            horizontal=True,
            index=["zh", "en"].index(data["language"]),
            key="persona_preview_lang",
        )
        try:
            st.code(render_prompt(parse_elixir(data), lang), language="markdown", wrap_lines=True)
        except InputError as err:
            st.warning(f"Preview unavailable until the persona is valid: {err}")
        if current is not None:
            st.caption(f"content_hash {current.content_hash}")

with history_tab:
    if current is None:
        st.info("Pick a persona to see its versions.")
    else:
        versions = svc.store.history(current.id)
        st.dataframe(
            [
                {
                    "version": v.version,
                    "created_at": v.created_at,
                    "content_hash": v.content_hash[:16],
                    "withdrawn": v.withdrawn,
                }
                for v in versions
            ],
            width="stretch",
            hide_index=True,
        )
        numbers = [v.version for v in versions]
        a_col, b_col = st.columns(2)
        chain = f"{current.id}-{len(numbers)}"  # a new version resets the pair to the latest step
        a = a_col.selectbox("From version", numbers, index=max(0, len(numbers) - 2), key=f"persona_diff_a-{chain}")
        b = b_col.selectbox("To version", numbers, index=len(numbers) - 1, key=f"persona_diff_b-{chain}")
        changes = diff_elixirs(svc.store.get_elixir(current.id, a), svc.store.get_elixir(current.id, b))
        st.code(format_diff(changes) or "(no differences)", language="diff")

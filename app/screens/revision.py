"""Revision chat: pick or create content; suggest edits in a chat; version chain, diff, rollback, preferences,
and the accepted suggestions sent back to the persona (reflect: a new persona version)."""

from __future__ import annotations

from typing import Literal

import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.evolution.revision_reflect import reflect_from_revisions
from furnace.writing.content import generate_content
from furnace.writing.revision import RevisionOutcome, diff_versions, revise, rollback
from furnace_app.services import picker, services, show_error

NEW = "+ New content"
PICK = "revision_pick"
# What a chat turn's status box says when the turn ends: an edit that was not made is never "done".
OUTCOMES: dict[str, tuple[str, Literal["complete", "error"]]] = {
    "revised": ("Edited: V{version}", "complete"),
    "noted": ("Noted, no edit made", "complete"),
    "unchanged": ("No change made", "complete"),
}


def outcome_label(outcome: RevisionOutcome) -> tuple[str, Literal["complete", "error"]]:
    """The status box's label and state for a finished turn (any other status is an edit not done)."""
    label, state = OUTCOMES.get(outcome.status, ("Not done ({status})", "error"))
    version = outcome.version.version if outcome.version is not None else "?"
    return label.format(version=version, status=outcome.status), state


st.title("Revision chat")
svc = services()
contents = svc.content_store

try:
    items = contents.list_contents()
    personas = svc.store.list_elixirs()
except FurnaceError as err:
    show_error(err)
    st.stop()

labels = {c.id: f"{c.topic} — {c.persona_id} ({c.id})" for c in items}
options = [NEW, *labels]
choice = picker(
    "Content",
    options,
    key="revision_select",
    pick_key=PICK,
    format_func=lambda o: labels.get(o, o),
    default=options[1] if labels else NEW,
)

if choice == NEW:
    with st.container(border=True):
        names = {p.id: f"{p.name} ({p.id}, {p.language})" for p in personas}
        persona_id = st.selectbox("Persona", list(names), format_func=lambda i: names[i], key="revision_persona")
        topic = st.text_input("Topic", key="revision_topic", placeholder="e.g. summer sunscreen tips")
        if st.button("Write V1", type="primary", key="revision_create"):
            try:
                with st.spinner("Writing V1…"):
                    content, _ = generate_content(svc.store, contents, svc.llm, persona_id=persona_id, topic=topic)
                st.session_state[PICK] = content.id
                st.rerun()
            except FurnaceError as err:
                show_error(err)
    st.stop()

content = contents.get_content(choice)
chat_col, side_col = st.columns([3, 2])

with chat_col:
    # The caption, the current version and the messages sit in containers made before the input,
    # filled after any edit: new messages appear above the input and the caption names the new version.
    header = st.container()
    thread = st.container()
    suggestion = st.chat_input("Suggest an edit, e.g. “too formal, make it livelier”", key="revision_input")
    session = contents.get_session(content.id)
    history = contents.messages(session.id) if session else []
    with thread:
        for message in history:
            role = "user" if message.role == "user" else "assistant"
            st.chat_message(role).write(message.content)
        if suggestion:
            st.chat_message("user").write(suggestion)  # shows at once; the edit runs below it
            with st.chat_message("assistant"):
                status = st.status("Editing…", expanded=False)
                try:
                    with status:
                        outcome = revise(svc.store, contents, svc.llm, content.id, suggestion)
                    label, state = outcome_label(outcome)
                    status.update(label=label, state=state)
                    st.write(outcome.reply.content)
                    if outcome.learned is not None and outcome.learned.learned:
                        st.caption(
                            "Learned: " + ", ".join(f"{p.dimension} → {p.value}" for p in outcome.learned.learned)
                        )
                except FurnaceError as err:
                    status.update(label="Not done: the edit was refused", state="error")
                    show_error(err)
    with header:
        current = contents.get_version(content.id)
        st.caption(
            f"{content.persona_id} · {content.language} · current V{current.version} · {current.word_count} words"
        )
        with st.expander(f"V{current.version}: {current.title}", expanded=False):
            st.markdown(current.body)

with side_col:
    versions = contents.versions(content.id)
    st.markdown("**Version chain**")
    st.caption(" → ".join(f"V{v.version}" for v in versions))
    st.dataframe(
        [
            {
                "version": f"V{v.version}",
                "source": v.source,
                "words": v.word_count,
                "title": v.title,
                "note": v.note,
                "created_at": v.created_at,
            }
            for v in versions
        ],
        width="stretch",
        hide_index=True,
    )
    numbers = [v.version for v in versions]
    if len(numbers) > 1:
        a_col, b_col = st.columns(2)
        chain = f"{content.id}-{len(numbers)}"  # a new version resets the pair to the latest step
        a = a_col.selectbox(
            "From", numbers, index=len(numbers) - 2, format_func=lambda n: f"V{n}", key=f"rev_diff_a-{chain}"
        )
        b = b_col.selectbox(
            "To", numbers, index=len(numbers) - 1, format_func=lambda n: f"V{n}", key=f"rev_diff_b-{chain}"
        )
        back = st.selectbox(
            "Roll back to",
            numbers[:-1],
            index=len(numbers) - 2,
            format_func=lambda n: f"V{n}",
            key=f"rev_rollback_to-{chain}",
        )
        if st.button("Roll back (adds a new version)", key="rev_rollback"):
            try:
                version = rollback(contents, content.id, int(back))
                st.success(f"Now V{version.version} (= V{back})")
                st.rerun()
            except FurnaceError as err:
                show_error(err)
    st.markdown("**Preferences learned so far**")
    try:
        persona = svc.store.get_elixir(content.persona_id)
        prefs = persona.style_preferences
        if prefs:
            st.dataframe(
                [
                    {
                        "dimension": p.dimension,
                        "value": p.value,
                        "count": p.count,
                        "weight": p.weight,
                        "evidence": p.evidence,
                    }
                    for p in prefs
                ],
                width="stretch",
                hide_index=True,
            )
        else:
            st.caption(f"None yet for {persona.id} v{persona.version}.")
    except FurnaceError as err:
        show_error(err)
    st.markdown("**Teach the persona**")
    st.caption(
        "Sends the suggestions accepted in this chat to the reflect operator: the persona gets a new version "
        "with targeted edits (principles, tone, constraints), recorded in its lineage."
    )
    if st.button("Reflect accepted suggestions into the persona", key="rev_reflect"):
        try:
            with st.spinner("Reflecting…"):
                done = reflect_from_revisions(
                    svc.store,
                    contents,
                    llm=svc.llm,
                    embedder=svc.embedder,
                    cache=svc.synthesis_cache,
                    content_id=content.id,
                    settings=svc.settings,
                )
            if done.status == "already":
                st.info(
                    "Every accepted suggestion of this chat was reflected already "
                    f"({done.persona.id} v{done.persona.version})."
                )
            else:
                st.success(
                    f"{done.previous.id} v{done.previous.version} → v{done.persona.version} "
                    f"(reflect, agent {done.agent_id}) from: {' / '.join(done.suggestions)}"
                )
                st.dataframe(
                    [{"field": n.field, "chose": n.chose, "reason": n.reason} for n in done.notes],
                    width="stretch",
                    hide_index=True,
                )
        except FurnaceError as err:
            show_error(err)

if len(numbers) > 1:
    st.divider()
    va, vb = contents.get_version(content.id, int(a)), contents.get_version(content.id, int(b))
    st.markdown(f"**Diff V{va.version} → V{vb.version}**")
    left, right = st.columns(2)
    with left:
        st.markdown(f"*V{va.version}: {va.title}*")
        st.text(va.body)
    with right:
        st.markdown(f"*V{vb.version}: {vb.title}*")
        st.text(vb.body)
    st.code(diff_versions(va, vb, content.language).render(), language="diff", wrap_lines=True)

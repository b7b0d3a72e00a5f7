"""Arena: several personas in one session; messages per speaker, the plan on demand, stop and continue."""

from __future__ import annotations

import streamlit as st

from furnace.arena.events import FinalReply, PlanCreated, RunCancelled, RunFinished, SpeakerFailed, SpeakerStarted
from furnace.domain.errors import FurnaceError
from furnace_app.services import RECENT_AGENTS, picker, services, show_error

NEW = "+ New session"
PICK = "arena_pick"

st.title("Arena")
svc = services()
arena = svc.arena()

try:
    sessions = arena.store.list_sessions()
    library = svc.store.list_elixirs()
    agents = svc.store.list_agents(limit=RECENT_AGENTS)
except FurnaceError as err:
    show_error(err)
    st.stop()

members = {e.id: f"{e.name} ({e.id})" for e in library}
members.update({a.id: f"{a.elixir.name} ({a.id})" for a in agents})
labels = {s.id: f"{s.title or ', '.join(s.members)} ({s.id})" for s in sessions}
options = [NEW, *labels]
choice = picker(
    "Session",
    options,
    key="arena_select",
    pick_key=PICK,
    format_func=lambda o: labels.get(o, o),
    default=options[1] if labels else NEW,
)

if choice == NEW:
    with st.container(border=True):
        chosen = st.multiselect(
            "Members (1–8, the first is primary)",
            list(members),
            max_selections=8,
            format_func=lambda i: members.get(i, i),
            key="arena_members",
        )
        title = st.text_input("Title (optional)", key="arena_title")
        if st.button("Create session", type="primary", key="arena_create"):
            try:
                session = arena.create_session(chosen, title=title)
                st.session_state[PICK] = session.id
                st.rerun()
            except FurnaceError as err:
                show_error(err)
    st.stop()

session = arena.store.get_session(choice)
names = {m: members.get(m, m) for m in session.members}
st.caption(f"members: {', '.join(session.members)} · model {session.model} · primary {session.primary}")
top = st.columns([1, 1, 4])
show_plans = top[2].toggle("Show plans", key="arena_show_plans")
runs = {r.run_id: r for r in arena.store.list_runs(session.id)}
running = [r for r in runs.values() if r.status == "running"]
if top[0].button("Stop", key="arena_stop", disabled=not running, help="Stops before the next speaker."):
    try:
        for event in arena.stream(session.id, "stop"):
            if isinstance(event, RunCancelled):
                st.info(f"Stopped: {event.completed} answered, {event.remaining} not started.")
    except FurnaceError as err:
        show_error(err)
unfinished = any(r.status in ("running", "cancelled") for r in runs.values())  # a failed turn has nothing to resume
if top[1].button("Continue", key="arena_continue", disabled=not unfinished):
    try:
        arena.say(session.id, "continue")
        st.rerun()
    except FurnaceError as err:
        show_error(err)


def _plan(run_id: str) -> None:
    plan = arena.plan_of(run_id)
    if plan is None:
        return
    with st.expander(f"plan ({plan.source}, {len(plan.speakers)} speaker(s))"):
        st.dataframe(
            [
                {"#": i + 1, "member": s.member_id, "ordinal": s.ordinal, "task": s.task}
                for i, s in enumerate(plan.speakers)
            ],
            width="stretch",
            hide_index=True,
        )
        if plan.reason:
            st.caption(plan.reason)


last_run = None
for message in arena.messages(session.id):
    if message.role == "user":
        if show_plans and last_run:
            _plan(last_run)
        st.chat_message("user").write(message.text)
        last_run = message.run_id
    else:
        st.chat_message("assistant", avatar=":material/smart_toy:").markdown(
            f"**{message.member_name}**: {message.text}"
        )
if show_plans and last_run:
    _plan(last_run)

text = st.chat_input("Say something, e.g. “sound off”, “@all what do you think?” or “@name …”", key="arena_input")
if text:
    st.chat_message("user").write(text)
    status = st.status("Running the turn…", expanded=True)
    try:
        for event in arena.stream(session.id, text):
            if isinstance(event, PlanCreated) and show_plans:
                status.write("plan: " + ", ".join(s.member_id for s in event.plan.speakers))
            elif isinstance(event, SpeakerStarted):
                status.update(label=f"{event.name} is answering…")
            elif isinstance(event, FinalReply):
                st.chat_message("assistant", avatar=":material/smart_toy:").markdown(f"**{event.name}**: {event.text}")
            elif isinstance(event, SpeakerFailed):
                st.warning(f"{event.name} skipped after {event.attempts} attempts: {event.error}")
            elif isinstance(event, RunFinished) and event.status == "failed":
                status.update(label=f"No reply: {event.failed} failed", state="error", expanded=False)
            elif isinstance(event, RunFinished):
                status.update(
                    label=f"Done: {event.replies} replies, {event.failed} failed", state="complete", expanded=False
                )
            elif isinstance(event, RunCancelled):
                status.update(label="Stopped", state="complete", expanded=False)
    except FurnaceError as err:
        status.update(label="Failed", state="error")
        show_error(err)

"""Assistant: ask about furnace's data in plain words; tables shown directly; a visible scope."""

from __future__ import annotations

import streamlit as st

from furnace.assistant.answer import Assistant, Done
from furnace.assistant.scope import Scope
from furnace.domain.errors import FurnaceError
from furnace_app.services import services, show_error

SESSION = "app"

st.title("Lab assistant")
svc = services()
data = svc.assist_data
state = data.load_state(SESSION)

scope_col, clear_col = st.columns([5, 1])
scope_col.info(
    f"Scope: {state.locked.label() if state.locked else 'everything'}{' (locked)' if state.locked else ''}",
    icon=":material/filter_alt:",
)
if state.locked and clear_col.button("Clear scope", key="assist_clear"):
    state.locked = None
    data.save_state(state)
    st.rerun()


def _render(done: Done, key: str) -> None:
    st.markdown(done.lead)
    if done.result is None:
        return
    st.caption(f"{done.result.title} · {len(done.result.items)} row(s) · scope: {done.scope_label}")
    st.dataframe(done.result.items, width="stretch", hide_index=True, column_order=done.result.columns)
    cols = st.columns(max(1, len(done.result.actions)))
    for i, (col, action) in enumerate(zip(cols, done.result.actions, strict=False)):
        if col.button(action.label, key=f"{key}-act-{i}"):
            if action.kind == "lock_scope":
                state.locked = Scope(**action.target)
                data.save_state(state)
                st.rerun()
            elif action.kind == "open_agent":
                st.session_state.pop("_applied_lineage_pick", None)
                st.session_state["lineage_pick"] = action.target["agent_id"]
                st.switch_page("screens/lineage.py")
            elif action.kind == "compare":
                st.session_state["compare_pick"] = action.target["agent_ids"]
                st.switch_page("screens/compare.py")
            elif action.kind == "open_persona":
                st.session_state.pop("_applied_persona_pick", None)
                st.session_state["persona_pick"] = action.target["persona"]
                st.switch_page("screens/personas.py")


answers: list[tuple[str, Done]] = st.session_state.setdefault("assistant_answers", [])
for i, (asked, answered) in enumerate(answers):
    st.chat_message("user").write(asked)
    with st.chat_message("assistant"):
        _render(answered, f"ans-{i}")

question = st.chat_input("Ask, e.g. “which agents scored best?” or “只看 experiment X”")
if question:
    st.chat_message("user").write(question)
    with st.chat_message("assistant"):
        try:
            assistant = Assistant(
                data, svc.llm, context_limit=svc.settings.context_limit, count_tokens=svc.token_counter
            )
            with st.status("Thinking…", expanded=False) as status:
                events = []
                for event in assistant.ask(question, state):
                    events.append(event)
                    if event.type == "status":
                        status.update(label=event.text)
                status.update(label="Done", state="complete")
            data.save_state(state)
            done = events[-1]
            assert isinstance(done, Done), "Assistant.ask ends with a Done event"
            answers.append((question, done))
            _render(done, f"ans-{len(answers) - 1}")  # same key on the next run: its buttons work
        except FurnaceError as err:
            show_error(err)

"""Judge: people pick the better of two candidates' replies, blind; what their picks say about the judges.

The pairs, the pick as stored and its reveal come from ``furnace.views.picking`` (``furnace pick`` in the
terminal uses the same functions): the pairs an experiment weighting ``human`` is waiting for come first.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

import streamlit as st

from furnace.domain.errors import FurnaceError
from furnace.runtime import Runtime, self_judging_warning
from furnace.scoring.agreement import MIN_PICKS
from furnace.scoring.picks import Choice
from furnace.views.picking import (
    BlindPair,
    as_pick,
    experiment_calibration,
    experiment_probes,
    grading_judge,
    pair_replies,
    recorded_judge,
    reveal,
    session_pairs,
    waiting,
)
from furnace_app.services import UNKNOWN, for_table, services, show_error

PAIR, SKIPPED, NOTICE, SEED = "judge_pair", "judge_skipped", "judge_notice", "judge_seed"


def _key(pair: BlindPair) -> tuple[str, str, str]:
    return (pair.probe, *sorted((pair.a.agent_id, pair.b.agent_id)))  # type: ignore[return-value]


def _choose(svc: Runtime, experiment_id: str, choice: Choice) -> None:
    """A pick button's callback (runs before the page): store the pick, reveal the pair, clear the reason."""
    state = st.session_state
    pair: BlindPair | None = state.get(PAIR)
    who = str(state.get("judge_who") or "").strip()
    if pair is None:
        return
    try:
        stored = svc.picks.add(as_pick(pair, experiment_id, choice, who, str(state.get("judge_reason") or "")))
    except FurnaceError as err:
        state[NOTICE] = ("error", str(err))
        return
    state[NOTICE] = ("success", f"Stored {stored.pick_id} ({choice}): {reveal(pair)}.")
    state["judge_reason"] = ""
    state[PAIR] = None
    try:  # MLflow is for comparison only: the pick is stored above whatever happens here
        svc.log_picks([stored], {(r.agent_id, r.generation): r.slot for r in (pair.a, pair.b)})
    except Exception as err:
        state[NOTICE] = ("warning", f"{state[NOTICE][1]} Not logged to MLflow: {err.__class__.__name__}.")


def _skip(experiment_id: str) -> None:
    pair: BlindPair | None = st.session_state.get(PAIR)
    if pair is not None:
        st.session_state.setdefault(SKIPPED, {}).setdefault(experiment_id, set()).add(_key(pair))
    st.session_state[PAIR] = None
    st.session_state[NOTICE] = ("info", "Skipped: no pick stored.")


def _undo(svc: Runtime, experiment_id: str) -> None:
    """Take back the person's last pick in the experiment (kept, marked undone)."""
    who = str(st.session_state.get("judge_who") or "").strip()
    last = svc.picks.last(experiment_id, who) if who else None
    if last is None:
        st.session_state[NOTICE] = ("error", f"{who or 'You'} have no pick to undo in {experiment_id}.")
        return
    undone = svc.picks.undo(last.pick_id, who=who)
    with contextlib.suppress(Exception):  # MLflow is for comparison only; the undo is stored
        svc.withdraw_pick(undone)
    st.session_state[NOTICE] = (
        "success",
        f"Undone: {undone.pick_id} ({undone.probe}: {undone.choice}); it is kept, marked undone, and counts no more.",
    )


def calibration_section(records: Any, every_pick: Any, judge: str) -> None:
    """Each judge's agreement with people (interval, number of picks, "not yet meaningful"), people's ranking."""
    st.subheader("What the picks say about the judges")
    result = experiment_calibration(records, every_pick, judge)
    data = result.as_dict()
    st.caption(result.lines()[0] + f"; below {MIN_PICKS} decided picks a judge's figure is not yet meaningful.")
    rows = [
        {
            "judge": j["judge"],
            "agreement with people": None if j["agreement"] is None else round(j["agreement"], 3),
            "95% interval": "–".join(f"{v:.2f}" for v in j["interval"]) if j["interval"] else None,
            "decided picks": j["picks"],
            "ties": j["ties"],
            "meaningful": "yes" if j["meaningful"] else f"not yet meaningful: fewer than {MIN_PICKS} decided picks",
        }
        for j in data["judges"]
    ]
    st.dataframe(for_table(rows), width="stretch", hide_index=True)
    if result.people:
        st.markdown("**People's ranking** (Bradley–Terry: the chance to beat an average picked agent)")
        ranking = sorted(result.people.items(), key=lambda kv: -kv[1])
        st.dataframe([{"agent": a, "rating": round(v, 3)} for a, v in ranking], width="stretch", hide_index=True)
        st.caption(result.lines()[-1].strip())


st.title("Judge")
svc = services()
try:
    experiments = svc.results.list_experiments()
except FurnaceError as err:
    show_error(err)
    st.stop()
if not experiments:
    st.info(
        "No experiments yet: run `furnace experiment run furnace/resources/experiments/demo.yaml` (or `furnace demo`)."
    )
    st.stop()
names = {e.experiment_id: f"{e.name} · {e.experiment_id} · {e.status}" for e in experiments}
exp_id = st.selectbox("Experiment", list(names), format_func=lambda i: names.get(i, i), key="judge_experiment")
exp = svc.results.get_experiment(exp_id)
if exp is None:
    st.error(f"No experiment {exp_id}.")
    st.stop()
judge = recorded_judge(exp)
warning = self_judging_warning(exp.model, grading_judge(exp))
if warning:
    st.warning(warning.removeprefix("warning: "), icon=":material/warning:")
records = svc.results.individuals(exp_id)
every_pick = svc.picks.picks(exp_id, include_undone=True)
picks = [p for p in every_pick if not p.undone]
try:
    probes = experiment_probes(exp)
except FurnaceError as err:
    show_error(err)
    st.caption("The Judge page reads shipped probe sets; for another one use `furnace pick ID --probes-dir DIR`.")
    st.stop()
ask = waiting(exp, records, svc.results.generations(exp_id), picks, probes)
if ask is not None:
    weight = (exp.config.get("scorers") or {}).get("human", 0)
    text = (
        f"**{len(ask.waiting)} pairs waiting** of {len(ask.asked)} this experiment asked after generation "
        f"{ask.generation}: it weights people's picks (the human objective, weight {weight:g}); they come first."
    )
    (st.info if ask.waiting else st.success)(text)

who = st.text_input("Your name (stored with each pick)", key="judge_who", placeholder="e.g. ana")
notice = st.session_state.pop(NOTICE, None)
if notice:
    getattr(st, notice[0])(notice[1])

seed = st.session_state.setdefault(SEED, random.SystemRandom().randrange(2**31))  # this session's blind order
pair: BlindPair | None = st.session_state.get(PAIR)
if pair is None or st.session_state.get("judge_pair_experiment") != exp_id:
    skipped = st.session_state.get(SKIPPED, {}).get(exp_id, set())
    drawn = session_pairs(
        exp, records, svc.results.generations(exp_id), picks, probes, count=1, seed=seed, skip=skipped
    )
    pair = drawn[0] if drawn else None
    st.session_state[PAIR] = pair
    st.session_state["judge_pair_experiment"] = exp_id

if pair is None:
    st.info("No pair to show: this experiment has fewer than two scored candidates, or you skipped every pair.")
else:
    probe = next(p for p in probes.probes if p.id == pair.probe)
    with st.container(border=True):
        st.markdown(f"**Probe** `{probe.id}`")
        st.write(probe.message)
    try:
        with st.spinner("Reading the replies…"):
            reply_a, reply_b = pair_replies(svc.llm_for(exp.model), pair, probe, seed=exp.seed)
    except FurnaceError as err:
        show_error(err)
        st.stop()
    for column, label, text in zip(st.columns(2), ("A", "B"), (reply_a, reply_b), strict=True):
        with column, st.container(border=True):
            st.subheader(label)
            st.markdown(text or "(empty reply)")
    st.caption(f"Blind: the order shown comes from this session's seed ({seed}), stored with each pick.")
    st.text_input("Why (optional)", key="judge_reason", max_chars=500)
    a_col, b_col, tie_col, skip_col = st.columns(4)
    blocked = not who.strip()
    for column, label, choice in ((a_col, "A is better", "A"), (b_col, "B is better", "B"), (tie_col, "Tie", "tie")):
        column.button(
            label,
            key=f"judge_{choice.lower()}",
            type="primary" if choice != "tie" else "secondary",
            disabled=blocked,
            on_click=_choose,
            args=(svc, exp_id, choice),
            width="stretch",
        )
    skip_col.button("Skip", key="judge_skip", on_click=_skip, args=(exp_id,), width="stretch")
    if blocked:
        st.caption("Say who you are above to pick.")
st.button("Undo my last pick", key="judge_undo", on_click=_undo, args=(svc, exp_id), disabled=not who.strip())
st.caption(
    f"{len(picks)} {'pick' if len(picks) == 1 else 'picks'} in this experiment"
    + (f" ({len(every_pick) - len(picks)} undone)" if len(every_pick) > len(picks) else "")
    + f"; judge: {judge or UNKNOWN}"
)
calibration_section(records, every_pick, judge)

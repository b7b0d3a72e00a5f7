"""Cache keys are complete and minimal: every input that shapes an answer misses the cache,
every input that does not (who asked, a persona's id or version) hits it — for each task kind."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import pytest

from furnace.arena.directives import Directive, DirectiveKind
from furnace.arena.supervisor import build_plan_request
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.render import render_prompt
from furnace.evolution.evaluate import reply
from furnace.fusion.operators import prompts
from furnace.fusion.operators.reflect import build_reflect_request
from furnace.llm.cache import CachedLLM
from furnace.llm.context import compress_request
from furnace.llm.fakes import FakeLLM
from furnace.llm.offline.engine import RULES_VERSION, OfflineEngine, rules_version
from furnace.llm.seam import LLMRequest, Message, TaskKind, answer_key, system_user
from furnace.scoring.judge import build_judge_request
from furnace.scoring.probes import Probe
from furnace.writing.content import ContentVersion, RevisionRecord, build_generate_request
from furnace.writing.preferences import build_extract_request
from furnace.writing.revision import build_revise_request

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def persona(**changes: object) -> Elixir:
    data: dict[str, object] = {
        "id": "tea-master",
        "name": "Tea Master",
        "identity": "You are a tea master who explains brewing plainly.",
        "expertise": ["green tea", "brewing"],
        "principles": ["Answer briefly.", "Name the water temperature."],
    }
    data.update(changes)
    return parse_elixir(data)


def _reply_request(p: Elixir) -> LLMRequest:
    seen: list[LLMRequest] = []
    reply(FakeLLM(respond=lambda r: seen.append(r) or "ok"), p, render_prompt(p), Probe(id="p1", message="Hi?"), seed=3)
    return seen[0]


def _revision() -> RevisionRecord:
    return RevisionRecord(
        id="rev-1",
        content_id="cnt-1",
        session_id="ses-1",
        persona_id="tea-master",
        persona_version=1,
        suggestions=("shorter",),
        from_version=1,
        to_version=2,
        original_title="Tea",
        original_body="Brew it. Then drink it slowly.",
        revised_title="Tea",
        revised_body="Brew it.",
        created_at=NOW,
    )


_OPTION = {"label": "formal", "value": 0.8, "priority": 100, "source": "a"}
_CURRENT = ContentVersion(
    content_id="cnt-1", version=1, title="Tea", body="Brew it. Drink.", word_count=3, created_at=NOW
)

# One real builder per task kind (the request every face sends), given a persona.
BUILDERS: dict[TaskKind, Callable[[Elixir], LLMRequest]] = {
    TaskKind.IDENTITY: lambda p: prompts.build_identity_request([p, persona(id="coach", name="Coach")], language="en"),
    TaskKind.REWRITE: lambda p: prompts.build_rewrite_request(p.principles[0], language="en"),
    TaskKind.ADJUDICATE: lambda p: prompts.build_adjudicate_request(
        "tone", [_OPTION, {**_OPTION, "label": "casual"}], rule="stricter", language="en"
    ),
    TaskKind.ROUTE: lambda p: prompts.build_route_request(
        "How hot?", [{"ref": "a@1", "name": p.name, "expertise": list(p.expertise)}], language="en"
    ),
    TaskKind.REPLY: _reply_request,
    TaskKind.JUDGE: lambda p: build_judge_request(p, "How hot?", "80 degrees.", "fidelity", seed=1),
    TaskKind.GENERATE: lambda p: build_generate_request(p, "green tea", seed=1),
    TaskKind.REVISE: lambda p: build_revise_request(p, _CURRENT, ["make it shorter"], seed=1),
    TaskKind.EXTRACT_PREFERENCES: lambda p: build_extract_request(_revision(), language=p.language),
    TaskKind.PLAN: lambda p: build_plan_request("How hot?", [p], Directive(kind=DirectiveKind.OPEN)),
    TaskKind.COMPRESS: lambda p: compress_request(
        [Message(role="user", content="hi"), Message(role="assistant", content="hello")],
        target_tokens=40,
        previous_summary="",
        language="en",
    ),
    TaskKind.REFLECT: lambda p: build_reflect_request(p, "fidelity: missing: water temperature", seed=1),
    TaskKind.ASSIST: lambda p: system_user(
        TaskKind.ASSIST, "Classify.", "who shines?", temperature=0.0, seed=0, inputs={"mode": "classify"}
    ),
}

OFFLINE = {"engine_version": f"rules-{RULES_VERSION}", "reads_inputs": True}
REAL = {"engine_version": "", "reads_inputs": False}

SHAPING: dict[str, Callable[[LLMRequest], LLMRequest]] = {
    "messages": lambda r: r.model_copy(update={"messages": (*r.messages, Message(role="user", content="more"))}),
    "temperature": lambda r: r.model_copy(update={"temperature": r.temperature + 0.1}),
    "seed": lambda r: r.model_copy(update={"seed": (r.seed or 0) + 1}),
    "max_tokens": lambda r: r.model_copy(update={"max_tokens": (r.max_tokens or 100) + 1}),
    "schema": lambda r: r.model_copy(update={"json_schema": {"type": "object", "title": "other"}}),
    "sample": lambda r: r.model_copy(update={"sample_index": r.sample_index + 1}),
}


def test_every_task_kind_has_a_builder_here() -> None:
    missing = set(TaskKind) - set(BUILDERS)
    assert not missing, f"add a builder for {sorted(k.value for k in missing)} to BUILDERS in this file"
    assert all(BUILDERS[task](persona()).task is task for task in TaskKind)


@pytest.mark.parametrize("task", list(TaskKind), ids=lambda t: t.value)
@pytest.mark.parametrize("traits", [OFFLINE, REAL], ids=["offline", "real"])
def test_what_shapes_the_answer_changes_the_key(task: TaskKind, traits: dict) -> None:
    request = BUILDERS[task](persona())
    key = request.cache_key("m", **traits)
    for name, change in SHAPING.items():
        assert change(request).cache_key("m", **traits) != key, name
    assert request.cache_key("other-model", **traits) != key
    assert request.model_copy(update={"task": _other(task)}).cache_key("m", **traits) != key
    # who asked never shapes an answer
    assert request.model_copy(update={"run_id": "run-elsewhere"}).cache_key("m", **traits) == key
    # inputs shape only a model that reads them (the offline engine); a real model reads the messages
    other_inputs = request.model_copy(update={"inputs": {**request.inputs, "extra": 1}})
    assert (other_inputs.cache_key("m", **traits) != key) is traits["reads_inputs"]


@pytest.mark.parametrize("task", list(TaskKind), ids=lambda t: t.value)
def test_the_offline_rules_version_is_in_the_key(task: TaskKind) -> None:
    request = BUILDERS[task](persona())
    assert request.cache_key("m", **OFFLINE) != request.cache_key("m", engine_version="rules-0", reads_inputs=True)


@pytest.mark.parametrize("task", list(TaskKind), ids=lambda t: t.value)
def test_a_personas_id_and_version_shape_a_real_models_key_only_through_the_messages(task: TaskKind) -> None:
    request = BUILDERS[task](persona())
    renamed = BUILDERS[task](persona(id="tea-master-copy", version=7))
    same_messages = renamed.messages == request.messages
    assert (renamed.cache_key("m", **REAL) == request.cache_key("m", **REAL)) is same_messages
    # the offline engine seeds its choices with its inputs (a persona's id included): they shape its answer
    assert (renamed.cache_key("m", **OFFLINE) == request.cache_key("m", **OFFLINE)) is (
        renamed.inputs == request.inputs
    )


def test_a_persona_content_change_misses_for_every_persona_task() -> None:
    for task in (TaskKind.REPLY, TaskKind.GENERATE, TaskKind.REVISE, TaskKind.REFLECT):
        before = BUILDERS[task](persona())
        after = BUILDERS[task](persona(principles=["Answer briefly.", "Name the steeping time."]))
        for traits in (OFFLINE, REAL):
            assert after.cache_key("m", **traits) != before.cache_key("m", **traits), task


def test_the_judge_never_sees_the_persona() -> None:
    """The judge receives the probe, the answer and the rubric: another persona's same answer is the same call."""
    before = BUILDERS[TaskKind.JUDGE](persona())
    after = BUILDERS[TaskKind.JUDGE](persona(principles=["Answer briefly.", "Name the steeping time."]))
    assert after.messages == before.messages  # a real model: the same call
    assert after.cache_key("m", **REAL) == before.cache_key("m", **REAL)
    # offline, a judgement is cached per persona (its ``subject``), which the judge rules never read
    assert {k: v for k, v in after.inputs.items() if k != "subject"} == {
        k: v for k, v in before.inputs.items() if k != "subject"
    }
    assert after.cache_key("m", **OFFLINE) != before.cache_key("m", **OFFLINE)
    text = " ".join(m.content for m in after.messages)
    assert "Answer briefly" not in text and "Answer briefly" not in str(after.inputs)


def test_through_the_response_cache_a_hit_and_a_miss() -> None:
    llm = CachedLLM(OfflineEngine())
    request = BUILDERS[TaskKind.JUDGE](persona())
    assert not llm.complete(request).cached
    assert llm.complete(request.model_copy(update={"run_id": "r2"})).cached
    assert not llm.complete(request.model_copy(update={"temperature": 0.5})).cached
    # a real model (messages only): other inputs with the same messages are the same call,
    # e.g. the same persona content under another id
    renamed = BUILDERS[TaskKind.JUDGE](persona(id="tea-copy", version=3))
    real = CachedLLM(FakeLLM(respond=lambda r: {"score": 0.5, "reason": "ok"}, reads_inputs=False))
    assert not real.complete(request).cached
    assert real.complete(request.model_copy(update={"inputs": {"anything": "else"}})).cached
    assert renamed.messages == request.messages and real.complete(renamed).cached
    assert answer_key(real, request) == request.cache_key("fake", reads_inputs=False)


def test_the_rules_version_changes_when_a_rule_table_changes(tmp_path: Path) -> None:
    source = Path(str(resources.files("furnace.llm.offline")))
    copy = tmp_path / "offline"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert rules_version(copy) == RULES_VERSION  # the version is the rules' content, not where they live
    phrases = copy / "reply_phrases.py"
    text = phrases.read_text(encoding="utf-8")
    quote = text.index('"', text.index("=")) + 1  # the first string literal of the first table
    phrases.write_text(text[:quote] + "Well, " + text[quote:], encoding="utf-8")
    assert rules_version(copy) != RULES_VERSION
    assert OfflineEngine.engine_version == f"rules-{RULES_VERSION}"


def _other(task: TaskKind) -> TaskKind:
    kinds = list(TaskKind)
    return kinds[(kinds.index(task) + 1) % len(kinds)]

"""The shipped test doubles, ReplayLLM in particular."""

from __future__ import annotations

import json

import pytest

from furnace.domain.errors import LLMError, LLMTimeout
from furnace.llm.fakes import EchoLLM, FakeLLM, FlakyLLM, ReplayLLM, ReplayMiss, SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.seam import LLM, TaskKind, answer_key, answer_traits, system_user


def ask(user: str, **kwargs):
    return system_user(TaskKind.REPLY, "sys", user, **kwargs)


def test_replay_records_once_then_replays_without_the_model(tmp_path):
    path = tmp_path / "rec" / "chat.json"
    real = FakeLLM(respond=lambda r: f"answer to {r.messages[-1].content}", model_name="real-model")
    recorder = ReplayLLM(path, inner=real)
    assert isinstance(recorder, LLM) and recorder.mode == "record"
    first = recorder.complete(ask("one", seed=1))
    recorder.complete(ask("two", seed=1))
    recorder.complete(ask("one", seed=1))  # already recorded: no second model call
    assert len(real.calls) == 2 and recorder.recorded == 2

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["model"] == "real-model" and len(data["completions"]) == 2

    replay = ReplayLLM(path)
    assert replay.mode == "replay" and replay.model_name == "real-model"
    again = replay.complete(ask("one", seed=1))
    assert again.text == first.text == "answer to one"
    assert again.model == "real-model"


def test_replay_unseen_key_fails_clearly(tmp_path):
    path = tmp_path / "chat.json"
    ReplayLLM(path, inner=FakeLLM(respond=lambda r: "x")).complete(ask("seen"))
    replay = ReplayLLM(path)
    with pytest.raises(ReplayMiss, match="no recorded completion for task 'reply'.*unseen question"):
        replay.complete(ask("unseen question"))
    with pytest.raises(ReplayMiss):
        replay.complete(ask("seen", seed=99))  # any content change is a new key
    assert len(replay.misses) == 2
    assert not issubclass(ReplayMiss, LLMError)  # never swallowed as a per-call model failure


def test_replay_without_recording_fails(tmp_path):
    with pytest.raises(ReplayMiss, match="no recording"):
        ReplayLLM(tmp_path / "missing.json")


def test_in_memory_recording_replays_with_a_counted_fallback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = FakeLLM(respond=lambda r: f"answer to {r.messages[-1].content}", model_name="real-model")
    recorder = ReplayLLM(None, inner=real)
    recorder.complete(ask("one"))
    recorder.complete(ask("two"))
    assert recorder.recorded == 2 and len(recorder) == 2 and list(tmp_path.iterdir()) == []  # nothing written

    backup = FakeLLM(respond=lambda r: "from the fallback", model_name="real-model")
    replay = recorder.replay(fallback=backup)
    recorder.complete(ask("later"))  # recorded after the replay was made: not in it
    assert replay.mode == "replay" and replay.model_name == "real-model"
    assert replay.complete(ask("two")).text == "answer to two" and backup.calls == []
    assert replay.complete(ask("later")).text == "from the fallback"
    assert replay.complete(ask("one", seed=3)).text == "from the fallback"
    assert len(backup.calls) == 2 and replay.misses == [
        ask("later").cache_key("real-model"),
        ask("one", seed=3).cache_key("real-model"),
    ]
    assert replay.recorded == 0 and len(replay) == 2  # misses are answered, never recorded

    with pytest.raises(ReplayMiss, match="the recording"):
        recorder.replay().complete(ask("never seen"))
    with pytest.raises(ValueError, match="fallback"):
        ReplayLLM(None, inner=real, fallback=backup)


def test_a_replay_finds_a_recorded_request_by_its_values_and_falls_back_to_the_key(monkeypatch):
    from furnace.llm.seam import LLMRequest

    recorder = ReplayLLM(None, inner=FakeLLM(respond=lambda r: f"answer to {r.messages[-1].content}"))
    recorder.complete(ask("one", temperature=0.3, run_id="first-run"))
    replay = recorder.replay()
    keyed: list[LLMRequest] = []
    original = LLMRequest.cache_key

    def counted(self: LLMRequest, *args: object, **kwargs: object) -> str:
        keyed.append(self)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LLMRequest, "cache_key", counted)
    # the same request asked by another run: found by its values, no canonical key computed
    assert replay.complete(ask("one", temperature=0.3, run_id="second-run")).text == "answer to one"
    assert keyed == []
    # other values, same canonical content (0.1 + 0.2 is 0.3 to the key): found through the key
    assert replay.complete(ask("one", temperature=0.1 + 0.2)).text == "answer to one"
    assert len(keyed) == 1 and replay.misses == []
    with pytest.raises(ReplayMiss):
        replay.complete(ask("one", temperature=0.4))
    # JSON writes None and NaN alike (null): a request with a NaN has no key, it is never served None's answer
    recorder.complete(ask("two", inputs={"weight": None}))
    with pytest.raises(ValueError, match="non-finite"):
        recorder.replay().complete(ask("two", inputs={"weight": float("nan")}))


def test_a_replay_with_a_fallback_keys_wrappers_like_its_model():
    engine = OfflineEngine()
    replay = ReplayLLM(None, inner=engine).replay(fallback=engine)
    request = ask("hi", seed=1, inputs={"message": "hi"})
    assert answer_traits(replay) == answer_traits(engine)
    assert answer_key(replay, request) == answer_key(engine, request)


def test_replay_of_the_offline_engine_is_faithful(tmp_path):
    path = tmp_path / "offline.json"
    engine = OfflineEngine()
    request = system_user(
        TaskKind.REPLY,
        "sys",
        "hi",
        inputs={
            "persona": {
                "name": "Ada",
                "language": "en",
                "identity": "A careful engineer.",
                "expertise": ["testing"],
                "principles": ["Be precise."],
            },
            "message": "How should I test?",
        },
    )
    recorded = ReplayLLM(path, inner=engine).complete(request)
    replayed = ReplayLLM(path).complete(request)
    assert replayed.text == recorded.text and replayed.model == engine.model_name


def test_fake_echo_slow_flaky_basics():
    fake = FakeLLM(["a", {"k": 1}, LLMTimeout("t")])
    assert fake.complete(ask("1")).text == "a"
    assert fake.complete(ask("2")).parsed == {"k": 1}
    with pytest.raises(LLMTimeout):
        fake.complete(ask("3"))
    assert len(fake.calls) == 3

    echo = EchoLLM()
    assert echo.complete(ask("hello")).text == "system: sys\nuser: hello"

    slow = SlowLLM(EchoLLM(), latency_s=0.02)
    assert slow.complete(ask("x")).latency_s >= 0.02 and slow.calls == 1

    flaky = FlakyLLM(EchoLLM(), rate=0.5, seed=3)
    outcomes = []
    for i in range(40):
        try:
            flaky.complete(ask(str(i)))
            outcomes.append(True)
        except LLMTimeout:
            outcomes.append(False)
    assert 5 < outcomes.count(False) < 35 and flaky.failures == outcomes.count(False)

"""A model call run ahead: its answer and its error reach the caller, and it never outlives its block."""

from __future__ import annotations

import threading
from contextvars import ContextVar

import pytest

from furnace.llm.ahead import ahead

WHO: ContextVar[str] = ContextVar("who", default="nobody")


def test_the_answer_and_the_error_reach_the_caller() -> None:
    assert ahead(lambda: 42).result() == 42
    failing = ahead(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result()


def test_the_call_runs_beside_the_caller() -> None:
    started, release = threading.Event(), threading.Event()

    def call() -> str:
        started.set()
        release.wait(30)
        return "answer"

    with ahead(call) as running:
        assert started.wait(30)  # the caller goes on while the call has not returned
        release.set()
    assert running.result() == "answer"


def test_leaving_the_block_waits_for_the_call_even_when_the_caller_failed() -> None:
    release, finished = threading.Event(), []

    def call() -> None:
        release.wait(30)
        finished.append("done")

    with pytest.raises(RuntimeError, match="caller failed"), ahead(call):
        threading.Thread(target=release.set).start()
        raise RuntimeError("caller failed")
    assert finished == ["done"]  # no call runs on after its caller gave up


def test_the_call_runs_in_the_callers_context() -> None:
    token = WHO.set("the caller")
    try:
        assert ahead(WHO.get).result() == "the caller"
    finally:
        WHO.reset(token)

"""Fixtures for the LLM seam tests: the stub server and a fake key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .stub_server import StubServer

FAKE_KEY = "sk-furnace-FAKE-0123456789abcdefXYZ"


@pytest.fixture()
def stub() -> Iterator[StubServer]:
    """A fresh OpenAI-compatible stub on 127.0.0.1 (random port)."""
    server = StubServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def fake_key() -> str:
    return FAKE_KEY

"""Token counting: litellm's offline counter for real models, the engine's estimate otherwise."""

from __future__ import annotations

import pytest

from furnace.adapters.tokens import count_tokens, uses_estimate
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.seam import OFFLINE_MODEL_NAME


def test_offline_and_fake_models_use_the_engine_estimate():
    text = "夏季防晒推荐 is a topic."
    for model in (None, OFFLINE_MODEL_NAME, "fake", "echo"):
        assert uses_estimate(model) and count_tokens(text, model) == estimate_tokens(text)
    assert count_tokens("", "openai/gpt-4.1-mini") == 0


@pytest.mark.slow  # importing litellm takes seconds
def test_real_model_names_are_counted_by_litellm_offline():
    from litellm import token_counter

    text = "Sunscreen every two hours, even on cloudy days."
    assert not uses_estimate("openai/gpt-4.1-mini")
    assert count_tokens(text, "openai/gpt-4.1-mini") == token_counter(model="openai/gpt-4.1-mini", text=text) > 0

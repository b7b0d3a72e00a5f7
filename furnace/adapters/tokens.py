"""Token counting for context budgets: litellm's offline ``token_counter``.

litellm is imported lazily (its import costs seconds) and only for real model
names; the offline engine, fakes and unnamed models use the offline engine's
own deterministic estimate (CJK characters count one each), so tests and the
default offline run never import litellm. Any counting error falls back to the
estimate too: a budget should never fail a chat turn.
"""

from __future__ import annotations

from functools import lru_cache

from furnace.llm.context import TokenCounter, estimate_counter
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.seam import OFFLINE_MODEL_NAME

# Names that are ours, not a provider's: never worth importing litellm for.
_LOCAL_MODELS = frozenset({OFFLINE_MODEL_NAME, "fake", "echo", "replay", ""})


def uses_estimate(model: str | None) -> bool:
    """True when ``model`` is counted with the offline estimate instead of litellm."""
    return model is None or model in _LOCAL_MODELS or model.startswith("furnace-")


@lru_cache(maxsize=8192)
def _litellm_count(text: str, model: str) -> int:
    from litellm import token_counter  # lazy: 3–6 s import

    return int(token_counter(model=model, text=text))


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model`` (0 for empty text)."""
    if not text:
        return 0
    if uses_estimate(model):
        return estimate_counter(text)  # remembered per text, as litellm's count is
    try:
        return _litellm_count(text, model)  # type: ignore[arg-type]
    except Exception:  # unknown tokenizer, missing file: the estimate is good enough for a budget
        return estimate_tokens(text)


def counter_for(model: str | None) -> TokenCounter:
    """The token counter for ``model`` (litellm's offline counter; the engine's estimate offline)."""
    return lambda text: count_tokens(text, model)

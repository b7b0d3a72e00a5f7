"""A model wrapper that bounds concurrency, meters calls and enforces the budget."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from furnace.domain.errors import BudgetExceeded
from furnace.evolution.config import Budget
from furnace.llm.seam import LLM, Completion, LLMRequest


@dataclass(frozen=True)
class Meter:
    """Figures of one run. ``calls`` are non-cached calls (what costs); ``cached_calls`` were free."""

    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    @property
    def cache_hit_rate(self) -> float:
        total = self.calls + self.cached_calls
        return self.cached_calls / total if total else 0.0

    def minus(self, other: Meter) -> Meter:
        return Meter(
            self.calls - other.calls,
            self.cached_calls - other.cached_calls,
            self.failed_calls - other.failed_calls,
            self.tokens - other.tokens,
            round(self.cost_usd - other.cost_usd, 9),
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "failed_calls": self.failed_calls,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cache_hit_rate": round(self.cache_hit_rate, 4),
        }


class MeteredLLM:
    """Wraps an LLM (usually the cached one): at most ``concurrency`` calls in flight,
    every call metered, and :class:`BudgetExceeded` raised *before* a call once the
    budget is spent (so a generation stops between calls, never inside a write)."""

    def __init__(self, inner: LLM, *, concurrency: int = 4, budget: Budget | None = None) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.budget = budget or Budget()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._meter = Meter()
        self._in_flight = 0

    @property
    def meter(self) -> Meter:
        with self._lock:
            return self._meter

    def exhausted(self, extra_calls: int = 0) -> str | None:
        """The budget limit that is (or would be, after ``extra_calls``) reached, else None."""
        with self._lock:
            return self._exhausted(extra_calls)

    def _exhausted(self, extra_calls: int) -> str | None:
        m, b = self._meter, self.budget
        if b.max_calls is not None and m.calls + self._in_flight + extra_calls > b.max_calls:
            return f"budget.max_calls {b.max_calls} reached ({m.calls} calls made)"
        if b.max_tokens is not None and m.tokens >= b.max_tokens:
            return f"budget.max_tokens {b.max_tokens} reached ({m.tokens} tokens)"
        if b.max_usd is not None and b.max_usd > 0 and m.cost_usd >= b.max_usd:
            return f"budget.max_usd {b.max_usd} reached (${m.cost_usd:.4f})"
        return None

    def complete(self, request: LLMRequest) -> Completion:
        with self._lock:  # calls in flight count against max_calls, so it is never overshot
            reason = self._exhausted(1)
            if reason:
                raise BudgetExceeded(reason)
            self._in_flight += 1
        try:
            with self._slots:
                completion = self.inner.complete(request)
        except Exception:
            with self._lock:
                self._in_flight -= 1
                m = self._meter
                self._meter = Meter(m.calls + 1, m.cached_calls, m.failed_calls + 1, m.tokens, m.cost_usd)
            raise
        with self._lock:
            self._in_flight -= 1
            m = self._meter
            if completion.cached:
                self._meter = Meter(m.calls, m.cached_calls + 1, m.failed_calls, m.tokens, m.cost_usd)
            else:
                self._meter = Meter(
                    m.calls + 1,
                    m.cached_calls,
                    m.failed_calls,
                    m.tokens + completion.usage.total_tokens,
                    m.cost_usd + completion.cost_usd,
                )
        return completion

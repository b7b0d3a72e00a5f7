"""What every stored response cache shares: the in-memory read layer over its rows, the check of a row's
keyed seal when it is read, and the figures ``furnace cache stats`` shows."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from typing import Any

from furnace.domain.guarded import Guarded, serialized
from furnace.llm.seam import Completion
from furnace.storage.seals import Sealer, response_seal, sealed


class ResponseMemory(Guarded):
    """Completions by content key kept in memory (content-addressed, hence immutable), and the count of
    stored rows refused for a bad seal."""

    def __init__(self, *, memory_items: int, ttl_s: float | None) -> None:
        self.memory_items = memory_items
        self.ttl_s = ttl_s
        self._memory: OrderedDict[str, Completion] = OrderedDict()
        self.refused = 0  # stored responses this cache would not serve: their seal did not verify

    def _recall(self, key: str) -> Completion | None:
        return self._memory.get(key)  # one atomic read (a model call's first step): no lock

    def _served(self, sealer: Sealer, key: str, text: str, seal: Any) -> Completion | None:
        """The completion of a stored row when its seal verifies (remembered), else None (counted)."""
        if not sealed(seal, response_seal(sealer, key, text)):
            self._refuse()
            return None
        found = Completion.model_validate_json(text)
        self._remember(key, found)
        return found

    @serialized
    def _refuse(self) -> None:
        self.refused += 1

    @serialized
    def _remember(self, key: str, completion: Completion) -> None:
        self._memory[key] = completion
        self._memory.move_to_end(key)
        while len(self._memory) > self.memory_items:
            self._memory.popitem(last=False)

    @serialized
    def _forget(self, keys: list[str]) -> None:
        for key in keys:
            self._memory.pop(key, None)

    def _stats(
        self,
        counts: tuple[int, int, datetime | None, datetime | None],
        by_task: list[tuple[Any, Any]],
        bad: int,
    ) -> dict[str, Any]:
        total, expired, oldest, newest = counts
        return {
            "responses": int(total),
            "expired": int(expired),
            "ttl_days": None if self.ttl_s is None else round(self.ttl_s / 86400, 3),
            "oldest": oldest.isoformat(sep=" ", timespec="seconds") if oldest else None,
            "newest": newest.isoformat(sep=" ", timespec="seconds") if newest else None,
            "by_task": {str(task): int(n) for task, n in by_task},
            "bad_seals": bad,  # rows never served (a miss each time): written outside furnace
        }

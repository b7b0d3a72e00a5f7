"""The offline engine: deterministic, rule-based, honest about being rules.

It implements the LLM seam (``complete(request) -> Completion``) by dispatching
on ``request.task`` to one handler per task kind. Handlers read the task's
structured ``request.inputs`` (never the prose) and return ``(text, parsed)``.
Same inputs and seed → same output, always.

Each task kind lives in its own module; the registry below maps kinds to
``module:function`` so that importing the engine stays cheap.
"""

from __future__ import annotations

from furnace.llm.offline.engine import OfflineEngine

__all__ = ["OfflineEngine"]

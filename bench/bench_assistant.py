"""Lab assistant: a structured result + a short model lead, vs the model writing the list.

Both answers go through the same fake model with per-token latency (5 ms base +
2 ms per output token), over the same 60-row result. Target: the structured
answer costs at least 5x fewer output tokens and is at least 3x faster.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from furnace.assistant.answer import Assistant, AssistantState
from furnace.assistant.scope import Catalogue, Scope
from furnace.llm.fakes import SlowLLM
from furnace.llm.offline import OfflineEngine
from furnace.llm.offline.engine import estimate_tokens
from furnace.llm.seam import Completion, LLMRequest, TaskKind, Usage, system_user

NOW = datetime(2026, 11, 30, 10)
ROWS = [
    {
        "agent_id": f"agt-{i:03d}",
        "experiment_id": "exp-night",
        "generation": i % 4,
        "fitness": round(1 - i / 61, 4),
        "operator": "crossover",
        "created_at": NOW - timedelta(hours=i),
    }
    for i in range(60)
]


class _Data:
    def catalogue(self) -> Catalogue:
        return Catalogue(experiments={"exp-night": "night"})

    def top_agents(self, scope: Scope, limit: int) -> list[dict]:
        return ROWS[:limit]


class _ListWriter:
    """What a plain chat wrapper does: the model types every row."""

    model_name = "list-writer"

    def complete(self, request: LLMRequest) -> Completion:
        text = "\n".join(
            f"{i + 1}. {r['agent_id']} — fitness {r['fitness']} (gen {r['generation']}, {r['operator']})"
            for i, r in enumerate(request.inputs["rows"])
        )
        return Completion(
            text=text, model=self.model_name, usage=Usage(prompt_tokens=10, completion_tokens=estimate_tokens(text))
        )


def run() -> bool:
    per_token, base = 0.002, 0.005
    ours_llm = SlowLLM(OfflineEngine(), base, per_token_s=per_token)
    assistant = Assistant(_Data(), ours_llm, model_lead=True, now=lambda: NOW, limit=500)  # type: ignore[arg-type]
    started = time.perf_counter()
    done = list(assistant.ask("which agents scored best?", AssistantState()))[-1]
    ours_s = time.perf_counter() - started
    ours_tokens = estimate_tokens(done.lead)

    baseline = SlowLLM(_ListWriter(), base, per_token_s=per_token)
    started = time.perf_counter()
    answer = baseline.complete(
        system_user(
            TaskKind.ASSIST,
            "List the best agents.",
            "which agents scored best?",
            inputs={"rows": [{k: str(v) for k, v in r.items()} for r in ROWS]},
        )
    )
    base_s = time.perf_counter() - started
    base_tokens = answer.usage.completion_tokens

    token_ratio = base_tokens / max(1, ours_tokens)
    speed_ratio = base_s / ours_s
    print(
        f"   structured + lead: {ours_tokens} output tokens, {ours_s * 1000:.0f} ms, "
        f"table rows {len(done.result.items)}"
    )
    print(f"   model writes list: {base_tokens} output tokens, {base_s * 1000:.0f} ms")
    print(f"   ratio: {token_ratio:.1f}x fewer output tokens (target ≥5x), {speed_ratio:.1f}x faster (target ≥3x)")
    return token_ratio >= 5 and speed_ratio >= 3 and len(done.result.items) == len(ROWS)

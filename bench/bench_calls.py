"""Model calls: structured-output overhead, attempts under injected faults, a rerun after recovery.

Targets (a miss makes ``python -m bench`` exit non-zero):

- **parse + validate** (``furnace.llm.structured.read_reply``: find the JSON in the reply, check it
  against the task's schema) p95 < 1 ms per reply, over real reply shapes (bare JSON, a think
  block, prose with a fence, inline prose) and every JSON task's schema;
- **attempts per logical call** with 30 % of requests failing (HTTP 503) at a local
  OpenAI-compatible server: never more than ``max_retries + 1`` (= 3), and the ledger counts
  every request the server saw;
- **rerun after recovery**: an experiment whose judge failed 30 % of the time is run again with
  a healthy provider: 0 unscored individuals left, the result equals a run that never failed,
  and the rerun's model calls go only to what had failed (or whose plan changed because of it):
  0 calls for the rest.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.stack import CPU_TARGET_MS, Stack, library, main_for, record, stack

FAULT_RATE = 0.3
RETRIES = 2
PARSE_TARGET_MS = 1.0

# Real reply shapes (see tests/llm/zoo): the JSON answer inside what models actually send.
SHAPES = {
    "bare": "{json}",
    "think": "<think>\nThe user wants JSON only; check the persona first.\n</think>\n\n{json}",
    "fence": "Sure! Here is the answer in the requested format:\n\n```json\n{json}\n```\n\nAnything else?",
    "inline": "Here is the result: {json} I hope this helps!",
}


def _answers() -> list[tuple[str, dict[str, Any], Any]]:
    """(task, schema, a valid answer) for the JSON tasks."""
    from furnace.arena.supervisor import PLAN_SCHEMA
    from furnace.assistant.intent import CLASSIFY_SCHEMA
    from furnace.fusion.operators.prompts import ADJUDICATE_SCHEMA, IDENTITY_SCHEMA, REWRITE_SCHEMA, ROUTE_SCHEMA
    from furnace.scoring.judge import JUDGE_SCHEMA
    from furnace.writing.content import PIECE_SCHEMA
    from furnace.writing.preferences import PREFERENCES_SCHEMA

    return [
        ("identity", IDENTITY_SCHEMA, {"identity": "You are a tea master and a coach."}),
        ("rewrite", REWRITE_SCHEMA, {"principle": "Keep answers short."}),
        ("adjudicate", ADJUDICATE_SCHEMA, {"choice": 0, "reason": "stricter"}),
        ("route", ROUTE_SCHEMA, {"member": "a@1", "reason": "fits"}),
        ("judge", JUDGE_SCHEMA, {"score": 0.75, "reason": "names the water temperature"}),
        ("generate", PIECE_SCHEMA, {"title": "Green tea", "body": "Brew at 80 degrees. " * 40}),
        ("preferences", PREFERENCES_SCHEMA, {"preferences": [{"dimension": "length", "value": "concise"}]}),
        ("plan", PLAN_SCHEMA, {"speakers": [{"member": "a", "task": "answer"}], "budget": {"max_speakers": 1}}),
        ("assist", CLASSIFY_SCHEMA, {"intent": "top_agents", "confidence": 0.8}),
    ]


def bench_parse(rounds: int = 200) -> bool:
    from furnace.llm.structured import read_reply

    samples: list[float] = []
    for task, schema, answer in _answers():
        for shape, template in SHAPES.items():
            text = template.replace("{json}", json.dumps(answer, ensure_ascii=False))
            value, problem = read_reply(text, schema)
            if problem is not None or value != answer:
                print(f"   parse: {task}/{shape} was not read: {problem}")
                return False
            for _ in range(rounds):
                started = time.perf_counter()
                read_reply(text, schema)
                samples.append((time.perf_counter() - started) * 1000)
    p50 = statistics.median(samples)
    p95 = statistics.quantiles(samples, n=20)[18]
    ok = p95 < PARSE_TARGET_MS
    print(
        f"   parse + validate: {len(samples)} replies ({len(SHAPES)} shapes x {len(_answers())} tasks):"
        f" p50 {p50:.3f} ms, p95 {p95:.3f} ms (target p95 < {PARSE_TARGET_MS} ms) {'ok' if ok else 'MISSED'}"
    )
    return ok


class _FaultyServer:
    """A local OpenAI-compatible endpoint failing a seeded share of requests with HTTP 503."""

    def __init__(self, rate: float, answer: dict[str, Any]) -> None:
        self.rng, self.rate, self.answer = random.Random(7), rate, answer
        self.requests: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with server.lock:
                    server.requests.append(json.dumps(payload.get("messages"), sort_keys=True))
                    fail = server.rng.random() < server.rate
                if fail:
                    status, body = 503, {"error": {"message": "overloaded", "type": "server_error"}}
                else:
                    content = json.dumps(server.answer)
                    status, body = (
                        200,
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "stub",
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        },
                    )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.api_base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def bench_attempts(calls: int = 150) -> bool:
    """The configured client (a LiteLLMClient to the faulty local server, built by the runtime as for a
    user's ``FURNACE_MODEL``/``FURNACE_API_BASE``), behind the runtime's response cache and ledger."""
    from pydantic import SecretStr

    from furnace.domain.elixir import parse_elixir
    from furnace.domain.errors import LLMError
    from furnace.scoring.judge import build_judge_request

    server = _FaultyServer(FAULT_RATE, {"score": 0.5, "reason": "ok"})
    persona = parse_elixir({"name": "Bench", "identity": "You are a bench.", "expertise": ["a"], "principles": ["b"]})
    failed = 0
    try:
        with stack(
            model="openai/stub", api_base=server.api_base, api_key=SecretStr("sk-bench-0000"), max_retries=RETRIES
        ) as built:
            llm = built.runtime.llm
            llm.inner._sleep = lambda s: None  # type: ignore[attr-defined]  # the backoff policy is tested elsewhere
            for i in range(calls):
                try:
                    llm.complete(build_judge_request(persona, f"question {i}?", "an answer", "fidelity", seed=i))
                except LLMError:
                    failed += 1
            ledger_attempts = llm.totals().attempts
    finally:
        server.stop()
    per_call = Counter(server.requests)
    worst, mean = max(per_call.values()), len(server.requests) / len(per_call)
    ok = worst <= RETRIES + 1 and ledger_attempts == len(server.requests) and len(per_call) == calls
    print(
        f"   attempts at {FAULT_RATE:.0%} injected 503s: {calls} logical calls, {len(server.requests)} requests"
        f" (mean {mean:.2f}, max {worst} per call; target <= {RETRIES + 1}), {failed} gave up;"
        f" ledger attempts {ledger_attempts} {'ok' if ok else 'MISSED'}"
    )
    return ok


def bench_rerun() -> bool:
    """Each run as ``furnace experiment run --no-mlflow`` prepares it (:mod:`bench.stack`), the outage and the
    rerun on one home (records, response cache and ledger shared, as a user's rerun), the clean run on another."""
    from furnace.domain.canonical import content_key
    from furnace.domain.errors import LLMRateLimit
    from furnace.evolution.config import parse_config
    from furnace.evolution.engine import HELD_OUT
    from furnace.llm.offline import OfflineEngine
    from furnace.llm.seam import TaskKind

    class Outage:
        """The offline engine, failing FAULT_RATE of JUDGE calls while ``down``; counts the calls of the
        search and those of the evaluation after it (the ledger's ``held-out`` unit) apart."""

        def __init__(self, down: bool = True) -> None:
            self.inner, self.down, self.calls, self.held_out = OfflineEngine(), down, 0, 0
            self.model_name = self.inner.model_name
            self.failed = 0

        def complete(self, request: Any) -> Any:
            self.calls += 1
            self.held_out += request.unit == HELD_OUT
            key = content_key([request.task.value, [m.content for m in request.messages]])
            if self.down and request.task == TaskKind.JUDGE and random.Random(key).random() < FAULT_RATE:
                self.failed += 1
                raise LLMRateLimit("429")
            return self.inner.complete(request)

    cfg = parse_config(
        {
            "name": "bench-rerun",
            "seed": 3,
            "population": 8,
            "generations": 2,
            "seeds": {"language": "en"},
            "probes": {"set": "writing-en", "limit": 2},
            "scorers": {"constraints": 0.2, "fidelity": 0.3, "tone": 0.2, "brief_fit": 0.3},
        }
    )

    def prepared(built: Stack) -> Any:
        library(built)
        return built.runtime.prepare_experiment(cfg, track=False).evolution

    healthy = Outage(down=False)
    with stack(lambda name: healthy) as built:
        evolution = prepared(built)
        with built.measure() as window:
            clean = evolution.run()
    model = Outage()
    with stack(lambda name: model) as built:
        first = prepared(built).run()
        results = built.runtime.results
        before = {(r.generation, r.slot): r for r in results.individuals(first.experiment_id)}
        unscored_before, failed_calls = len(first.unscored), model.failed
        model.down, model.calls, model.held_out = False, 0, 0
        again = prepared(built).run()
        after = {(r.generation, r.slot): r for r in results.individuals(again.experiment_id)}
    changed = [k for k, r in after.items() if k not in before or before[k].agent_id != r.agent_id]
    changed_calls = sum(after[k].calls for k in changed)
    # The search: the failed calls again and the slots whose plan changed, nothing else. After the search the
    # report's members are scored on train and test and re-evaluated (unit held-out): new agents, so that is
    # work a clean run does too; the rerun may not spend more on it than the clean run did.
    bound, search_calls = failed_calls + changed_calls, model.calls - model.held_out
    same = again.result_signature() == clean.result_signature()
    ok = again.unscored == [] and same and search_calls <= bound and model.held_out <= healthy.held_out
    print(
        f"   rerun after recovery: {unscored_before} unscored individuals ({failed_calls} failed judge calls)"
        f" -> {len(again.unscored)} unscored; the rerun's search made {search_calls} model calls (the failed ones"
        f" and {len(changed)} slots whose plan changed: <= {bound}; 0 for the rest) and the evaluation after it"
        f" {model.held_out} (a clean run's: {healthy.held_out}); result equals a clean run: {same}"
        f" {'ok' if ok else 'MISSED'}"
    )
    print(
        f"   furnace CPU per model call (the clean run, the command's stack): {window.cpu_ms_per_call:.2f} ms "
        f"(target <= {CPU_TARGET_MS:.0f} ms; {window.model_calls} model calls; informational here)"
    )
    record(**window.figures())
    return ok


def run() -> bool:
    results = [bench_parse(), bench_attempts(), bench_rerun()]
    return all(results)


main = main_for("calls", run)

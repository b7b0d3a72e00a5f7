"""``furnace cache stats|prune``: the model-response cache and the synthesis cache (docs/models.md)."""

from __future__ import annotations

import click

from furnace.cli.context import emit, json_option
from furnace.runtime import Runtime


def _caches(obj: Runtime, days: float | None):
    ttl_days = obj.settings.cache_ttl_days if days is None else days
    from furnace.storage.sql.llm_calls import SQLResponseCache

    return SQLResponseCache(obj.sql, ttl_s=ttl_days * 86400), obj.kv


def register(cli: click.Group) -> None:
    @cli.group("cache")
    def cache_group() -> None:
        """The model-response cache (TTL: FURNACE_CACHE_TTL_DAYS) and the synthesis cache."""

    @cache_group.command("stats")
    @json_option
    @click.pass_obj
    def stats_cmd(obj: Runtime, as_json: bool) -> None:
        """How many responses are cached, how many have expired, per task."""
        responses, kv = _caches(obj, None)
        data = {**responses.stats(), "synthesis_entries": int(obj.sql.query("SELECT count(*) FROM kv")[0][0])}
        tasks = ", ".join(f"{task} {n}" for task, n in data["by_task"].items()) or "none"
        human = (
            f"responses {data['responses']:,} ({data['expired']:,} expired, TTL {data['ttl_days']:g} days)"
            f"  oldest {data['oldest'] or '-'}  newest {data['newest'] or '-'}\n"
            f"by task: {tasks}\nsynthesis entries {data['synthesis_entries']:,}"
        )
        if data["bad_seals"]:
            human += f"\n{data['bad_seals']:,} responses with a bad seal (never served: written outside furnace)"
        emit(data, as_json=as_json, human=human)

    @cache_group.command("prune")
    @click.option(
        "--older-than",
        "days",
        type=click.FloatRange(min=0),
        default=None,
        help="Days (default: FURNACE_CACHE_TTL_DAYS). 0 empties the response cache.",
    )
    @json_option
    @click.pass_obj
    def prune_cmd(obj: Runtime, days: float | None, as_json: bool) -> None:
        """Delete expired model responses and expired synthesis entries (the ledger is never touched)."""
        responses, kv = _caches(obj, days)
        gone = responses.prune()
        synth = kv.purge_expired()
        emit(
            {"responses_deleted": gone, "synthesis_deleted": synth, "older_than_days": responses.ttl_s / 86400},
            as_json=as_json,
            human=f"deleted {gone:,} cached responses older than {responses.ttl_s / 86400:g} days"
            f" and {synth:,} expired synthesis entries",
        )

"""The CLI: content new / revise / show / history / diff / rollback, prefs — on DuckDB, offline."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner

from furnace.domain.elixir import parse_elixir

from .conftest import ZH_PERSONA


@pytest.fixture()
def run(settings):
    from furnace.cli import cli
    from furnace.runtime import Runtime

    Runtime(settings).store.save_elixir(parse_elixir(ZH_PERSONA))
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(cli, ["--home", str(settings.home), *args], catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def test_the_revision_workflow_from_the_cli(run):
    created = json.loads(run("content", "new", "--persona", "skin-advisor", "--topic", "夏季防晒推荐", "--json").output)
    cid = created["content"]["id"]
    assert created["version"]["version"] == 1
    out = run("revise", cid, "太正式了，活泼点").output
    assert out.startswith("V1→V2") and "learned: tone=lively" in out
    noted = json.loads(run("revise", cid, "第三段太长，缩短一点", "--no-regenerate", "--json").output)
    assert noted["status"] == "noted" and noted["version"] is None
    done = json.loads(run("revise", cid, "加一个 emoji", "--json").output)
    assert done["status"] == "revised" and done["version"]["version"] == 3
    assert done["reply"].startswith("V2→V3")
    show = run("content", "show", cid).output
    assert "☀️" in show and show.startswith(f"{cid}  V3")
    assert "☀️" not in run("content", "show", cid, "--version", "1").output
    history = json.loads(run("content", "history", cid, "--json").output)
    assert [v["version"] for v in history["versions"]] == [1, 2, 3]
    stamps = [created["content"], *history["versions"], *history["messages"]]
    assert all(datetime.fromisoformat(x["created_at"]).utcoffset() == timedelta(0) for x in stamps)  # UTC, said
    assert [m["kind"] for m in history["messages"]] == [
        "welcome",
        "suggestion",
        "revision",
        "suggestion",
        "noted",
        "suggestion",
        "revision",
    ]
    diff = run("content", "diff", cid, "2", "3").output
    assert diff.startswith("V2 → V3") and "{+" in diff
    back = json.loads(run("content", "rollback", cid, "1", "--json").output)
    assert back["version"] == 4 and back["source"] == "rollback"
    prefs = json.loads(run("prefs", "skin-advisor", "--json").output)
    assert {p["dimension"]: p["value"] for p in prefs["preferences"]} == {
        "tone": "lively",
        "length": "concise",
        "emoji": "more",
    }
    assert "tone = lively" in run("prefs", "skin-advisor").output
    listed = json.loads(run("content", "list", "--json").output)
    assert listed[0]["id"] == cid and listed[0]["latest"] == 4


def test_cli_errors_are_one_line(run, settings):
    from furnace.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--home", str(settings.home), "content", "show", "cnt-missing"])
    assert exit_info.value.code == 1


def test_prefs_learn_pending_processes_revisions_made_without_learning(run, settings):
    from furnace.runtime import Runtime, build_llm
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    store, contents, llm = Runtime(settings).store, Runtime(settings).content_store, build_llm(settings)
    content, _ = generate_content(store, contents, llm, persona_id="skin-advisor", topic="夏季防晒推荐")
    revise(store, contents, llm, content.id, "加一个 emoji", learn=False)
    assert json.loads(run("prefs", "skin-advisor", "--json").output)["preferences"] == []
    out = json.loads(run("prefs", "skin-advisor", "--learn-pending", "--json").output)
    assert out["batch"]["learned"] == 1 and out["preferences"][0]["value"] == "more" and out["version"] == 2
    again = json.loads(run("prefs", "skin-advisor", "--learn-pending", "--json").output)
    assert again["batch"]["processed"] == 0 and again["version"] == 2


def test_run_revision_demo_shows_the_whole_loop(store, contents, engine):
    from furnace.cli.content_cmd import run_revision_demo
    from furnace.llm.offline.writing_text import count_emoji

    out = run_revision_demo(
        store,
        contents,
        engine,
        persona="skin-advisor-en",
        topic="summer sunscreen",
        suggestions=["too formal, make it livelier", "the third paragraph is too long", "add an emoji"],
    )
    assert [o.status for o in out["outcomes"]] == ["revised"] * 3
    assert out["persona"].version == 4 and count_emoji(out["next_first"].body) >= 1

"""``furnace demo``: the library part of the main job, offline and idempotent.

Imports the sample library (ids already stored are left as they are), renders one persona in zh and en, edits it into a
new version (the same edit every run, so a re-run stores nothing new) and
shows its versions and a diff.
"""

from __future__ import annotations

from typing import Any

import click

from furnace.cli.context import emit, json_option
from furnace.cli.elixir_cmd import LIBRARY_DIR, diff_payload
from furnace.domain.elixir import Elixir, edit
from furnace.runtime import Runtime

DEMO_PERSONA = "lifestyle-blogger-zh"
DEMO_PRINCIPLE = "夏天的内容结尾都提醒读者：出门前涂防晒，每两小时补涂一次。"


def demo_edit(elixir: Elixir) -> Elixir:
    """The demo's edit: livelier and one more principle (a no-op on an already edited version)."""
    principles = list(elixir.principles)
    if DEMO_PRINCIPLE not in principles:
        principles.append(DEMO_PRINCIPLE)
    tone = elixir.tone.model_copy(update={"humor": 0.85}).model_dump()
    return edit(elixir, principles=principles, tone=tone)


def run_library_demo(store: Any, *, persona: str = DEMO_PERSONA) -> dict[str, Any]:
    """Import, render (zh and en), edit into a new version, history and diff. Returns every result."""
    from furnace.domain.render import render_prompt
    from furnace.interop.importers import import_library

    report = import_library(LIBRARY_DIR, store, keep_existing=True)
    current = store.get_elixir(persona)
    prompts = {lang: render_prompt(current, lang) for lang in ("zh", "en")}
    ref = store.save_elixir(demo_edit(current))
    versions = store.history(persona)
    first, latest = versions[0], store.get_elixir(persona, ref.version)
    changes, diff_text = diff_payload(first, latest)
    return {
        "import": report,
        "persona": persona,
        "prompts": prompts,
        "edited": ref,
        "new_version": ref.version != current.version,
        "versions": versions,
        "diff": changes,
        "diff_text": diff_text,
    }


@click.command("demo")
@json_option
@click.pass_obj
def demo(ctx: Runtime, as_json: bool) -> None:
    """Run the offline demo (sample library, rendering, versions, diff)."""
    result = run_library_demo(ctx.store)
    if as_json:
        emit(
            {
                "import": result["import"].as_dict(),
                "persona": result["persona"],
                "prompts": result["prompts"],
                "edited": result["edited"].model_dump(mode="json"),
                "new_version": result["new_version"],
                "versions": [{"version": v.version, "content_hash": v.content_hash} for v in result["versions"]],
                "diff": result["diff"],
            },
            as_json=True,
        )
        return
    rule = "─" * 60
    ref = result["edited"]
    lines = [
        f"1. Sample library ({LIBRARY_DIR.name}/): {result['import'].summary()}",
        "",
        f"2. {result['persona']} rendered in zh:",
        rule,
        result["prompts"]["zh"].rstrip(),
        rule,
        "   … and in en:",
        rule,
        result["prompts"]["en"].rstrip(),
        rule,
        "",
        f"3. Edited {result['persona']}: "
        + (f"stored v{ref.version}" if result["new_version"] else f"same content as v{ref.version}, nothing stored"),
        "   versions:",
        *(f"   v{v.version}  {v.content_hash[:16]}" for v in result["versions"]),
        "",
        "4. Diff " + result["diff_text"],
    ]
    click.echo("\n".join(lines))
    from furnace.cli.demo_experiment import run_demo  # the evolution experiment (issue 4)

    run_demo(ctx)
    click.echo(preference_demo_text(ctx))


REVISION_PERSONA = "skincare-science-writer-zh"
REVISION_TOPIC = "夏季防晒推荐"
REVISION_SUGGESTIONS = ["太正式了，活泼点", "第三段太长，缩短一点", "加一个 emoji"]


def preference_demo_text(ctx: Runtime) -> str:
    """Step 6: write, revise by chat, learn preferences, and write again with them."""
    from furnace.cli.content_cmd import run_revision_demo
    from furnace.domain.render import render_prompt

    before = ctx.store.get_elixir(REVISION_PERSONA)
    result = run_revision_demo(
        ctx.store,
        ctx.content_store,
        ctx.llm,
        persona=REVISION_PERSONA,
        topic=REVISION_TOPIC,
        suggestions=REVISION_SUGGESTIONS,
    )
    first, persona, again = result["first"], result["persona"], result["next_first"]
    lines = [
        "",
        f"6. Revision chat: {REVISION_PERSONA}@{before.version} writes “{REVISION_TOPIC}” "
        f"(content {result['content'].id}, V1, {first.word_count} 字)",
    ]
    for suggestion, outcome in zip(REVISION_SUGGESTIONS, result["outcomes"], strict=False):
        lines.append(f"   you: {suggestion}")
        lines.append("   furnace: " + outcome.reply.content.replace("\n", " ")[:160])
    prefs = ", ".join(f"{p.dimension}={p.value} (×{p.count})" for p in persona.style_preferences) or "none"
    lines += [
        f"   learned preferences → {REVISION_PERSONA}@{persona.version}: {prefs}",
        f"   the next piece is written with them (V1, {again.word_count} 字): {again.title}",
    ]
    learned = [
        line for line in render_prompt(persona).splitlines() if any(p.value in line for p in persona.style_preferences)
    ]
    if learned:
        lines.append("   its prompt now says: " + " / ".join(learned[:3]))
    lines.append(f"   see it all: furnace content history {result['content'].id}; furnace prefs {REVISION_PERSONA}")
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    """Add ``demo`` to the ``furnace`` command."""
    cli.add_command(demo)

"""``furnace content ...``, ``furnace revise``, ``furnace prefs`` and ``furnace reflect``: content, the revision
chat, and its accepted suggestions flowing back into the persona."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from furnace.cli.context import emit, json_option
from furnace.domain.elixir import Elixir
from furnace.llm.seam import LLM
from furnace.runtime import Runtime
from furnace.storage.store import ElixirStore

if TYPE_CHECKING:  # furnace.writing loads when a command runs, not on every CLI start
    from furnace.writing.content import ContentStore, ContentVersion


def version_data(v: ContentVersion) -> dict[str, Any]:
    """A version as JSON data."""
    return v.model_dump(mode="json")


def version_text(v: ContentVersion, *, head: str = "", language: str = "en") -> str:
    """A version as readable text: header line, title, body (zh counts characters)."""
    unit = "字" if language == "zh" else "words"
    line = f"{head}V{v.version}  {v.word_count} {unit}  ({v.source}{', ' + v.note if v.note else ''})"
    return f"{line}\n\n{v.title}\n\n{v.body}"


def prefs_data(elixir: Elixir) -> dict[str, Any]:
    """A persona's learned preferences as JSON data."""
    return {
        "persona": elixir.id,
        "version": elixir.version,
        "preferences": [p.model_dump(mode="json") for p in elixir.style_preferences],
    }


def prefs_text(elixir: Elixir) -> str:
    """A persona's learned preferences, one line each."""
    lines = [f"{elixir.id}@{elixir.version}: {len(elixir.style_preferences)} learned preference(s)"]
    for p in elixir.style_preferences:
        lines.append(f"  {p.dimension} = {p.value}  (weight {p.weight:.2f}, seen {p.count}x, from {p.source_revision})")
        if p.evidence:
            lines.append(f"      {p.evidence}")
    return "\n".join(lines)


def run_revision_demo(
    store: ElixirStore, content_store: ContentStore, llm: LLM, *, persona: str, topic: str, suggestions: list[str]
) -> dict[str, Any]:
    """The preference loop end to end: write, revise each suggestion, write again with what was learned."""
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    content, first = generate_content(store, content_store, llm, persona_id=persona, topic=topic)
    outcomes = [revise(store, content_store, llm, content.id, s) for s in suggestions]
    learned = store.get_elixir(persona)
    again, next_first = generate_content(store, content_store, llm, persona_id=persona, topic=topic)
    return {
        "content": content,
        "first": first,
        "outcomes": outcomes,
        "persona": learned,
        "next_content": again,
        "next_first": next_first,
    }


@click.group("content")
def content_group() -> None:
    """Persona-written content with a version chain (V1, V2, ...)."""


@content_group.command("new")
@click.option("--persona", "persona_id", required=True, help="Elixir or agent id that writes the piece.")
@click.option("--topic", required=True, help="What the piece is about.")
@click.option("--seed", type=int, default=0, show_default=True)
@json_option
@click.pass_obj
def content_new(ctx: Runtime, persona_id: str, topic: str, seed: int, as_json: bool) -> None:
    """Write V1 of a new piece in the persona's voice (learned preferences included)."""
    from furnace.writing.content import generate_content

    content, v1 = generate_content(ctx.store, ctx.content_store, ctx.llm, persona_id=persona_id, topic=topic, seed=seed)
    emit(
        {"content": content.model_dump(mode="json"), "version": version_data(v1)},
        as_json=as_json,
        human=version_text(
            v1, head=f"{content.id}  by {content.persona_id}@{content.persona_version}  ", language=content.language
        ),
    )


@content_group.command("list")
@click.option("--persona", "persona_id", default=None)
@json_option
@click.pass_obj
def content_list(ctx: Runtime, persona_id: str | None, as_json: bool) -> None:
    """Content items, newest first."""
    cs = ctx.content_store
    items = cs.list_contents(persona_id=persona_id)
    rows = [{**c.model_dump(mode="json"), "latest": cs.get_version(c.id).version} for c in items]
    emit(
        rows,
        as_json=as_json,
        human="\n".join(f"{r['id']}  V{r['latest']}  {r['persona_id']}  {r['topic']}" for r in rows)
        or "no content yet",
    )


@content_group.command("show")
@click.argument("content_id")
@click.option("--version", "version", type=int, default=None, help="Default: the latest.")
@json_option
@click.pass_obj
def content_show(ctx: Runtime, content_id: str, version: int | None, as_json: bool) -> None:
    """Show one version of a piece."""
    cs = ctx.content_store
    v = cs.get_version(content_id, version)
    emit(
        version_data(v),
        as_json=as_json,
        human=version_text(v, head=f"{content_id}  ", language=cs.get_content(content_id).language),
    )


@content_group.command("history")
@click.argument("content_id")
@json_option
@click.pass_obj
def content_history(ctx: Runtime, content_id: str, as_json: bool) -> None:
    """The version chain and the revision chat of a piece."""
    cs = ctx.content_store
    versions = cs.versions(content_id)
    if not versions:
        cs.get_content(content_id)  # raises NotFound
    session = cs.get_session(content_id)
    messages = cs.messages(session.id) if session else []
    data = {
        "content_id": content_id,
        "versions": [{k: v for k, v in version_data(x).items() if k not in ("body",)} for x in versions],
        "messages": [m.model_dump(mode="json") for m in messages],
    }
    unit = "字" if cs.get_content(content_id).language == "zh" else "words"
    lines = [f"V{v.version}  {v.word_count:>5} {unit}  {v.source:<8} {v.title}" for v in versions]
    if messages:
        lines.append("")
        lines += [f"[{m.role}] {m.content}" for m in messages]
    emit(data, as_json=as_json, human="\n".join(lines))


@content_group.command("diff")
@click.argument("content_id")
@click.argument("a", type=int)
@click.argument("b", type=int)
@json_option
@click.pass_obj
def content_diff(ctx: Runtime, content_id: str, a: int, b: int, as_json: bool) -> None:
    """Word-level diff of two versions (zh: character-level)."""
    from furnace.writing.revision import diff_versions

    cs = ctx.content_store
    content = cs.get_content(content_id)
    diff = diff_versions(cs.get_version(content_id, a), cs.get_version(content_id, b), content.language)
    emit(diff.model_dump(mode="json"), as_json=as_json, human=diff.render())


@content_group.command("rollback")
@click.argument("content_id")
@click.argument("version", type=int)
@json_option
@click.pass_obj
def content_rollback(ctx: Runtime, content_id: str, version: int, as_json: bool) -> None:
    """Make an old version current again (as a new version; nothing is deleted)."""
    from furnace.writing.revision import rollback

    v = rollback(ctx.content_store, content_id, version)
    emit(version_data(v), as_json=as_json, human=f"{content_id}: V{v.version} = V{version} (rollback)")


@click.command("revise")
@click.argument("content_id")
@click.argument("suggestion")
@click.option(
    "--regenerate/--no-regenerate",
    default=True,
    show_default=True,
    help="--no-regenerate only records the suggestion; the next edit applies all pending ones.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@json_option
@click.pass_obj
def revise_cmd(ctx: Runtime, content_id: str, suggestion: str, regenerate: bool, seed: int, as_json: bool) -> None:
    """Send a suggestion to a piece's revision chat."""
    from furnace.writing.revision import revise

    out = revise(ctx.store, ctx.content_store, ctx.llm, content_id, suggestion, regenerate=regenerate, seed=seed)
    data: dict[str, Any] = {
        "status": out.status,
        "reply": out.reply.content,
        "steps": [s.value for s in out.steps],
        "pending": list(out.pending),
        "version": version_data(out.version) if out.version else None,
        "revision_id": out.revision.id if out.revision else None,
        "learned": [p.model_dump(mode="json") for p in out.learned.learned] if out.learned else [],
        "persona_version": out.learned.persona_ref.version if out.learned and out.learned.persona_ref else None,
    }
    human = out.reply.content
    if out.learned and out.learned.learned:
        ref = out.learned.persona_ref
        where = f" → {ref.id}@{ref.version}" if ref else ""
        human += "\nlearned: " + ", ".join(f"{p.dimension}={p.value}" for p in out.learned.learned) + where
    emit(data, as_json=as_json, human=human)
    if out.status == "failed":
        raise click.exceptions.Exit(1)


@click.command("prefs")
@click.argument("persona_id")
@click.option(
    "--learn-pending",
    is_flag=True,
    help="First learn from every revision not processed yet (what the preference flow does).",
)
@click.option(
    "--prefect",
    is_flag=True,
    help="With --learn-pending: run the preference flow (PREFECT_API_URL, or a temporary server; logs to MLflow).",
)
@json_option
@click.pass_obj
def prefs_cmd(ctx: Runtime, persona_id: str, learn_pending: bool, prefect: bool, as_json: bool) -> None:
    """A persona's learned style preferences (latest version)."""
    if prefect and not learn_pending:
        raise click.UsageError("--prefect goes with --learn-pending")
    ctx.store.get_elixir(persona_id)  # an unknown persona is an error before any learning
    batch: dict[str, Any] | None = None
    if prefect:
        from furnace.adapters.prefect_server import prefect_api
        from furnace_flows.preferences import preference_extraction  # the launcher edge cli -> flows (lazy)

        with prefect_api(
            ctx.settings.home,
            timeout_s=ctx.settings.prefect_start_timeout_s,
            on_status=lambda line: click.echo(line, err=True),
        ):
            batch = preference_extraction(home=str(ctx.settings.home))
    elif learn_pending:
        from furnace.writing.preferences import process_unprocessed

        batch = process_unprocessed(ctx.store, ctx.content_store, ctx.llm).as_dict()
    elixir = ctx.store.get_elixir(persona_id)
    data = prefs_data(elixir)
    human = prefs_text(elixir)
    if batch is not None:
        data["batch"] = batch
        human = (
            f"learned from {batch['processed']} pending revision(s) ({batch['learned']} with preferences, "
            f"{batch['failed']} failed)\n"
        ) + human
    emit(data, as_json=as_json, human=human)


@click.command("reflect")
@click.argument("persona_id")
@click.option(
    "--from-content",
    "content_id",
    required=True,
    help="The piece whose revision chat's accepted suggestions are the feedback.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@json_option
@click.pass_obj
def reflect_cmd(ctx: Runtime, persona_id: str, content_id: str, seed: int, as_json: bool) -> None:
    """Reflect a revision chat's accepted suggestions into PERSONA_ID: a new persona version (operator reflect)."""
    from furnace.evolution.revision_reflect import reflect_from_revisions

    out = reflect_from_revisions(
        ctx.store,
        ctx.content_store,
        llm=ctx.llm,
        embedder=ctx.embedder,
        cache=ctx.synthesis_cache,
        content_id=content_id,
        persona_id=persona_id,
        seed=seed,
        settings=ctx.settings,
    )
    if out.status == "already":
        human = f"{persona_id}@{out.persona.version}: every accepted revision of {content_id} was reflected already"
    else:
        lines = [
            f"{out.previous.id}@{out.previous.version} → {out.persona.id}@{out.persona.version} "
            f"(reflect, agent {out.agent_id}, revision session {out.session_id})"
            + ("" if out.changed else ": the persona already held these edits"),
            f"from {len(out.revision_ids)} accepted revision(s): " + " / ".join(out.suggestions),
        ]
        lines += [f"  - {n.field}: {n.chose} — {n.reason}" for n in out.notes]
        lines.append(f"each accepted revision ({len(out.outcomes)}):")
        lines += [f"  {o.line()}" for o in out.outcomes]
        if out.untraced:
            lines.append("  edits no single revision names: " + "; ".join(out.untraced))
        human = "\n".join(lines)
    emit(out.as_dict(), as_json=as_json, human=human)


def register(cli: click.Group) -> None:
    """Add ``content``, ``revise``, ``prefs`` and ``reflect`` to the CLI."""
    cli.add_command(content_group)
    cli.add_command(revise_cmd)
    cli.add_command(prefs_cmd)
    cli.add_command(reflect_cmd)

"""Take the docs site's screenshots of every page on the demo data (real browser).

Run from the repo root: ``.venv/bin/python -m tests.app.tour [OUT_DIR] [--only judge]`` (default
``docs/img/``). It runs ``furnace demo`` into a temporary FURNACE_HOME, adds a fused
agent, a revised text, an arena session and an experiment weighting people's picks, starts
``streamlit run`` on 127.0.0.1 and drives Debian chromium through each page. ``--only judge``
takes the Judge page's screenshot alone, on a home with the library and that experiment.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .browser import app_server, browser_missing, browser_page, pick_on_the_judge_page, settle
from .helpers import REPO

EN_MEMBERS = ["academic-editor", "data-science-mentor", "go-reviewer", "security-auditor"]


def prepare(home: Path) -> None:
    """The demo data plus one of everything the pages show."""
    env = {"FURNACE_HOME": str(home), "FURNACE_EMBEDDER": "hash", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [sys.executable, "-c", "from furnace.cli import main; main()", "demo"],
        cwd=REPO,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    from furnace.fusion.embedding import HashEmbedder
    from furnace.fusion.fuse import fuse
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from furnace.writing.content import generate_content
    from furnace.writing.revision import revise

    settings = FurnaceSettings(home=home, embedder="hash")
    rt = Runtime(settings)
    store, llm, contents = rt.store, rt.llm, rt.content_store
    fuse(
        store,
        ["academic-editor", "legal-plain-language"],
        llm=llm,
        embedder=HashEmbedder(),
        cache=rt.synthesis_cache,
        operator="crossover",
        settings=settings,
    )
    content, _ = generate_content(store, contents, llm, persona_id="viral-copywriter", topic="summer sunscreen habits")
    revise(store, contents, llm, content.id, "Too formal, make it livelier and add an emoji")
    arena = rt.arena()
    session = arena.create_session(EN_MEMBERS, title="Review board")
    arena.say(session.id, "Sound off!")
    from .helpers import PEOPLE_EXPERIMENT, run_experiment, run_small_experiments

    run_small_experiments(home)  # two more experiments to overlay with the demo's
    run_experiment(home, "people.yaml", PEOPLE_EXPERIMENT)  # the Judge page's (newest: shown first)


def _multiselect(page: Any, label: str, ids: list[str]) -> None:
    """Pick options of a multiselect by the id shown in their label."""
    box = page.get_by_label(label)
    for ident in ids:
        box.click()
        box.fill(ident)
        page.get_by_role("option").filter(has_text=f"({ident}").first.click()
        settle(page)
    page.keyboard.press("Escape")
    settle(page)


def shoot(url: str, out: Path) -> list[Path]:
    """One screenshot per page."""
    shots: list[Path] = []
    with browser_page(1440, 1000) as page:

        def snap(name: str) -> None:
            settle(page)
            path = out / f"app-{name}.png"
            page.screenshot(path=str(path))
            shots.append(path)

        page.goto(url)
        page.get_by_role("heading", name="Personas").wait_for()
        page.get_by_label("Identity * (one sentence)").wait_for()
        snap("personas")

        page.goto(f"{url}/furnace")
        page.get_by_role("heading", name="Furnace").wait_for()
        _multiselect(page, "Parents (elixirs or agents)", ["data-science-mentor", "socratic-math-tutor"])
        page.get_by_role("button", name="Fuse", exact=True).click()
        page.get_by_text("Resolution notes").wait_for()
        page.locator('[data-testid="stGraphVizChart"] svg').first.wait_for()
        snap("furnace")

        page.goto(f"{url}/revision")
        page.get_by_role("heading", name="Revision chat").wait_for()
        page.get_by_text("V1→V2").first.wait_for()
        snap("revision")

        page.goto(f"{url}/lineage")
        page.get_by_role("heading", name="Lineage").wait_for()
        box = page.get_by_label("Agent or elixir id", exact=True).and_(page.get_by_role("textbox"))
        box.fill("demo-champion")
        box.press("Enter")
        page.locator('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg').first.wait_for()
        snap("lineage")

        page.goto(f"{url}/compare")
        page.get_by_role("heading", name="Compare").wait_for()
        _multiselect(page, "Agents or elixirs (2–4)", ["demo-champion", "data-science-mentor"])
        page.get_by_role("button", name="Compare", exact=True).click()
        page.get_by_test_id("stMetric").nth(1).wait_for()
        snap("compare-agents")
        page.get_by_role("tab", name="Experiments").click()
        charts = page.locator('[data-testid="stVegaLiteChart"]')
        charts.nth(3).wait_for()  # fitness x2, operators, Pareto
        snap("compare-experiments")
        pareto = charts.nth(3)
        pareto.scroll_into_view_if_needed()
        settle(page)
        path = out / "app-compare-pareto.png"
        pareto.screenshot(path=str(path))
        shots.append(path)

        page.goto(f"{url}/arena")
        page.get_by_role("heading", name="Arena").wait_for()
        page.get_by_text("Show plans").click()
        page.get_by_text("plan (directive").first.wait_for()
        snap("arena")

        page.goto(f"{url}/assistant")
        page.get_by_role("heading", name="Lab assistant").wait_for()
        box = page.get_by_test_id("stChatInputTextArea")
        box.fill("which agents scored best?")
        box.press("Enter")
        page.locator('[data-testid="stDataFrame"]').first.wait_for()
        snap("assistant")

        shots.append(judge_shot(page, url, out))
    return shots


def judge_shot(page: Any, url: str, out: Path) -> Path:
    """The Judge page on the newest experiment (the one weighting people's picks): after one pick, its
    candidates revealed, the next blind pair shown and the pairs still waiting."""
    size = page.viewport_size
    page.set_viewport_size({"width": 1440, "height": 1800})  # the page scrolls inside the app: all of it in view
    page.goto(f"{url}/judge")
    page.get_by_role("heading", name="Judge").wait_for()
    page.get_by_text("pairs waiting").first.wait_for()
    pick_on_the_judge_page(page, "ana", "answers the question first")
    path = out / "app-judge.png"
    page.screenshot(path=str(path))
    page.set_viewport_size(size)
    return path


def main(argv: list[str]) -> int:
    reason = browser_missing()
    if reason:
        print(f"cannot take screenshots: {reason}", file=sys.stderr)
        return 1
    only_judge = "--only" in argv and argv[argv.index("--only") + 1 : argv.index("--only") + 2] == ["judge"]
    rest = [a for a in argv if a not in ("--only", "judge")]
    out = Path(rest[0]) if rest else REPO / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="furnace-tour-") as tmp:
        home = Path(tmp) / "home"
        if only_judge:
            from .helpers import PEOPLE_EXPERIMENT, run_experiment, seed_home

            run_experiment(seed_home(home), "people.yaml", PEOPLE_EXPERIMENT)
        else:
            home.mkdir()
            prepare(home)
        with app_server(home) as url:
            if only_judge:
                with browser_page(1440, 1000) as page:
                    shots = [judge_shot(page, url, out)]
            else:
                shots = shoot(url, out)
            for path in shots:
                print(f"{path}  {path.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

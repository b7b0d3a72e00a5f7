"""A real browser against ``streamlit run``: edit and save a persona, send a revision, read the reply."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .browser import app_server, browser_missing, chromium, new_page, pick_on_the_judge_page, settle
from .helpers import REPO, run_small_experiments, seed_family, seed_home

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO / "test-artifacts"


@dataclass(frozen=True)
class Seeded:
    """The module's home: the library, a piece of content, two finished experiments and a 50-node family
    (each test reads its own part of it; what one test saves, no other test looks at)."""

    home: Path
    experiments: list[str]
    family: tuple[str, list[str]]  # the root's id, its children's agent ids


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    home = seed_home(tmp_path_factory.mktemp("browser") / "home")
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings
    from furnace.writing.content import generate_content

    rt = Runtime(FurnaceSettings(home=home))
    generate_content(
        rt.store,
        rt.content_store,
        rt.llm,
        persona_id="lifestyle-blogger-zh",
        topic="夏日防晒",
    )
    rt.close()
    experiments = run_small_experiments(home)  # bred from the first 4 seeds: not from the family's root
    return Seeded(home, experiments, seed_family(home, 50))


@pytest.fixture(scope="module")
def url(seeded: Seeded) -> Iterator[str]:
    """One app server for the module's tests (each test opens its own pages: a Streamlit session each)."""
    with app_server(seeded.home) as base:
        yield base


@pytest.fixture(scope="module")
def browser(seeded: Seeded) -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    page = new_page(browser)
    try:
        yield page
    finally:
        page.context.close()


def test_edit_persona_and_revise_in_a_real_browser(seeded: Seeded, url: str, page: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(url)
    page.get_by_role("heading", name="Personas").wait_for()
    identity = page.get_by_label("Identity * (one sentence)")
    identity.wait_for()
    identity.fill("A meticulous academic editor who checks every claim twice.")
    identity.press("Tab")
    settle(page)
    page.get_by_role("button", name="Save as new version").click()
    saved = page.get_by_text("Saved academic-editor v2").first  # under the button, and a toast
    saved.wait_for()
    assert page.get_by_role("button", name="Deploy").count() == 0  # `furnace app` hides Streamlit's toolbar
    page.screenshot(path=str(ARTIFACTS / "browser-personas-saved.png"), full_page=True)

    page.goto(f"{url}/revision")
    page.get_by_role("heading", name="Revision chat").wait_for()
    box = page.get_by_test_id("stChatInputTextArea")
    box.wait_for()
    box.fill("太正式了，活泼一点，加一个 emoji")
    box.press("Enter")
    reply = page.get_by_text("V1→V2", exact=False).first
    reply.wait_for()
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "browser-revision-reply.png"), full_page=True)
    assert "V1→V2" in reply.inner_text()

    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    settings = FurnaceSettings(home=seeded.home)
    assert Runtime(settings).store.get_elixir("academic-editor").version == 2
    [content] = Runtime(settings).content_store.list_contents()
    assert len(Runtime(settings).content_store.versions(content.id)) == 2


PAGES = [  # (url path, heading); the lineage and compare pages are driven further on the same visit
    ("", "Personas"),
    ("furnace", "Furnace"),
    ("revision", "Revision chat"),
    ("arena", "Arena"),
    ("assistant", "Lab assistant"),
    ("lineage", "Lineage"),
    ("compare", "Compare"),
    ("judge", "Judge"),
]


def test_every_page_with_two_experiments_in_a_real_browser(seeded: Seeded, url: str, page: Any) -> None:
    experiments = seeded.experiments
    ARTIFACTS.mkdir(exist_ok=True)
    for path, heading in PAGES:
        page.goto(f"{url}/{path}")
        page.get_by_role("heading", level=1, name=heading).wait_for()
        settle(page)
        assert page.locator('[data-testid="stException"]').count() == 0, path
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0, path
        if path == "lineage":
            box = page.get_by_label("Agent or elixir id", exact=True).and_(page.get_by_role("textbox"))
            box.fill("data-science-mentor")
            box.press("Enter")
            page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
            settle(page)
            assert page.locator('[data-testid="stException"]').count() == 0
            page.screenshot(path=str(ARTIFACTS / "browser-lineage-explorer.png"), full_page=True)
        elif path == "compare":
            page.get_by_role("tab", name="Experiments").click()
            charts = page.locator('[data-testid="stVegaLiteChart"]')
            charts.nth(3).wait_for()  # two fitness overlays, operator success, Pareto scatter
            settle(page)
            for exp_id in experiments:  # both experiments are overlaid (legend and totals table)
                assert page.get_by_text(exp_id).count() > 0, exp_id
            page.screenshot(path=str(ARTIFACTS / "browser-compare-overlay.png"), full_page=True)
        elif path == "judge":
            page.get_by_role("heading", name="A", exact=True).wait_for()
            assert page.get_by_text("Stored pick-").count() == 0 and page.get_by_text("A was ").count() == 0
            pick_on_the_judge_page(page, "ana", "clearer")  # the candidates' ids show only after the pick
            assert page.get_by_text("A was ", exact=False).count() == 1
            assert page.locator('[data-testid="stException"]').count() == 0
            page.screenshot(path=str(ARTIFACTS / "browser-judge-pick.png"), full_page=True)
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    picks = Runtime(FurnaceSettings(home=seeded.home)).picks
    [pick] = [p for exp_id in experiments for p in picks.picks(exp_id)]
    assert (pick.who, pick.choice, pick.reason) == ("ana", "A", "clearer")


# The Vega view Streamlit embedded (found through React's hooks of the chart's element), and every text label
# of the chart's own marks (not axes or legend) with the box the browser measured for it, in chart pixels.
_LABEL_BOXES = """(root) => {
  const fiberKey = Object.keys(root).find((k) => k.startsWith("__reactFiber$"));
  let view = null;
  for (let fiber = root[fiberKey]; fiber && !view; fiber = fiber.return) {
    for (let hook = fiber.memoizedState; hook && !view; hook = hook.next) {
      const value = hook && hook.memoizedState;
      const held = value && typeof value === "object" && "current" in value ? value.current : value;
      if (held && typeof held.scenegraph === "function") view = held;
    }
  }
  if (!view) return null;
  const labels = [];
  const walk = (node, dx, dy) => {
    if (!node) return;
    if (node.marktype === "text" && node.role === "mark") {
      for (const t of node.items) {
        labels.push({text: String(t.text), x1: t.bounds.x1 + dx, y1: t.bounds.y1 + dy,
                     x2: t.bounds.x2 + dx, y2: t.bounds.y2 + dy});
      }
      return;
    }
    for (const item of node.items || []) {
      const ox = dx + (item.mark && item.mark.marktype === "group" ? item.x || 0 : 0);
      const oy = dy + (item.mark && item.mark.marktype === "group" ? item.y || 0 : 0);
      for (const child of item.items || []) walk(child, ox, oy);
      if (item.marktype) walk(item, dx, dy);
    }
  };
  walk(view.scenegraph().root, 0, 0);
  return {renderer: view.renderer(), labels};
}"""


def test_a_50_node_lineage_is_readable_in_a_real_browser(seeded: Seeded, url: str, page: Any) -> None:
    root, children = seeded.family
    page.goto(f"{url}/lineage")
    page.get_by_role("heading", name="Lineage").wait_for()
    settle(page)
    box = page.get_by_label("Agent or elixir id", exact=True).and_(page.get_by_role("textbox"))
    box.fill(root)
    box.press("Enter")
    chart = page.locator('[data-testid="stVegaLiteChart"]').first
    chart.locator("canvas, svg.marks").first.wait_for()
    settle(page)
    drawn = chart.evaluate(_LABEL_BOXES)
    # the rerun for the typed id may start after settle() returned: the page's first chart (its default
    # selection) can still be on screen, so wait (bounded) for the chart of the typed id
    waited = 0
    while (drawn is None or len(drawn["labels"]) != len(children) + 1) and waited < 240:
        page.wait_for_timeout(250)
        waited += 1
        settle(page)
        drawn = page.locator('[data-testid="stVegaLiteChart"]').first.evaluate(_LABEL_BOXES)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path="/tmp/furnace-lineage-50.png", full_page=True)

    assert drawn is not None, "no Vega view behind the lineage chart"
    labels = drawn["labels"]
    texts = [label["text"] for label in labels]
    assert len(labels) == len(children) + 1 and len(set(texts)) == len(texts), texts  # every node, distinct
    assert all(t.strip() for t in texts)
    for label in labels:  # the browser measured a real box for each label
        assert label["x2"] > label["x1"] and label["y2"] > label["y1"], label
    overlaps = [
        (a["text"], b["text"])
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]
    ]
    assert not overlaps, overlaps[:5]

"""The docs site builds with ``mkdocs build --strict`` and the README's links land on real files."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs-material is not installed (pip install -e '.[docs]'); the docs site was not built",
)


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(cmd, cwd=config.parent, env=env, capture_output=True, text=True, timeout=300)


def nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages.extend(nav_pages(value) if isinstance(value, list) else [value])
    return pages


def slug(heading: str) -> str:
    """The anchor mkdocs and GitHub both give an ASCII heading."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M)}


def local_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = LINK.findall(text) + IMAGE.findall(text)
    return [t for t in found if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def config() -> dict:
    return yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.SafeLoader)


@needs_mkdocs
def test_site_builds_strict_with_every_nav_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = build(REPO / "mkdocs.yml", site)
    assert result.returncode == 0, result.stderr[-3000:]
    pages = nav_pages(config()["nav"])
    for page in pages:
        built = site / ("index.html" if page == "index.md" else page.removesuffix(".md") + "/index.html")
        assert built.is_file(), f"{page} was not built"
    assert (site / "img" / "app-personas.png").is_file()


@needs_mkdocs
def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The check above can fail: a copy of the site with one dead link does not build."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_every_docs_page_is_in_the_nav() -> None:
    listed = set(nav_pages(config()["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk - listed == set(), "add these pages to the nav in mkdocs.yml"
    assert listed - on_disk == set(), "the nav names pages that do not exist"


def test_readme_is_short_and_links_to_files_that_exist() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300
    links = local_links(README)
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = (REPO / path) if path else README
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"README links to {link}: no heading gives #{anchor}"


def test_docs_images_exist() -> None:
    """Screenshots live in docs/img/ and every page's images resolve (also checked by the strict build)."""
    for page in DOCS.rglob("*.md"):
        for link in IMAGE.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            assert (page.parent / link).is_file(), f"{page.name}: missing image {link}"

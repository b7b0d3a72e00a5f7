"""``furnace elixir ...`` and ``furnace import`` through ``furnace.cli.main`` on a temp FURNACE_HOME."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from furnace.cli import main
from furnace.domain.elixir import parse_elixir
from furnace.domain.render import render_prompt

ADA: dict[str, Any] = {
    "id": "ada",
    "name": "Ada",
    "identity": "A careful helper.",
    "expertise": ["python", "testing"],
    "principles": ["Answer precisely."],
    "tone": {"humor": 0.4},
}


class Run:
    """Run the CLI and capture (exit code, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exit:
            code = int(exit.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code == 0, err
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, *args: str) -> str:
        code, out, err = self(*args)
        assert code != 0
        assert "Traceback" not in err + out
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        return lines[0]


@pytest.fixture()
def run(home: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(capsys)


def write(tmp_path: Path, data: Any, name: str = "ada.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_add_prints_id_version_hash(run: Run, tmp_path: Path) -> None:
    out = run.ok("elixir", "add", str(write(tmp_path, ADA)))
    expected_hash = parse_elixir(ADA).content_hash
    assert out.split() == ["ada", "v1", expected_hash, "created"]
    again = run.json("elixir", "add", str(write(tmp_path, ADA)))
    assert again == {"id": "ada", "version": 1, "content_hash": expected_hash, "status": "unchanged"}


def test_add_bad_file_is_one_line_and_stores_nothing(run: Run, tmp_path: Path) -> None:
    bad = write(tmp_path, [ADA, {**ADA, "id": "bea", "tone": {"humor": 1.7}}], "lib.yaml")
    line = run.fails("elixir", "add", str(bad))
    assert line.startswith("error: lib.yaml: item 2 (line ") and "tone.humor must be between 0 and 1, got 1.7" in line
    assert run.json("elixir", "list") == []
    assert "no such file" in run.fails("elixir", "add", str(tmp_path / "missing.yaml"))
    (tmp_path / "broken.yaml").write_text("id: [", encoding="utf-8")
    assert run.fails("elixir", "add", str(tmp_path / "broken.yaml")).startswith("error: broken.yaml: line ")


def test_list_show_history_diff_render_delete(run: Run, tmp_path: Path) -> None:
    run.ok("elixir", "add", str(write(tmp_path, ADA)))
    run.ok("elixir", "add", str(write(tmp_path, {**ADA, "tone": {"humor": 0.9}, "expertise": ["python", "go"]})))
    run.ok("elixir", "add", str(write(tmp_path, {**ADA, "id": "zed", "name": "Zed", "language": "zh"}, "zed.yaml")))

    listed = run.json("elixir", "list")
    assert [(e["id"], e["version"]) for e in listed] == [("ada", 2), ("zed", 1)]
    assert [e["id"] for e in run.json("elixir", "list", "--query", "GO")] == ["ada"]
    assert "ada  v2" in run.ok("elixir", "list")

    shown = run.json("elixir", "show", "ada@1")
    assert shown["version"] == 1 and shown["tone"]["humor"] == 0.4
    assert shown["content_hash"] == parse_elixir(ADA).content_hash
    assert run.ok("elixir", "show", "ada").startswith("# ada@2  ")

    history = run.json("elixir", "history", "ada")
    assert [h["version"] for h in history] == [1, 2]
    assert len(run.ok("elixir", "history", "ada").strip().splitlines()) == 2

    diff = run.ok("elixir", "diff", "ada@1", "ada@2")
    assert "~ tone.humor: 0.4 → 0.9" in diff
    assert '- expertise: "testing"' in diff and '+ expertise: "go"' in diff
    changes = run.json("elixir", "diff", "ada@1", "ada@2")["changes"]
    assert {"field": "tone.humor", "kind": "changed", "before": 0.4, "after": 0.9} in changes

    v1 = parse_elixir(ADA)
    assert run.ok("elixir", "render", "ada@1") == render_prompt(v1)
    rendered = run.json("elixir", "render", "ada@1", "--lang", "zh")
    assert rendered["language"] == "zh" and rendered["prompt"] == render_prompt(v1, "zh")
    assert "## 身份" in run.ok("elixir", "render", "zed")

    assert "deleted ada (2 version(s) withdrawn)" in run.ok("elixir", "delete", "ada")
    assert [e["id"] for e in run.json("elixir", "list")] == ["zed"]
    assert run.json("elixir", "show", "ada")["deleted_at"] is not None
    assert "was deleted" in run.fails("elixir", "add", str(write(tmp_path, {**ADA, "priority": 3})))


def test_deleting_twice_withdraws_nothing_the_second_time(run: Run, tmp_path: Path) -> None:
    run.ok("elixir", "add", str(write(tmp_path, ADA)))
    run.ok("elixir", "add", str(write(tmp_path, {**ADA, "tone": {"humor": 0.9}})))
    assert run.ok("elixir", "delete", "ada") == "deleted ada (2 version(s) withdrawn)\n"
    deleted_at = [run.json("elixir", "show", f"ada@{v}")["deleted_at"] for v in (1, 2)]

    again = run.ok("elixir", "delete", "ada")  # an idempotent no-op: exit 0, and it says so
    assert again == "ada was already deleted (2 version(s) withdrawn before); nothing changed\n"
    assert "deleted ada (" not in again
    assert run.json("elixir", "delete", "ada") == {
        "id": "ada",
        "deleted": True,
        "versions": 2,
        "withdrawn": 0,
        "already_deleted": True,
    }
    assert [run.json("elixir", "show", f"ada@{v}")["deleted_at"] for v in (1, 2)] == deleted_at  # untouched


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("elixir", "show", "nope"), "no elixir 'nope'"),
        (("elixir", "show", "ada@9"), "has no version 9"),
        (("elixir", "show", "ada@x"), "version must be a positive integer"),
        (("elixir", "show", "@1"), "expected ID or ID@VERSION"),
        (("elixir", "history", "nope"), "no elixir 'nope'"),
        (("elixir", "diff", "ada@1", "nope@1"), "no elixir 'nope'"),
        (("elixir", "render", "nope"), "no elixir 'nope'"),
        (("elixir", "delete", "nope"), "no elixir 'nope'"),
        (("import",), "give either FILE or --library"),
    ],
)
def test_errors_are_one_line(run: Run, tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    run.ok("elixir", "add", str(write(tmp_path, ADA)))
    line = run.fails(*args)
    assert fragment in line, line


def test_import_library_twice(run: Run) -> None:
    first = run.json("import", "--library")
    assert len(first["created"]) >= 12 and not first["skipped"]
    second = run.ok("import", "--library")
    assert second.strip().splitlines()[-1].startswith("created 0, updated 0, unchanged ")
    assert any(e["language"] == "zh" for e in run.json("elixir", "list"))


def test_import_a_folder_takes_every_elixir_file_in_it_or_none(run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    write(folder, ADA)
    (folder / "bea.json").write_text(json.dumps({**ADA, "id": "bea", "name": "Bea"}), encoding="utf-8")
    (folder / "README.md").write_text("notes, not an elixir", encoding="utf-8")
    report = run.json("import", str(folder))
    assert sorted(r["id"] for r in report["created"]) == ["ada", "bea"]
    assert run.json("import", str(folder))["created"] == []  # again: nothing new

    cards = tmp_path / "cards"  # character cards are read as `furnace import CARD` reads them
    cards.mkdir()
    run.ok("export", "ada", "--format", "card-v3", "--out", str(cards / "ada-card.json"))
    run.ok("export", "bea", "--format", "card-png", "--out", str(cards / "bea-card.png"))
    (cards / "corpus.csv").write_text("act,prompt\nPoet,Write\n", encoding="utf-8")  # imported on its own
    read = run.json("import", str(cards))
    assert sorted(r["id"] for r in read["unchanged"]) == ["ada", "bea"] and not read["created"]

    broken = tmp_path / "broken"
    broken.mkdir()
    write(broken, {**ADA, "id": "cid", "name": "Cid"})
    write(broken, {**ADA, "id": "dee", "tone": {"humor": 7}}, "dee.yaml")
    line = run.fails("import", str(broken))
    assert "dee.yaml" in line
    assert "cid" not in [e["id"] for e in run.json("elixir", "list")]  # validated first: nothing written


def test_import_small_csv_reports_skipped_rows(run: Run, tmp_path: Path) -> None:
    csv_path = tmp_path / "mini.csv"
    csv_path.write_text(
        "act,prompt,for_devs,type,contributor\n"
        'Poet,"I want you to act as a poet. Write short poems.",FALSE,TEXT,a\n'
        'Painter,"Draw a cat",FALSE,IMAGE,b\n'
        "Broken,row\n",
        encoding="utf-8",
    )
    out = run.ok("import", str(csv_path))
    assert "acp-poet  v1" in out
    assert "skipped row 3: IMAGE prompt, not a persona" in out
    assert "skipped row 4: has 2 fields, expected 5" in out
    report = run.json("import", str(csv_path))
    assert not report["created"] and [r["id"] for r in report["unchanged"]] == ["acp-poet"]
    assert {"row": 4, "reason": "has 2 fields, expected 5"} in report["skipped"]


@pytest.mark.slow
def test_import_full_corpus_twice(run: Run) -> None:
    corpus = Path(__file__).resolve().parents[2] / "data" / "corpus" / "awesome-chatgpt-prompts.csv"
    first = run.json("import", str(corpus))
    assert len(first["created"]) > 350
    second = run.json("import", str(corpus))
    assert not second["created"] and not second["updated"] and len(second["unchanged"]) == len(first["created"])

"""Importers: elixir files (YAML/JSON), the CSV corpus, the sample library, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from furnace import resources
from furnace.domain.elixir import Elixir, parse_elixir
from furnace.domain.errors import InputError
from furnace.domain.render import render_prompt
from furnace.domain.text import detect_language
from furnace.interop.importers import (
    Reader,
    ReadResult,
    import_csv,
    import_file,
    import_library,
    load_elixir_file,
    read_file,
    register_reader,
)
from furnace.interop.importers.corpus import instructions
from furnace.interop.importers.files import parse_document
from furnace.storage.memory import MemoryStore

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "corpus" / "awesome-chatgpt-prompts.csv"
LIBRARY = resources.LIBRARY_DIR

GOOD: dict[str, Any] = {
    "id": "ada",
    "name": "Ada",
    "identity": "A careful helper.",
    "expertise": ["python"],
    "principles": ["Answer precisely."],
}


_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join('*' + chr(97 + i) for _ in range(10))}]\n" for i in range(8)
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- elixir files ------------------------------------------------------------


def test_yaml_single_and_json_list(tmp_path: Path) -> None:
    [one] = load_elixir_file(write(tmp_path, "ada.yaml", yaml.safe_dump(GOOD)))
    assert one.id == "ada"
    two = load_elixir_file(write(tmp_path, "two.json", json.dumps([GOOD, {**GOOD, "id": "bea", "name": "Bea"}])))
    assert [e.id for e in two] == ["ada", "bea"]


def test_bom_and_yml_suffix(tmp_path: Path) -> None:
    path = tmp_path / "ada.yml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(GOOD).encode())
    assert load_elixir_file(path)[0].id == "ada"


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("bad.yaml", "id: ada\nname: [unclosed\nidentity: x\n", ["bad.yaml", "line "]),
        ("bad.yaml", "id: ada\n  name: x\n", ["bad.yaml", "line 2"]),
        ("bad.json", '{"id": "ada",\n "name": }', ["bad.json", "line 2"]),
        ("empty.yaml", "", ["empty.yaml", "empty"]),
        ("scalar.yaml", "just text", ["scalar.yaml", "got str"]),
        ("nolist.json", "[]", ["holds no elixirs"]),
        ("multi.yaml", "a: 1\n---\nb: 2\n", ["multi.yaml", "line 2"]),
        ("self.yaml", "a: &a [x, *a]\n", ["self.yaml", "refers to itself", "line 1"]),
        ("laughs.yaml", _LAUGHS, ["laughs.yaml", "expands to more than"]),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, name: str, text: str, fragments: list[str]) -> None:
    with pytest.raises(InputError) as info:
        load_elixir_file(write(tmp_path, name, text))
    for fragment in fragments:
        assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_item_names_item_and_line(tmp_path: Path) -> None:
    bad = {**GOOD, "id": "bea", "tone": {"humor": 1.7}}
    path = write(tmp_path, "lib.yaml", yaml.safe_dump([GOOD, bad], sort_keys=False))
    with pytest.raises(InputError) as info:
        load_elixir_file(path)
    message = str(info.value)
    assert message.startswith("lib.yaml: item 2 (line ")
    assert "tone.humor must be between 0 and 1, got 1.7" in message
    assert info.value.field == "tone.humor"


def test_duplicate_ids_in_one_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="id 'ada' already used by item 1"):
        load_elixir_file(write(tmp_path, "dup.json", json.dumps([GOOD, GOOD])))


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_elixir_file(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="expected a .yaml"):
        load_elixir_file(write(tmp_path, "x.txt", "hi"))
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("name: caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        load_elixir_file(latin1)
    with pytest.raises(InputError, match="unknown file type"):
        read_file(write(tmp_path, "x.txt", "hi"))


def test_import_is_all_or_nothing(tmp_path: Path) -> None:
    store = MemoryStore()
    bad = {**GOOD, "id": "bea", "identity": ""}
    with pytest.raises(InputError, match="item 2.*identity must not be empty"):
        import_file(write(tmp_path, "lib.json", json.dumps([GOOD, bad])), store)
    assert store.list_elixirs(origin=None, include_deleted=True) == []


def test_import_twice_creates_nothing_new_and_edits_make_versions(tmp_path: Path) -> None:
    store = MemoryStore()
    path = write(tmp_path, "ada.yaml", yaml.safe_dump(GOOD))
    first = import_file(path, store)
    assert [r.version for r in first.created] == [1] and not first.unchanged
    second = import_file(path, store)
    assert not second.created and not second.updated and [r.version for r in second.unchanged] == [1]
    write(tmp_path, "ada.yaml", yaml.safe_dump({**GOOD, "tone": {"humor": 0.9}}))
    conflict = import_file(path, store)  # the stored content is never replaced silently
    assert not conflict.updated and [r.version for r, _ in conflict.conflicts] == [1]
    assert "already exists (v1) with different content" in conflict.conflicts[0][1]
    assert len(store.history("ada")) == 1
    third = import_file(path, store, new_version=True)
    assert [r.version for r in third.updated] == [2]
    assert len(store.history("ada")) == 2


def test_import_skips_a_deleted_id_and_imports_the_rest(tmp_path: Path) -> None:
    store = MemoryStore()
    store.save_elixir(parse_elixir({**GOOD, "id": "bea", "name": "Bea"}))
    store.delete_elixir("bea")
    path = write(tmp_path, "two.json", json.dumps([GOOD, {**GOOD, "id": "bea", "name": "Bea", "priority": 5}]))
    for new_version in (False, True):  # a withdrawn id never comes back, not even as a new version
        report = import_file(path, store, new_version=new_version)
        assert report.skipped == [(0, "two.json: item 2: elixir 'bea' was deleted")]
        assert len(store.history("bea")) == 1 and store.get_elixir("bea").withdrawn
    assert [r.id for r in store.list_elixirs()] == ["ada"]


def test_register_reader_takes_precedence(tmp_path: Path) -> None:
    seen: list[Path] = []

    def read(path: Path) -> ReadResult:
        seen.append(path)
        return ReadResult(elixirs=[("file", parse_elixir(GOOD))])

    from furnace.interop import importers

    saved = list(importers.READERS)
    try:
        register_reader(Reader("test card", lambda p: p.name.endswith(".card.json"), read))
        report = import_file(write(tmp_path, "x.card.json", "not json at all"), MemoryStore())
        assert seen and [r.id for r in report.created] == ["ada"]
    finally:
        importers.READERS[:] = saved


# --- the CSV corpus ------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> ReadResult:
    return import_csv(CORPUS)


def test_corpus_text_rows_become_valid_elixirs(corpus: ReadResult) -> None:
    import csv

    rows = list(csv.DictReader(CORPUS.open(encoding="utf-8", newline="")))
    text_rows = [r for r in rows if r["type"] == "TEXT"]
    duplicates = [reason for _, reason in corpus.skipped if reason.startswith("duplicate of row")]
    assert len(corpus.elixirs) == len(text_rows) - len(duplicates)
    assert len(corpus.elixirs) > 350
    for _, elixir in corpus.elixirs:
        assert isinstance(elixir, Elixir) and elixir.id.startswith("acp-")
        assert parse_elixir(elixir.model_dump(mode="json")).content_hash == elixir.content_hash
        render_prompt(elixir)


def test_corpus_skips_image_rows_with_reasons(corpus: ReadResult) -> None:
    import csv

    rows = list(csv.DictReader(CORPUS.open(encoding="utf-8", newline="")))
    image_rows = {i + 2 for i, r in enumerate(rows) if r["type"] == "IMAGE"}
    skipped = dict(corpus.skipped)
    assert image_rows and image_rows <= set(skipped)
    assert all(skipped[row] == "IMAGE prompt, not a persona" for row in image_rows)


def test_corpus_linux_terminal(corpus: ReadResult) -> None:
    elixir = next(e for _, e in corpus.elixirs if e.name == "Linux Terminal")
    assert elixir.id == "acp-linux-terminal" and elixir.language == "en"
    assert elixir.identity == "You are a Linux Terminal."
    assert {"linux", "terminal"} <= set(elixir.expertise)
    assert "Only reply with the terminal output inside one unique code block, and nothing else." in elixir.principles
    assert "Do not write explanations." in elixir.principles
    assert not any("act as" in p.lower() or "my first command" in p.lower() for p in elixir.principles)


def test_corpus_detects_chinese(corpus: ReadResult) -> None:
    zh = [e for _, e in corpus.elixirs if e.language == "zh"]
    assert len(zh) >= 3
    kpi = next(e for e in zh if e.name == "设计KPI方案")
    assert kpi.identity == "你扮演「设计KPI方案」这一角色。"
    assert any("绩效" in p for p in kpi.principles)


def test_detect_language_and_instructions() -> None:
    assert detect_language("请你扮演一位翻译。只回答译文。") == "zh"
    assert detect_language("I want you to act as a translator.") == "en"
    assert instructions("I want you to act as a poet. I want you to only reply in verse. My first request is x.") == [
        "Only reply in verse."
    ]


def test_corpus_import_twice_creates_nothing(corpus: ReadResult) -> None:
    store = MemoryStore()
    first = import_file(CORPUS, store)
    assert len(first.created) == len(corpus.elixirs) and first.skipped == corpus.skipped
    second = import_file(CORPUS, store)
    assert not second.created and not second.updated and len(second.unchanged) == len(corpus.elixirs)


def test_broken_csv_rows_reported(tmp_path: Path) -> None:
    text = (
        "act,prompt,for_devs,type,contributor\n"
        'Poet,"I want you to act as a poet. Write short poems.",FALSE,TEXT,a\n'  # row 2: ok
        "Short,only three,FALSE\n"  # row 3
        'Painter,"Draw a cat",FALSE,IMAGE,b\n'  # row 4
        ',"I want you to act as nobody. Reply.",FALSE,TEXT,c\n'  # row 5
        'Empty,"",FALSE,TEXT,d\n'  # row 6
        'Video,"Make a video",FALSE,VIDEO,e\n'  # row 7
        'Poet,"I want you to act as a poet. Write short poems.",FALSE,TEXT,a\n'  # row 8: duplicate
        'Poet,"I want you to act as a poet. Only write haiku.",FALSE,TEXT,f\n'  # row 9: same role, new prompt
        'Chef,"""unterminated quote,FALSE,TEXT,g\n'  # row 10: runs to the end
    )
    result = import_csv(write(tmp_path, "broken.csv", text))
    assert [w for w, _ in result.elixirs] == ["row 2", "row 9"]
    assert result.elixirs[0][1].id == "acp-poet" and result.elixirs[1][1].id.startswith("acp-poet-")
    reasons = dict(result.skipped)
    assert reasons[3] == "has 3 fields, expected 5"
    assert reasons[4] == "IMAGE prompt, not a persona"
    assert reasons[5] == "act (the role) is empty"
    assert reasons[6] == "prompt is empty"
    assert "unknown type 'VIDEO'" in reasons[7]
    assert reasons[8] == "duplicate of row 2"
    assert 10 in reasons
    store = MemoryStore()
    report = import_file(tmp_path / "broken.csv", store)
    assert len(report.created) == 2 and len(report.skipped) == len(result.skipped)


def test_csv_missing_columns(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing column\\(s\\) prompt"):
        import_csv(write(tmp_path, "x.csv", "act,type\nPoet,TEXT\n"))
    with pytest.raises(InputError, match="empty"):
        import_csv(write(tmp_path, "y.csv", ""))


def test_csv_row_with_deleted_id_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", 'act,prompt,for_devs,type,contributor\nPoet,"Write short poems.",FALSE,TEXT,a\n')
    store = MemoryStore()
    import_file(path, store)
    store.delete_elixir("acp-poet")
    report = import_file(path, store)
    assert report.skipped == [(2, "elixir 'acp-poet' was deleted")] and not report.created


# --- the sample library -----------------------------------------------------------


def test_sample_library() -> None:
    files = sorted(LIBRARY.glob("*.yaml"))
    elixirs = [e for path in files for e in load_elixir_file(path)]
    assert len(elixirs) >= 12
    assert {path.stem for path in files} == {e.id for e in elixirs}  # stable ids = file names
    assert sum(e.language == "zh" for e in elixirs) >= 4
    by_id = {e.id: e for e in elixirs}
    pairs = [(e.id, other) for e in elixirs for other in e.conflicts_with if other in by_id]
    assert any((b, a) in pairs for a, b in pairs), "needs a mutual conflicts_with pair"
    assert len({e.constraints.max_length for e in elixirs}) >= 5
    assert {e.constraints.must_use_markdown for e in elixirs} == {True, False}
    assert all(e.few_shots for e in elixirs)
    assert sum(bool(e.tools) for e in elixirs) >= 4
    assert len({e.priority for e in elixirs}) >= 4
    blogger = by_id["lifestyle-blogger-zh"]
    assert blogger.language == "zh" and "防晒" in blogger.expertise and blogger.tone.formality <= 0.3


def test_import_library_is_idempotent_and_keep_existing() -> None:
    store = MemoryStore()
    first = import_library(LIBRARY, store)
    assert len(first.created) >= 12
    assert not import_library(LIBRARY, store).created
    edited = store.get_elixir("go-reviewer").model_copy(update={"priority": 1})
    store.save_elixir(edited)
    kept = import_library(LIBRARY, store, keep_existing=True)
    assert not kept.updated and store.get_elixir("go-reviewer").version == 2
    again = import_library(LIBRARY, store)  # never replaces the user's newer, different elixir
    assert not again.updated and [r.id for r, _ in again.conflicts] == ["go-reviewer"]
    assert store.get_elixir("go-reviewer").priority == 1
    reverted = import_library(LIBRARY, store, new_version=True)
    assert [r.id for r in reverted.updated] == ["go-reviewer"]


# --- property: the loader never crashes and never half-writes -------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30)
json_docs = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=25,
)
field_names = st.sampled_from(
    [
        "id",
        "name",
        "identity",
        "expertise",
        "principles",
        "tone",
        "constraints",
        "few_shots",
        "tools",
        "priority",
        "conflicts_with",
        "style_notes",
        "style_preferences",
        "language",
        "version",
        "created_at",
    ]
)


@st.composite
def mutated_elixirs(draw: st.DrawFn) -> dict[str, Any]:
    data = json.loads(
        json.dumps(
            {
                **GOOD,
                "tone": {"humor": 0.4},
                "few_shots": [{"input": "a", "output": "b"}],
                "constraints": {"max_length": 10},
            }
        )
    )
    for _ in range(draw(st.integers(1, 3))):
        key = draw(field_names)
        action = draw(st.sampled_from(["set", "drop", "nest"]))
        if action == "drop":
            data.pop(key, None)
        elif action == "set":
            data[key] = draw(json_docs)
        elif isinstance(data.get(key), dict) and data[key]:
            inner = draw(st.sampled_from(sorted(data[key])))
            data[key][inner] = draw(json_docs)
        else:
            data[key] = [draw(json_docs)]
    return data


def _check_loader(text: str, fmt: str) -> None:
    store = MemoryStore()
    try:
        found = parse_document("prop." + fmt, text, fmt=fmt)
    except InputError as err:
        assert str(err).startswith("prop." + fmt)
        return
    assert found and all(isinstance(e, Elixir) for _, e in found)
    for _, elixir in found:
        render_prompt(elixir)
    assert store.list_elixirs(origin=None, include_deleted=True) == []


def _check_import(tmp_path: Path, text: str) -> None:
    path = tmp_path / "prop.json"
    path.write_text(text, encoding="utf-8")
    store = MemoryStore()
    try:
        report = import_file(path, store)
    except InputError:
        assert store.list_elixirs(origin=None, include_deleted=True) == []  # nothing half-written
        return
    assert len(report.created) == len(store.list_elixirs(origin=None))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(json_docs)
def test_property_arbitrary_json(tmp_path: Path, doc: Any) -> None:
    text = json.dumps(doc)
    _check_loader(text, "json")
    _check_loader(text, "yaml")  # JSON is YAML too
    _check_import(tmp_path, text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.one_of(mutated_elixirs(), st.lists(mutated_elixirs(), min_size=1, max_size=3)))
def test_property_mutated_elixirs(tmp_path: Path, doc: Any) -> None:
    _check_loader(json.dumps(doc), "json")
    _check_import(tmp_path, json.dumps(doc))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_property_arbitrary_yaml_text(text: str) -> None:
    _check_loader(text, "yaml")


def test_yaml_aliases_are_fine_within_limits(tmp_path: Path) -> None:
    text = (
        "- &base\n  id: ada\n  name: Ada\n  identity: A careful helper.\n  expertise: &ex [python]\n"
        "  principles: [Be precise.]\n"
        "- id: bea\n  name: Bea\n  identity: Another.\n  expertise: *ex\n  principles: [Be kind.]\n"
    )
    assert [e.expertise for e in load_elixir_file(write(tmp_path, "a.yaml", text))] == [("python",), ("python",)]

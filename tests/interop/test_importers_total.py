"""Every file importer is total: crafted files that used to crash give one clear InputError.

Also the shape limits (depth, items per list) that are checked before parsing, and
a fixed-seed share of the importer fuzz run (``make fuzz`` runs 10,000 cases).
"""

from __future__ import annotations

import base64
import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_importers import KINDS, check_case, make_case, seeds_for_fuzz
from furnace.domain.errors import InputError
from furnace.interop.importers import import_file, read_file
from furnace.interop.limits import check_items, check_json_shape, check_yaml_shape
from furnace.interop.png import write_png
from furnace.storage.memory import MemoryStore


def _png(card: object, keyword: str = "chara") -> bytes:
    return write_png([(keyword, base64.b64encode(json.dumps(card).encode()).decode())])


def _v2(**data: object) -> dict:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Quill", **data}}


# (file name, bytes, what the one-line error says) — each of these raised an internal error before.
CRAFTED = {
    "png spec is a dict": ("card.png", _png({"spec": {"a": 1}, "data": {"name": "x"}}), "'spec' must be a string"),
    "png spec is a list": ("card.png", _png({"spec": [1], "data": {"name": "x"}}), "'spec' must be a string"),
    "furnace exact is a list": (
        "card.json",
        json.dumps(_v2(extensions={"furnace": {"exact": [1]}})).encode(),
        "extensions.furnace.exact must be an object",
    ),
    "furnace lineage is a string": (
        "card.json",
        json.dumps(_v2(extensions={"furnace": {"lineage": "x"}})).encode(),
        "extensions.furnace.lineage must be an object",
    ),
    "deep json array": ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested more than 64 levels"),
    "deep json object": ("deep.json", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, "nested more than 64 levels"),
    "deep json inside a card": (
        "card.json",
        b'{"spec": "chara_card_v2", "data": {"name": "x", "extensions": ' + b"[" * 3000 + b"]" * 3000 + b"}}",
        "nested",
    ),
    "deep yaml flow": ("deep.yaml", b"[" * 5_000 + b"]" * 5_000, "nest"),  # libyaml stops it first
    "deep yaml block": (
        "deep.yaml",
        "".join(f"{'  ' * i}k{i}:\n" for i in range(200)).encode(),
        "nested more than 64 levels",
    ),
    "100k principles": (
        "big.yaml",
        ("id: big\nname: Big\nidentity: x\nprinciples:\n" + "- p\n" * 100_000).encode(),
        "holds more than 2000 items",
    ),
    "100k elixirs in json": ("big.json", json.dumps([{"id": "x"}] * 100_000).encode(), "holds more than 2000 items"),
}


@pytest.mark.parametrize("case", list(CRAFTED), ids=list(CRAFTED))
def test_crafted_file_gives_one_clear_error_and_stores_nothing(case: str, tmp_path: Path) -> None:
    name, raw, expected = CRAFTED[case]
    path = tmp_path / name
    path.write_bytes(raw)
    store = MemoryStore()
    with pytest.raises(InputError) as err:
        import_file(path, store)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)
    assert store.list_elixirs(origin=None, include_deleted=True) == []


def test_furnace_extension_null_is_a_foreign_card(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(_v2(description="A librarian.", extensions={"furnace": None})))
    ((_, elixir),) = read_file(path).elixirs
    assert elixir.name == "Quill" and "furnace" not in elixir.extensions["card"]["data"].get("extensions", {})


def test_json_depth_limit_is_exact() -> None:
    check_json_shape("ok.json", "[" * 64 + "]" * 64)
    with pytest.raises(InputError, match="nested more than 64"):
        check_json_shape("deep.json", "[" * 65 + "]" * 65)
    check_json_shape("brackets-in-strings.json", json.dumps(["[" * 500, "{" * 500]))
    check_json_shape("unbalanced.json", "[" * 10)  # left to the parser, which names the line


def test_yaml_limits_count_items_and_depth() -> None:
    check_yaml_shape("ok.yaml", "- a\n" * 2000)
    with pytest.raises(InputError, match="line 2001"):
        check_yaml_shape("big.yaml", "- a\n" * 2001)
    check_yaml_shape("map.yaml", "".join(f"k{i}: v\n" for i in range(2000)))
    with pytest.raises(InputError, match="more than 2000 items"):
        check_yaml_shape("map.yaml", "".join(f"k{i}: v\n" for i in range(2001)))
    check_yaml_shape("broken.yaml", "a: [")  # syntax errors are left to the full parse


def test_check_items_walks_nested_lists() -> None:
    check_items("ok", {"a": [[1] * 2000]})
    with pytest.raises(InputError, match="list holds more than 2000"):
        check_items("big", {"a": [{"b": [0] * 2001}]})


_FUZZ_SEEDS: dict = {}


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory: pytest.TempPathFactory):
    """The store ``make fuzz`` imports into: a runtime's, on a home of its own."""
    from furnace.runtime import Runtime
    from furnace.settings import FurnaceSettings

    return Runtime(FurnaceSettings(home=tmp_path_factory.mktemp("fuzz") / "home")).store


@settings(max_examples=250, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(KINDS), rng=st.randoms(use_true_random=False))
def test_fuzz_importers_fixed_seed(fuzz_store, kind: str, rng: random.Random) -> None:
    """A fixed-seed share of ``make fuzz`` (YAML, JSON, card JSON/PNG, CSV): bytes → elixirs or an InputError."""
    if not _FUZZ_SEEDS:
        _FUZZ_SEEDS.update(seeds_for_fuzz())
    raw = make_case(kind, rng, _FUZZ_SEEDS)
    with tempfile.TemporaryDirectory() as folder:
        problem = check_case(kind, raw, Path(folder), fuzz_store)
    assert problem is None, f"{kind} case {raw[:200]!r} raised an internal error:\n{problem}"

"""Fuzzing every file importer: any bytes give elixirs or one clear error, never an internal error.

Cases start from valid documents (an elixir as YAML and JSON, V2/V3 cards as JSON
and PNG, a slice of the CSV corpus) and are mutated two ways: *structurally*
(a random node of the parsed document replaced by a random JSON value: null,
a list, a deep nesting, a long string ...) and *bytewise* (flips, cuts,
insertions). Each case is written to a file and read by
:func:`furnace.interop.importers.read_file`, then imported into a
:class:`~furnace.storage.memory.MemoryStore`; an exception that is not a
:class:`~furnace.domain.errors.FurnaceError` is an internal error.

``python -m bench.fuzz_importers [--cases N] [--seed S]`` (``make fuzz``) reports cases
tried and internal errors and exits non-zero when there is any; the CI test
(tests/interop/test_importers_fuzz.py) runs a small fixed-seed share of the same cases.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

from bench.stack import stack
from furnace import resources
from furnace.domain.errors import FurnaceError

_DEEP = "__deep_nesting__"
KINDS = ("yaml", "json", "card-json", "card-png", "csv")
_SUFFIX = {"yaml": ".yaml", "json": ".json", "card-json": ".json", "card-png": ".png", "csv": ".csv"}
_CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus" / "awesome-chatgpt-prompts.csv"


def seeds_for_fuzz() -> dict[str, Any]:
    """Valid starting documents (parsed objects; CSV as text)."""
    from furnace.interop.cards import card_for
    from furnace.interop.importers import load_elixir_file

    elixir = load_elixir_file(resources.LIBRARY_DIR / "go-reviewer.yaml")[0]
    data = elixir.model_dump(mode="json", exclude={"content_hash", "version", "created_at", "deleted_at"})
    card3 = card_for(elixir, "v3")
    card3["data"]["character_book"] = {
        "name": "book",
        "entries": [{"keys": ["k"], "content": "lore", "enabled": True, "insertion_order": 1, "use_regex": False}],
    }
    card3["data"]["assets"] = [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}]
    csv_lines = _CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:12] if _CORPUS.exists() else []
    csv_text = "".join(csv_lines) or 'act,prompt,for_devs,type,contributor\nTutor,"Explain things.",FALSE,TEXT,x\n'
    return {"elixir": data, "card-v3": card3, "card-v2": card_for(elixir, "v2"), "csv": csv_text}


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice(
            [
                None,
                True,
                0,
                -1,
                1.5,
                1e308,
                "",
                "x",
                "{{original}}",
                "\u200b",
                "\x00",
                "a" * rng.choice([10, 200, 5000]),
                "agt-" + "0" * 12,
                "2024-01-01",
                "en",
                "zh",
            ]
        )
    if roll < 0.65:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if roll < 0.85:
        keys = ["name", "id", "spec", "data", "extensions", "furnace", "exact", "value", "seen", "entries", "x"]
        return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return f"{_DEEP}{rng.choice([5, 70, 3000])}"  # spliced in as text by _encode (too deep to serialise)


def _mutate_structure(obj: Any, rng: random.Random, edits: int) -> Any:
    obj = copy.deepcopy(obj)
    for _ in range(edits):
        holder, key = None, None
        node = obj
        for _ in range(rng.randrange(1, 7)):  # walk down to a random node
            if isinstance(node, dict) and node:
                holder, key = node, rng.choice(list(node))
            elif isinstance(node, list) and node:
                holder, key = node, rng.randrange(len(node))
            else:
                break
            node = holder[key]
        if holder is None:
            obj = _random_value(rng)
        elif rng.random() < 0.15 and isinstance(holder, dict):
            del holder[key]
        else:
            holder[key] = _random_value(rng)
    return obj


def _mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randrange(1, 6)):
        if not data:
            data += bytes([rng.randrange(256)])
        op, at = rng.random(), rng.randrange(len(data))
        if op < 0.4:
            data[at] = rng.randrange(256)
        elif op < 0.6:
            del data[at:]
        elif op < 0.8:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        else:
            data[at:at] = rng.choice([b"[" * 200, b"{", b"- ", b": ", b"&a ", b"*a", b'"', b"\xff\xfe", b"\n"])
    return bytes(data)


def _deep(text: str) -> str:
    """Replace each quoted deep-nesting marker by that many nested flow lists/mappings (JSON and YAML)."""
    while _DEEP in text:
        start = text.index(_DEEP)
        end = start + len(_DEEP)
        while text[end].isdigit():
            end += 1
        depth = int(text[start + len(_DEEP) : end])
        nest = '{"a": ' * (depth // 2) + "[" * (depth - depth // 2) + "]" * (depth - depth // 2) + "}" * (depth // 2)
        text = text[: start - 1] + nest + text[end + 1 :]  # the marker's quotes go too
    return text


def _encode(kind: str, obj: Any) -> bytes:
    from furnace.interop.png import write_png

    if kind == "yaml":
        text = yaml.safe_dump(obj, allow_unicode=True, sort_keys=False, width=10**9)
        return _deep(_yaml_deep(text)).encode("utf-8")
    text = _deep(json.dumps(obj, ensure_ascii=False))
    if kind == "card-png":
        b64 = base64.b64encode(text.encode("utf-8")).decode("ascii")
        return write_png([("ccv3" if isinstance(obj, dict) and obj.get("spec") == "chara_card_v3" else "chara", b64)])
    return text.encode("utf-8")


def _yaml_deep(text: str) -> str:
    """YAML dumps the marker unquoted; quote it so :func:`_deep` can splice the nesting in."""
    import re

    return re.sub(rf"(?<!['\"]){_DEEP}(\d+)", rf'"{_DEEP}\1"', text)


def make_case(kind: str, rng: random.Random, seeds: dict[str, Any]) -> bytes:
    """One fuzz case of ``kind`` (see :data:`KINDS`)."""
    if kind == "csv":
        lines = seeds["csv"].splitlines(keepends=True)
        rng.shuffle(lines[1:])
        text = "".join(lines)
        if rng.random() < 0.5:
            cells = ["", "TEXT", "IMAGE", "x" * 3000, '"', "{{original}}", "\u200b", "Bearer abc", "\n", ","]
            text += ",".join(rng.choice(cells) for _ in range(rng.randrange(1, 8))) + "\n"
        return _mutate_bytes(text.encode("utf-8"), rng)
    if kind in ("yaml", "json"):
        base: Any = seeds["elixir"] if rng.random() < 0.7 else [seeds["elixir"], {**seeds["elixir"], "id": "b"}]
    else:
        base = seeds[rng.choice(["card-v2", "card-v3"])]
    structural = rng.random() < 0.75
    obj = _mutate_structure(base, rng, rng.randrange(1, 4)) if structural else base
    raw = _encode(kind, obj)
    return raw if structural and rng.random() < 0.8 else _mutate_bytes(raw, rng)


def check_case(kind: str, raw: bytes, folder: Path, store: Any) -> str | None:
    """None when ``raw`` imports into ``store`` (a runtime's, as ``furnace import`` writes) or fails with a
    FurnaceError; else the internal error's traceback."""
    from furnace.interop.importers import import_elixirs, read_file

    path = folder / f"case{_SUFFIX[kind]}"
    path.write_bytes(raw)
    try:
        result = read_file(path)
        import_elixirs(result.elixirs, store, skipped=result.skipped, row_wise=result.row_wise)
    except FurnaceError:
        return None
    except Exception:
        return traceback.format_exc(limit=6)
    return None


def run_fuzz(cases: int, seed: int = 0) -> tuple[int, list[tuple[str, bytes, str]]]:
    """``(cases tried, [(kind, bytes, traceback) for each internal error])``."""
    rng = random.Random(seed)
    seeds = seeds_for_fuzz()
    failures: list[tuple[str, bytes, str]] = []
    with tempfile.TemporaryDirectory(prefix="furnace-fuzz-") as tmp, stack() as built:
        for i in range(cases):
            kind = KINDS[i % len(KINDS)]
            raw = make_case(kind, rng, seeds)
            problem = check_case(kind, raw, Path(tmp), built.runtime.store)
            if problem is not None:
                failures.append((kind, raw, problem))
    return cases, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz_importers")
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    tried, failures = run_fuzz(args.cases, args.seed)
    print(f"fuzz importers: {tried} cases ({', '.join(KINDS)}), seed {args.seed}, {len(failures)} internal errors")
    print(f"   ({time.perf_counter() - started:.1f}s)")
    for kind, raw, problem in failures[:5]:
        print(f"-- {kind}: {raw[:120]!r}\n{problem}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Broken, oversized and wrong cards: one clear InputError, nothing stored."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest
from cards_data import V2_CARD, V3_CARD, card

from furnace.domain.errors import InputError
from furnace.interop import card_format
from furnace.interop.card_format import encode_chunk
from furnace.interop.cards import export_card_png, import_card_file, is_card_file, read_card_bytes, read_card_file
from furnace.interop.importers import import_file
from furnace.interop.png import write_png
from furnace.storage.memory import MemoryStore


def _png(keyword: str, text: str) -> bytes:
    return write_png([(keyword, text)])


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _without(field: str) -> dict:
    c = card(V2_CARD)
    del c["data"][field]
    return c


BROKEN: dict[str, tuple[bytes, str]] = {
    "not json": (b'{"spec": "chara_card_v2", "data": {', "not valid JSON"),
    "json array": (b"[1, 2]", "expected a JSON object"),
    "NaN": (b'{"spec": "chara_card_v2", "data": {"name": "x", "n": NaN}}', "not valid JSON"),
    "lone surrogate": (b'{"spec": "chara_card_v2", "data": {"name": "x\\ud800"}}', "invalid Unicode"),
    "too deep": (
        b'{"spec": "chara_card_v2", "data": {"name": "x", "extensions": {"a": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}}}",
        "nested too deeply",
    ),
    "deep": (
        b'{"spec": "chara_card_v2", "data": {"name": "x", "extensions": {"a": ' + b"[" * 900 + b"]" * 900 + b"}}}",
        "nested too deeply",
    ),
    "wrong spec": (_json({**card(V2_CARD), "spec": "chara_card_v9"}), "unsupported spec 'chara_card_v9'"),
    "lorebook not card": (_json({"spec": "lorebook_v3", "data": {"entries": []}}), "unsupported spec 'lorebook_v3'"),
    "v1 card": (_json({"name": "Old", "description": "x", "personality": ""}), "Character Card V1"),
    "missing name": (_json(_without("name")), "data.name is missing"),
    "blank name": (_json({"spec": "chara_card_v3", "data": {"name": "   "}}), "data.name is missing"),
    "data not object": (_json({"spec": "chara_card_v3", "data": "Quill"}), "'data' must be an object"),
    "tags not list": (
        _json({"spec": "chara_card_v2", "data": {"name": "x", "tags": "a,b"}}),
        "data.tags must be a list",
    ),
    "description not string": (
        _json({"spec": "chara_card_v2", "data": {"name": "x", "description": 3}}),
        "data.description must be a string",
    ),
    "bad lorebook": (
        _json({"spec": "chara_card_v3", "data": {"name": "x", "character_book": {"entries": "no"}}}),
        "character_book.entries must be a list",
    ),
    "bad furnace extension": (
        _json({"spec": "chara_card_v3", "data": {"name": "x", "extensions": {"furnace": 1}}}),
        "extensions.furnace must be an object",
    ),
    "bad furnace tone": (
        _json({"spec": "chara_card_v3", "data": {"name": "x", "extensions": {"furnace": {"tone": {"humor": 7}}}}}),
        "tone.humor must be between 0 and 1",
    ),
    "png bad base64": (_png("chara", "%%%not base64%%%"), "not valid base64"),
    "png base64 of junk": (_png("ccv3", base64.b64encode(b"\xff\xfe junk").decode()), "not UTF-8 text"),
    "png wrong spec": (_png("ccv3", encode_chunk({"spec": "nope", "data": {"name": "x"}})), "unsupported spec"),
    "png without card": (_png("Comment", "just a picture"), "no 'ccv3' or 'chara'"),
}


def _truncated() -> bytes:
    good = _png("chara", encode_chunk(card(V2_CARD)))
    return good[: len(good) // 2]


def _bad_crc() -> bytes:
    good = bytearray(_png("chara", encode_chunk(card(V2_CARD))))
    idx = good.index(b"tEXt") + 10
    good[idx] ^= 0x01
    return bytes(good)


BROKEN["png truncated"] = (_truncated(), "truncated")
BROKEN["png bad crc"] = (_bad_crc(), "bad CRC")
BROKEN["not png signature but .png"] = (b"GIF89a\x01\x00", "not valid JSON")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_cards_raise_one_clear_input_error(case: str) -> None:
    raw, message = BROKEN[case]
    with pytest.raises(InputError) as err:
        read_card_bytes(raw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["wrong spec", "missing name", "png bad base64", "png truncated", "png without card"])
def test_broken_card_files_store_nothing(case: str, tmp_path: Path) -> None:
    raw, _ = BROKEN[case]
    path = tmp_path / ("card.png" if case.startswith("png") else "card.json")
    path.write_bytes(raw)
    store = MemoryStore()
    with pytest.raises(InputError):
        import_file(path, store)
    assert store.list_elixirs(include_deleted=True) == []


def test_oversized_card_json_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(card_format, "MAX_CARD_JSON_BYTES", 5_000)
    big = card(V3_CARD)
    big["data"]["character_book"]["entries"][0]["content"] = "lore " * 2_000
    with pytest.raises(InputError, match="too large"):
        read_card_bytes(_json(big))
    with pytest.raises(InputError, match="too large"):
        read_card_bytes(_png("ccv3", encode_chunk(big)))


def test_oversized_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from furnace.interop import cards

    monkeypatch.setattr(cards, "MAX_CARD_FILE_BYTES", 1_000)
    monkeypatch.setattr(card_format, "MAX_CARD_FILE_BYTES", 1_000)
    path = tmp_path / "big.png"
    path.write_bytes(_png("chara", encode_chunk(card(V2_CARD))))
    with pytest.raises(InputError, match="too large"):
        import_card_file(path)
    with pytest.raises(InputError, match="too large"):
        read_card_bytes(path.read_bytes())


def test_long_foreign_fields_are_clipped_not_refused() -> None:
    c = card(V2_CARD)
    c["data"]["name"] = "N" * 300
    c["data"]["description"] = ("A very long sentence about the character. " * 40).strip()
    c["data"]["tags"] = [f"tag {i}" for i in range(100)]
    elixir = read_card_bytes(_json(c)).elixir
    assert len(elixir.name) == 120 and len(elixir.identity) <= 600 and len(elixir.expertise) == 40
    assert elixir.identity.endswith(".")


def test_newer_spec_version_imports_with_a_warning() -> None:
    c = card(V3_CARD)
    c["spec_version"] = "3.4"
    got = read_card_bytes(_json(c))
    assert got.elixir.name == "Archivist Quill"
    assert got.warnings and "newer than 3.0" in got.warnings[0]


def test_is_card_file(tmp_path: Path) -> None:
    (tmp_path / "card.json").write_text(json.dumps(V3_CARD))
    (tmp_path / "elixir.json").write_text(
        json.dumps({"name": "x", "identity": "y", "expertise": ["a"], "principles": ["b"]})
    )
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "pic.png").write_bytes(_png("Comment", "x"))
    (tmp_path / "notes.txt").write_text(json.dumps(V3_CARD))
    assert is_card_file(tmp_path / "card.json")
    assert is_card_file(tmp_path / "pic.png")
    assert not is_card_file(tmp_path / "elixir.json")
    assert not is_card_file(tmp_path / "broken.json")
    assert not is_card_file(tmp_path / "notes.txt")
    assert not is_card_file(tmp_path / "missing.json")


def test_importer_dispatches_cards_and_still_reads_elixir_json(tmp_path: Path, native) -> None:
    store = MemoryStore()
    (tmp_path / "quill.json").write_text(json.dumps(V3_CARD))
    (tmp_path / "editor.png").write_bytes(export_card_png(native))
    (tmp_path / "plain.json").write_text(
        json.dumps({"name": "Plain", "identity": "y", "expertise": ["a"], "principles": ["b"]})
    )
    assert [r.id for r in import_file(tmp_path / "quill.json", store).created] == ["archivist-quill"]
    created = import_file(tmp_path / "editor.png", store).created
    assert [(r.id, r.content_hash) for r in created] == [("night-editor", native.content_hash)]
    assert [r.id for r in import_file(tmp_path / "plain.json", store).created] == ["plain"]
    assert import_file(tmp_path / "quill.json", store).unchanged  # same card twice: nothing new
    stored = store.get_elixir("archivist-quill")
    assert stored.extensions["card"]["data"]["character_book"]["name"] == "Endless Library"


def test_written_png_is_a_valid_image() -> None:
    png = write_png([("chara", "abc")], size=8, rgb=(1, 2, 3))
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (8, 8)
    idat_start = png.index(b"IDAT") + 4
    length = struct.unpack(">I", png[idat_start - 8 : idat_start - 4])[0]
    raw = zlib.decompress(png[idat_start : idat_start + length])
    assert raw == (b"\x00" + bytes((1, 2, 3)) * 8) * 8
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - pillow ships with matplotlib
        return
    import io

    image = Image.open(io.BytesIO(png))
    image.load()
    assert image.size == (8, 8) and image.getpixel((0, 0))[:3] == (1, 2, 3)
    assert image.info.get("chara") == "abc"


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mirela.json"
    path.write_text(json.dumps(_without("name")))
    with pytest.raises(InputError, match=r"^mirela\.json: invalid character card: data\.name is missing"):
        read_card_file(path)
    with pytest.raises(InputError, match="cannot read"):
        read_card_file(tmp_path / "absent.png")

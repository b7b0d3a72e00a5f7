"""A small PNG chunk reader and a minimal PNG writer (stdlib only).

Character cards travel inside PNG ``tEXt`` chunks (``chara`` for V2,
``ccv3`` for V3). Reading validates the signature, every chunk's bounds and
CRC, so a truncated or corrupted file gives a clear :class:`InputError`
instead of a half-read card. Writing produces a small solid-colour RGB image
carrying the text chunks, byte-identical for the same inputs.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

from furnace.domain.errors import InputError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CHUNKS = 10_000


def is_png(data: bytes) -> bool:
    """True when ``data`` starts with the PNG signature."""
    return data[:8] == PNG_SIGNATURE


def iter_chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Yield ``(type, payload)`` for each chunk up to ``IEND``, checking bounds and CRCs."""
    if not is_png(data):
        raise InputError("not a PNG file (bad signature)", field="png")
    pos, count = len(PNG_SIGNATURE), 0
    while True:
        if pos + 8 > len(data):
            raise InputError("PNG is truncated (no IEND chunk)", field="png")
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        end = pos + 8 + length + 4
        if length > 0x7FFFFFFF or end > len(data):
            raise InputError(
                f"PNG chunk {kind.decode('latin-1')!r} runs past the end of the file (truncated?)", field="png"
            )
        payload = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(kind + payload) & 0xFFFFFFFF != crc:
            raise InputError(f"PNG chunk {kind.decode('latin-1')!r} has a bad CRC (corrupted file)", field="png")
        count += 1
        if count > MAX_CHUNKS:
            raise InputError(f"PNG has more than {MAX_CHUNKS} chunks", field="png")
        yield kind, payload
        if kind == b"IEND":
            return
        pos = end


def text_chunks(data: bytes) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG as ``{keyword (lower-case): text}``; the first of a keyword wins."""
    found: dict[str, str] = {}
    for kind, payload in iter_chunks(data):
        if kind != b"tEXt":
            continue
        keyword, sep, text = payload.partition(b"\x00")
        if not sep:
            raise InputError("PNG tEXt chunk has no keyword separator (corrupted file)", field="png")
        found.setdefault(keyword.decode("latin-1").lower(), text.decode("latin-1"))
    return found


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def write_png(texts: Iterable[tuple[str, str]], *, size: int = 64, rgb: tuple[int, int, int] = (200, 90, 40)) -> bytes:
    """A ``size``×``size`` solid-colour RGB PNG carrying ``texts`` as ``tEXt`` chunks (in order).

    Text must be Latin-1 (base64 card payloads are ASCII).
    """
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    row = b"\x00" + bytes(rgb) * size  # filter type 0 + pixels
    idat = zlib.compress(row * size, 9)
    parts = [PNG_SIGNATURE, _chunk(b"IHDR", header)]
    for keyword, text in texts:
        parts.append(_chunk(b"tEXt", keyword.encode("latin-1") + b"\x00" + text.encode("latin-1")))
    parts += [_chunk(b"IDAT", idat), _chunk(b"IEND", b"")]
    return b"".join(parts)

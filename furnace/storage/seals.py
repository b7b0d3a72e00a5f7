"""The keyed record seal: an HMAC-SHA-256 whose key lives outside the database (docs/reliability.md).

Everything a reader trusts from the store (SQLite, PostgreSQL, or ``furnace.duckdb``: elixir versions,
agents, cached responses, experiment rows, the sealed ledger totals of a finished experiment) and from
its Parquet snapshots carries ``mac(kind, *parts)``, checked on every read. Someone who can write the
database but cannot read the key cannot make a seal that verifies; furnace's own code run with the key can.

The key is, in order: ``FURNACE_SEAL_KEY`` (``settings.seal_key``: one key for a store shared by
several users or machines), else the file ``seal.key`` next to the database (in ``FURNACE_HOME``),
created on first use with owner-only permissions (0600). Creation is atomic (written to a private
temporary file, then hard-linked into place, which fails if the file exists), so two processes
starting at once agree on one key. The key never reaches the store, a log, an exception or an export:
:class:`Sealer` keeps it private and its ``repr`` shows only the key's source.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from contextlib import suppress
from dataclasses import asdict
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from furnace.domain.errors import InputError, SealError, StoreError

if TYPE_CHECKING:
    from furnace.evolution.records import ExperimentRecord, GenerationRecord, IndividualRecord

KEY_FILE = "seal.key"
PREFIX = "k1:"  # a keyed seal; anything else (None, an old unkeyed seal) does not verify
MIN_KEY_CHARS = 32


class Sealer:
    """Makes and checks keyed seals with one key (never shown)."""

    __slots__ = ("_key", "new_key", "source")

    def __init__(self, key: bytes, *, source: str, new_key: bool = False) -> None:
        self._key = key
        self.source = source  # "FURNACE_SEAL_KEY" or the key file's path: where the key came from, not the key
        self.new_key = new_key  # the key file was created by this open (the home had no key before)

    def __repr__(self) -> str:
        return f"Sealer(source={self.source!r})"

    def mac(self, kind: str, *parts: Any) -> str:
        """The seal of one record: HMAC-SHA-256 over ``kind`` and ``parts`` as canonical JSON."""
        message = json.dumps([kind, *parts], ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
        return PREFIX + hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()


def sealed(stored: Any, expected: str) -> bool:
    """True when ``stored`` is the seal ``expected`` (compared in constant time)."""
    return isinstance(stored, str) and hmac.compare_digest(stored, expected)


def check(stored: Any, expected: str, what: str) -> None:
    """Raise :class:`SealError` naming the record ``what`` unless ``stored`` is the seal ``expected``."""
    if not sealed(stored, expected):
        reason = "has no keyed seal" if not stored else "does not match its keyed seal"
        raise SealError(f"{what} {reason}: the record was altered outside furnace (docs/reliability.md)")


def sealer_for(folder: Path, key: str | None = None) -> Sealer:
    """The sealer of the store in ``folder``: ``key`` (``FURNACE_SEAL_KEY``) when given, else the key file
    ``folder/seal.key``, created on first use."""
    if key is not None:
        if len(key) < MIN_KEY_CHARS:
            raise InputError(
                f"FURNACE_SEAL_KEY must be at least {MIN_KEY_CHARS} characters (e.g. the output of"
                " `python -c 'import secrets; print(secrets.token_hex(32))'`)",
                field="seal_key",
            )
        return Sealer(key.encode(), source="FURNACE_SEAL_KEY")
    path = folder / KEY_FILE
    secret, created = _read_or_create(path)
    return Sealer(secret, source=str(path), new_key=created)


def _read_or_create(path: Path) -> tuple[bytes, bool]:
    """The key in ``path`` and whether this call created it (a new random key written there first)."""
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}-{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_hex(32) + "\n")
            with suppress(FileExistsError):  # another process linked its key first: that one is the key
                os.link(tmp, path)  # atomic and never overwrites: of two racing processes, one key wins
                created = True
        finally:
            tmp.unlink(missing_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise StoreError(
            f"{path} is readable by other users (mode {mode:o}): anyone who can read it can forge records;"
            f" run `chmod 600 {path}`"
        )
    key = path.read_text(encoding="ascii").strip()
    if len(key) < MIN_KEY_CHARS:
        raise StoreError(f"{path} does not hold a seal key (too short): restore it from a backup")
    return key.encode(), created


# --- the seal of each kind of record (every store adapter writes and checks these) --------------------


def elixir_seal(sealer: Sealer, id: str, version: int, content_hash: str) -> str:
    """The keyed seal of one elixir version: its content hash under the key (the body is checked against
    the hash on every read of one elixir)."""
    return sealer.mac("elixir", id, version, content_hash)


def agent_mac(sealer: Sealer, id: str, elixir_version: int, record_hash: str) -> str:
    """The keyed seal of an agent's record hash (stored as ``mac`` inside its ``seal`` JSON)."""
    return sealer.mac("agent", id, elixir_version, record_hash)


def response_seal(sealer: Sealer, key: str, completion_json: str) -> str:
    """The keyed seal of one cached response: its content key and the completion as stored."""
    return sealer.mac("response", key, completion_json)


def experiment_seal(sealer: Sealer, r: ExperimentRecord) -> str:
    """The keyed seal of an experiment's identity and config."""
    return sealer.mac("experiment", r.experiment_id, r.name, r.config, int(r.seed), r.model)


def summary_seal(sealer: Sealer, experiment_id: str, summary: dict[str, Any]) -> str:
    """The keyed seal of a finished experiment's summary (best agent, fitness, the ledger totals)."""
    return sealer.mac("experiment summary", experiment_id, summary)


def individual_seal(sealer: Sealer, r: IndividualRecord) -> str:
    """The keyed seal of one individual: every recorded field, its scores (in key order) included."""
    # the fields as they are (json.dumps writes a tuple as a list, like asdict's copy of it); the scores
    # replaced below, so never copied
    fields = {f.name: getattr(r, f.name) for f in dataclass_fields(r)}
    if not fields["plan"]:  # a record written before the plan key was kept: its seal as it was made
        del fields["plan"]
    fields.update(fitness=float(r.fitness), cost_usd=float(r.cost_usd))
    fields.update({k: int(fields[k]) for k in ("generation", "slot", "failures", "calls", "tokens")})
    fields["scores"] = sorted(
        ([s.probe, s.scorer, float(s.value), s.reason, bool(s.failed), s.feedback or ""] for s in r.scores),
        key=lambda s: (s[0], s[1]),
    )
    return sealer.mac("individual", fields)


def generation_seal(sealer: Sealer, r: GenerationRecord) -> str:
    """The keyed seal of one finished generation's survivors and figures."""
    fields = asdict(r)  # the DOUBLE and INTEGER columns as they read back
    fields.update({k: float(fields[k]) for k in ("best_fitness", "mean_fitness", "cost_usd")})
    fields.update({k: int(fields[k]) for k in ("generation", "calls", "cached_calls", "tokens")})
    return sealer.mac("generation", fields)

"""The furnace error tree.

::

    FurnaceError                      base of everything furnace raises on purpose
    ├── InputError                    bad input from a user or a file (field + reason)
    │   └── NotFound                  an id/version that does not exist
    ├── ConflictError                 a hard persona conflict refused a fusion
    ├── LineageError                  tampered lineage, or a withdrawn parent
    │   └── SealError                 a stored record's keyed seal does not verify (altered outside furnace)
    ├── LLMError                      a model call failed after retries
    │   ├── LLMRateLimit
    │   ├── LLMTimeout
    │   └── LLMMalformedOutput        output did not parse or match the schema
    ├── StoreError                    the store could not do what was asked
    │   └── StaleVersion              a compare-and-set save met a newer version
    └── BudgetExceeded                an experiment hit its budget

Messages are written for the person at the terminal: one line, naming the
field or record concerned, and never containing a secret.
"""

from __future__ import annotations

import os
from typing import Any

PATH_SHOWN = 80  # a longer path is shown shortened (its start and end, and its length)


def short_path(path: str | os.PathLike[str] | bytes) -> str:
    """``path`` as shown in a message: in full up to :data:`PATH_SHOWN` characters, else its start,
    its end and how long it is (a 5,000-character name must not flood the terminal)."""
    text = os.fsdecode(path)
    if len(text) <= PATH_SHOWN:
        return text
    return f"{text[:40]}…{text[-24:]} ({len(text):,} characters)"


class FurnaceError(Exception):
    """Base class of every error furnace raises deliberately."""


class InputError(FurnaceError, ValueError):
    """Invalid input. ``field`` names the offending field (dotted path) when known."""

    def __init__(
        self, message: str, *, field: str | None = None, problems: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.field = field
        # every (field, message) pair when several fields are wrong at once
        self.problems: list[tuple[str, str]] = problems or ([(field, message)] if field else [])

    @classmethod
    def from_os_error(cls, err: OSError, *, what: str = "") -> InputError:
        """The user's side of an operating-system error on input: one line, the path shortened
        ("cannot read <what> /very/long…name (5,000 characters): File name too long")."""
        reason = err.strerror or err.__class__.__name__
        where = " ".join(part for part in (what, short_path(err.filename) if err.filename is not None else "") if part)
        if err.filename2 is not None:
            where += f" -> {short_path(err.filename2)}"
        return cls(f"{where}: {reason}" if where else reason)


class NotFound(InputError):
    """A referenced record does not exist."""


class ConflictError(FurnaceError):
    """Two elixirs may never be fused (a hard ``conflicts_with`` conflict)."""


class LineageError(FurnaceError):
    """A lineage record does not verify, or depends on a withdrawn elixir."""


class SealError(LineageError):
    """A stored record's keyed seal is missing or does not verify: it was written outside furnace
    (docs/reliability.md). The message names the record, never the key."""


class LLMError(FurnaceError):
    """A model call failed. Carries no key, header or request body.

    What a caller may read besides the message (set by the model client and the structured-output
    reader; the defaults mean "not known"): ``excerpt`` a short scrubbed excerpt of a reply that did not
    validate, ``retry_after`` the server's Retry-After in seconds, ``attempts`` the attempts made and
    ``spent`` what they cost, as ``(Usage, cost_usd)`` (``Usage`` is the LLM seam's; the domain names no
    other package).
    """

    transient: bool = False
    excerpt: str = ""
    retry_after: float | None = None
    attempts: int | None = None
    spent: tuple[Any, float] | None = None


class LLMRateLimit(LLMError):
    transient = True


class LLMTimeout(LLMError):
    transient = True


class LLMMalformedOutput(LLMError):
    transient = True


class StoreError(FurnaceError):
    """The store failed (lock held too long, corrupt row, migration problem)."""


class StaleVersion(StoreError):
    """A save conditioned on the latest version (``if_latest``) found another one: someone saved
    (or deleted) meanwhile, and nothing was written."""


class BudgetExceeded(FurnaceError):
    """An experiment or run would exceed its budget."""

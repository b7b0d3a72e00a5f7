"""What this process last knew of a piece, so that its next revision round need not wait for reads.

After a revision round the process knows the piece's state exactly: the version it just
committed and the persona it just saved (or used). The next round starts its edit call
from that state at once and, while the model writes, reads the store as before; the
answer is used only when the request built from those fresh reads is the very request
that was sent (same persona content and version, same piece version, same pending
suggestions). When anything changed meanwhile — another window, another process, an
edit of the persona — the answer is dropped (the call is still in the ledger: it was
spent) and the edit is asked again from the fresh state. So a stale entry costs one
model call and never a wrong edit.

Entries are per content store object and per piece, bounded, and dropped after any
round that did not end in a clean revision.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from furnace.domain.elixir import Elixir
from furnace.writing.content import ChatSession, Content, ContentVersion

MAX_PIECES = 256  # pieces remembered per content store (the least recently revised go first)


@dataclass(frozen=True)
class Known:
    """A piece's state right after this process's last round on it."""

    content: Content
    session: ChatSession
    current: ContentVersion  # the latest version (the one the round committed)
    persona: Elixir  # the persona's content as saved (its ``version`` field may lag: see ``persona_version``)
    persona_version: int  # the persona's latest stored version


class Recent:
    """The last known state of recently revised pieces, per content store (weakly held)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: weakref.WeakKeyDictionary[Any, OrderedDict[str, Known]] = weakref.WeakKeyDictionary()

    def get(self, content_store: Any, content_id: str) -> Known | None:
        with self._lock:
            pieces = self._stores.get(content_store)
            return pieces.get(content_id) if pieces is not None else None

    def put(self, content_store: Any, known: Known) -> None:
        with self._lock:
            try:
                pieces = self._stores.setdefault(content_store, OrderedDict())
            except TypeError:  # a store that cannot be weakly referenced: nothing is remembered
                return
            pieces[known.content.id] = known
            pieces.move_to_end(known.content.id)
            while len(pieces) > MAX_PIECES:
                pieces.popitem(last=False)

    def forget(self, content_store: Any, content_id: str) -> None:
        with self._lock:
            pieces = self._stores.get(content_store)
            if pieces is not None:
                pieces.pop(content_id, None)


RECENT = Recent()

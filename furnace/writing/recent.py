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

Entries are kept per content store object (:mod:`furnace.storage.recent`) and dropped
after any round that did not end in a clean revision, and by anything else this process
does to the piece's chat (a noted suggestion, a rollback).
"""

from __future__ import annotations

from dataclasses import dataclass

from furnace.domain.elixir import Elixir
from furnace.storage.recent import Recent
from furnace.writing.content import ChatSession, Content, ContentVersion


@dataclass(frozen=True)
class Known:
    """A piece's state right after this process's last round on it."""

    content: Content
    session: ChatSession
    current: ContentVersion  # the latest version (the one the round committed)
    persona: Elixir  # the persona's content as saved (its ``version`` field may lag: see ``persona_version``)
    persona_version: int  # the persona's latest stored version


RECENT: Recent[Known] = Recent()  # by content id, per content store

"""A one-line progress bar for an experiment run, on stderr (shared by the CLI and the Prefect flow)."""

from __future__ import annotations

import sys
import time
from typing import Any


class ProgressBar:
    """A one-line progress bar on stderr (silent when stderr is not wanted)."""

    def __init__(
        self, enabled: bool = True, width: int = 24, *, interactive: bool | None = None, notices: bool | None = None
    ) -> None:
        self.enabled, self.width = enabled, width
        # notices (e.g. pairs waiting for people's picks) on stderr; by default when the bar is shown
        self.notices = enabled if notices is None else notices
        # On a terminal the bar redraws in place; in a log (CI, a file) one line per generation.
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self._last = ""
        self._started = time.perf_counter()

    def __call__(self, p: Any) -> None:
        notice = str(getattr(p, "message", "") or "")  # e.g. pairs waiting for people: a line of its own
        if notice:
            if self.notices:
                sys.stderr.write(("\n" if self.interactive and self._last else "") + notice + "\n")
                sys.stderr.flush()
                self._last = ""
            return
        if not self.enabled or (not self.interactive and p.done != p.total):
            return
        filled = int(self.width * p.done / p.total) if p.total else self.width
        line = (
            f"{chr(13) if self.interactive else ''}generation {p.generation}/{p.generations} "
            f"[{'#' * filled}{'.' * (self.width - filled)}] "
            f"{p.done}/{p.total}  best {p.best:.3f}  {time.perf_counter() - self._started:5.1f}s"
        )
        if line != self._last:
            self._last = line
            sys.stderr.write(line + ("\n" if p.done == p.total else ""))
            sys.stderr.flush()

"""The one progress display of a command's run, on stderr when it is a terminal: the phase the run
is in, named (`listing files`, `parsing`, `resolving agents`, `planning rewrites`, `rewriting`,
...), with the files it counts. It appears at the first report once the run has lasted about a
second (a quick run shows nothing), and stays one display to the end: a phase's batches add up on
it rather than starting it again.

It is drawn by the run's own thread, as the run reports, never from a thread of its own: the
worker processes are forked only where no other thread runs (a fork copies the calling thread
alone, and a lock another thread held, as a drawing thread holds the terminal's, stays held in
the copy), so a display drawing from a timer or from rich's refresh thread would keep every run on
a terminal in one process."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..ftypes import Progress
from ..report.escape import neutralise

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress

_APPEARS_AFTER = 1.0  # seconds
_REDRAWN_AFTER = 0.1  # seconds between two frames while files are counted


class Display(Progress):
    """The run's display; `since`: when the user started waiting (`time.perf_counter()`). It is
    drawn by rich at the run's reports, and hidden (`pause`) while the run prints lines of its own."""

    def __init__(self, enabled: bool, since: float | None = None):
        self.enabled = enabled
        self.started = time.perf_counter() if since is None else since
        self.name = ""
        self.counted = (0, 0)  # done and total over the phase's batches so far
        self.path = ""
        self._before = 0  # files counted by the phase's batches before this one
        self._last = (0, 0)  # the current batch's done and total
        self._bar: RichProgress | None = None
        self._task = None
        self._closed = False
        self._drawn = 0.0  # when the last frame was drawn

    def phase(self, name: str) -> None:
        if not self.enabled:
            return
        self.name, self.path = name, ""
        self.counted, self._before, self._last = (0, 0), 0, (0, 0)
        self._draw(at_once=True)  # each phase is seen, however short

    def __call__(self, path: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if done < self._last[0] or (done == self._last[0] and total != self._last[1]):
            self._before += self._last[0]  # a new batch: its count starts again from 0 or 1
        self._last = (done, total)
        self.counted = (self._before + done, self._before + total)
        self.path = path
        self._draw(at_once=done == total)  # a batch's last file is seen, however busy the machine

    def pause(self) -> None:
        """Hide the display while the run prints (it comes back with the next phase or file)."""
        self._hide()

    def close(self) -> None:
        self._closed = True
        self._hide()

    def _draw(self, at_once: bool = False) -> None:
        now = time.perf_counter()
        if self._closed or now - self.started < _APPEARS_AFTER:
            return
        if not at_once and self._bar is not None and now - self._drawn < _REDRAWN_AFTER:
            return
        self._drawn = now
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn

            # The run's own output is not redirected into the display: what goes to stdout stays there.
            self._bar = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn("{task.fields[count]}", markup=False),
                TextColumn("{task.fields[path]}", markup=False),  # a file's name is no markup
                console=Console(stderr=True),
                auto_refresh=False,  # no thread of its own (see the module's docstring)
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task("", total=None, count="", path="")
        done, total = self.counted
        self._bar.update(
            self._task,
            description=self.name,
            completed=done,
            total=total or None,  # a phase that counts nothing: a bar without an end
            count=f"{done}/{total}" if total else "",
            path=neutralise(self.path),  # nor does it reach the terminal as control sequences
        )
        if not self._bar.live.is_started:
            self._bar.start()  # drawn with what it shows from the first frame
        else:
            self._bar.refresh()

    def _hide(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

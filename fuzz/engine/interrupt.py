"""Graceful stop on Ctrl-C (SIGINT) and SIGTERM: the campaign ends where it
is, prints what it found so far, reaps its workers and exits 130 / 143.

A signal handler raises ``Interrupted`` (a ``BaseException``, so neither
Hypothesis nor an ``except Exception`` takes it for a failing example), which
unwinds the campaign to its one handler. Waits in the worker pool are
interrupted at once, since the handler raises rather than returns. Writes to
the corpus run inside ``deferred()``: a signal arriving there is held until
the write is complete, so no entry is ever half-written by a stop.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any, Iterator

__all__ = ["Interrupted", "stop_signals", "deferred", "EXIT_STATUS"]

# Shell convention: 128 + signal number.
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(BaseException):
    """The user (SIGINT) or a supervisor (SIGTERM) asked the campaign to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The exit status a shell expects after this signal (128 + its number)."""
        return EXIT_STATUS.get(signal.Signals(self.signum), 128 + self.signum)


_state: dict[str, Any] = {"depth": 0, "pending": None}


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["depth"]:
        _state["pending"] = signum  # inside a corpus write: stop right after it
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Turn SIGINT / SIGTERM into ``Interrupted`` for the duration (main thread
    only; elsewhere a no-op), restoring the previous handlers after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _handler) for sig in EXIT_STATUS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop signal until the block is done (a corpus write), then act on it."""
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if not _state["depth"] and _state["pending"] is not None:
            signum, _state["pending"] = _state["pending"], None
            raise Interrupted(signum)

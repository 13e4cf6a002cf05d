"""The finish phase and the bound it keeps: the bug work (shrinking, bug
reports) may run into the time after the budget, ``finish_s`` at most, less
what the reports not yet written will need; after the budget, what is left of
it is done within that bound, and the reports still in flight are waited for
a short while at least (the last samples, checked after the budget, may have
filed new buckets)."""

from __future__ import annotations

import time

from fuzz.engine.bugwork import BugWork

__all__ = ["FinishPhase"]

# The finish phase waits at least this long for the reports in flight.
_LAST_WAIT_S = 10.0


class FinishPhase:
    """When the bug work must be over, and the bug work left after the budget."""

    def __init__(self, bugs: BugWork, finish_s: float) -> None:
        self.bugs, self.finish_s = bugs, finish_s

    def bound(self, deadline: float) -> None:
        """The budget ends at ``deadline``: the bug work ends ``finish_s`` after it."""
        self.bugs.finish_by = deadline + self.finish_s

    def run(self) -> None:
        """Finish the bug work left (the bound counts from the end of the
        budget: the last samples in flight, checked after it, use it too)."""
        self.bugs.finish(max(self.bugs.finish_by, time.monotonic() + _LAST_WAIT_S))

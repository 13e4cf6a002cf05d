"""The replay phase: every case the corpus holds is re-run on the toolchain
installed now (``Session.replay_one``: still failing in its bucket, fixed,
or moved to another), one row each in the report. A case still failing that
is not yet a bug report (its shrinking cut short or never run, its repro not
reproducing) gets another turn at the bug work. A shrink that ended is not
run again: at a fixpoint, as one op (the op is the case), or ``moved`` (its
smaller case replays in another bucket, so shrinking it again would reach
the same smaller case and keep it out again)."""

from __future__ import annotations

from fuzz.engine.bugwork import BugWork
from fuzz.engine.ledger import Ledger
from fuzz.engine.records import Observed
from fuzz.engine.session import Session

__all__ = ["ReplayPhase", "SHRINK_ENDED"]

# How a stored shrink record's ``stopped`` says that shrinking is done with
# the case (``budget`` and the rest mean it was cut short).
SHRINK_ENDED = frozenset({"fixpoint", "single-op", "moved"})


class ReplayPhase:
    """Replay the stored cases and queue the unfinished ones for the bug work."""

    def __init__(self, session: Session, ledger: Ledger, bugs: BugWork) -> None:
        self.session, self.ledger, self.bugs = session, ledger, bugs

    def run(self) -> None:
        """Every stored case once, in the corpus' order."""
        for entry in self.ledger.stored:
            record = self.session.replay_one(entry)
            self.session.report.replays.append(record)
            if record.status is not Observed.STILL_FAILING:
                continue
            if (entry.shrink or {}).get("stopped") not in SHRINK_ENDED:
                self.bugs.unshrunk.append(entry.bucket)
            if entry.repro_status != "reproduces":
                self.bugs.needs_report.add(entry.bucket)
                if entry.bucket not in self.bugs.unshrunk:
                    self.bugs.ready_for_report(entry.bucket)

"""The generate phase: new samples until the budget is spent, each sent where
the scheduler's plan says (every target without one), with no barrier: the
next sample's jobs are queued while this one's slowest targets still run,
and a sample whose answers are all in is filed in the order the samples were
made (``fuzz.engine.filing``). The bug work runs between samples. When the
budget ends, the jobs no worker has started are dropped, what is still
running is waited for during a quarter of the finish phase, and the samples
are then judged on the targets that answered.

Hypothesis drives generation (seeded, so a campaign is reproducible from its
``--seed``); the budget ends that loop through an exception Hypothesis does
not take for a failing example."""

from __future__ import annotations

import time
from typing import Callable, Protocol

from fuzz.engine.bugwork import BugWork
from fuzz.engine.dispatch import InFlight
from fuzz.engine.filing import Filing, Submit
from fuzz.engine.records import CampaignReport
from fuzz.engine.roadshare import RoadShare
from fuzz.engine.schedule import Planned, Scheduler
from fuzz.engine.session import Session, headline
from fuzz.model.focus import Focus
from fuzz.model.sample import Sample
from fuzz.workers.interface import HarnessError
from strategies.draw import ROUND

__all__ = ["GeneratePhase", "Stream"]

# The share of the finish phase (``finish_s``) the jobs running when the
# budget ends may take before their samples are judged without them: seed
# 73's campaign waited 98 s after its budget for them and for their filing.
_RUNNING_GRACE = 0.25

class Stream(Protocol):
    """Where samples come from: ``strategies.draw.each_sample``, or a fixed list in a test."""

    def __call__(self, seed: int, body: Callable[[Sample], None], *, round_size: int = ROUND,
                 focus: Focus | None = None) -> None: ...


class _BudgetSpent(BaseException):
    """Ends Hypothesis' loop without being taken for a failing example."""


class GeneratePhase:
    """Generated samples into the pool, and their answers into the filing."""

    def __init__(self, session: Session, filing: Filing, bugs: BugWork,
                 scheduler: Scheduler | None, *, submit: Submit,
                 on_progress: Callable[[CampaignReport], None] | None = None) -> None:
        self.session, self.filing, self.bugs, self.scheduler = session, filing, bugs, scheduler
        self.report = session.report
        self.submit = submit
        self.on_progress = on_progress
        # The road targets' share of the targets' time (``fuzz.engine.roadshare``).
        self.roads = RoadShare(self.report, session.options.road_share, session.targets)
        self.report.road_share = session.options.road_share if self.roads.capped else 1.0

    def run(self, deadline: float, stream: Stream) -> None:
        """Generate from ``stream`` until ``deadline`` (or ``max_samples``),
        then check what is in flight and give the bug work what is left."""
        options = self.session.options
        pool = self.session.pool
        assert pool is not None
        self.bugs.generating_since = time.monotonic()

        def check(sample: Sample) -> None:
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            self.report.samples += 1
            self.dispatch(sample)
            # No barrier: wait only while every worker has work (a follower
            # waiting for its leader is no work yet).
            while pool.runnable > pool.slots and (left := deadline - time.monotonic()) > 0:
                self.drain(timeout=left)
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            self.bugs.work(deadline)
            if options.max_samples is not None and self.report.samples >= options.max_samples:
                raise _BudgetSpent

        if options.max_samples != 0:
            try:  # rounds of Hypothesis runs: strategies/draw.py says why
                stream(options.seed, check, round_size=min(ROUND, options.max_samples or ROUND),
                       focus=options.focus)
            except _BudgetSpent:
                pass
        if time.monotonic() >= deadline:
            self.session.cut_queued()
            self.filing.closed = True  # what is in flight files from what it ran
            # What is running when the budget ends is still checked, for a
            # while: a compile may run for its whole job timeout.
            grace_end = time.monotonic() + options.finish_s * _RUNNING_GRACE
            while self.session.waiting and (left := grace_end - time.monotonic()) > 0:
                self.drain(timeout=left)
            self.session.cut_running()
        while self.session.waiting:
            self.drain()
        # A campaign of replay and shrinking only (or one that found its bugs
        # late) spends what is left of the budget on the buckets.
        self.bugs.work(deadline, share=None)

    def dispatch(self, sample: Sample) -> None:
        """Queue a generated sample where the scheduler's plan sends it: the
        original, and repaired variants for the groups a known bug would stop
        early (``fuzz.engine.schedule``); every target without a scheduler."""
        targets = self.roads.targets_for(self.session.targets)
        plan = self.scheduler.plan(sample, targets) if self.scheduler \
            else [Planned(sample, list(targets))]
        self.report.coverage.add(sample, {})
        if not plan:  # (the scheduler never throws a sample away whole)
            self.report.unscheduled += 1
        for part in plan:
            flight = self.submit(part.sample, part.targets, self.report.samples)
            flight.partial = len(part.targets) < len(targets)
            flight.repairs = part.repairs
            self.report.repaired += bool(part.repairs)

    def drain(self, timeout: float | None = None) -> None:
        """Take finished answers (waiting up to ``timeout``); file every
        generated sample whose answers are all in, in the order the samples
        were made (without waiting when one is ready: its answers are all in,
        and a job still running may be one no sample waits for)."""
        if any(not flight.left for flight in self.session.waiting):
            timeout = 0.0
        self.session.take_answers(timeout)
        ready = [flight for flight in self.session.waiting if not flight.left]
        for flight in ready:
            self.session.waiting.remove(flight)
            self._file_or_report(flight)
            if self.on_progress is not None:
                self.on_progress(self.report)

    def _file_or_report(self, flight: InFlight) -> None:
        """A bug of ours while checking one generated sample is reported (exit
        status 3 at the end) and the campaign goes on with the next."""
        try:
            self.filing.file(flight)
        except HarnessError as exc:
            self.report.harness_errors.append(
                f"sample {flight.index} ({flight.sample.describe()}): {headline(exc)}")

"""A fuzzing campaign as an engine with phases, in the order Hypothesis' own
engine runs them: **replay** every stored case (still failing in its bucket,
fixed, or moved to another bucket), **generate** new samples until the budget
is spent, every sample to every target, then **finish** the bug work that is
left, bounded. This module only composes them: each phase is a module of
``fuzz.engine.phases``; the pool, the samples in flight and judging a sample
are the ``fuzz.engine.session`` the phases share; a judged sample is counted
and filed by ``fuzz.engine.filing`` into the corpus as the campaign knows it
(``fuzz.engine.ledger``); the bug work beside generation (shrinking, reports,
one op first) is ``fuzz.engine.bugwork``; what a campaign is told and reports
is ``fuzz.engine.records``.

SIGINT / SIGTERM end any phase cleanly (``fuzz.engine.interrupt``): the
report so far is returned, workers are reaped, and corpus writes are never
cut in half.
"""

from __future__ import annotations

import time
from typing import Callable

from fuzz.engine.bugwork import BugWork
from fuzz.engine.dispatch import dispatch_order, leaders
from fuzz.engine.filing import Filing
from fuzz.engine.interrupt import Interrupted, stop_signals
from fuzz.engine.ledger import Ledger
from fuzz.engine.phases.finish import FinishPhase
from fuzz.engine.phases.generate import GeneratePhase
from fuzz.engine.phases.replay import ReplayPhase
from fuzz.engine.records import (CampaignOptions, CampaignReport, Phase, ReplayRecord,
                                 ShrinkRecord)
from fuzz.engine.schedule import Scheduler
from fuzz.engine.session import Session, headline
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from fuzz.triage.findings import Finding
from fuzz.workers.interface import HarnessError
from strategies.draw import each_sample

__all__ = ["CampaignOptions", "CampaignReport", "Campaign", "Finding", "ReplayRecord",
           "ShrinkRecord", "run_campaign", "dispatch_order", "leaders", "PHASES"]

PHASES = ("replay", "generate", "finish")


class Campaign:
    """The phases of one campaign over one session, ledger, bug work and report.

    Targets and the corpus folder are checked (and may raise) in the
    constructor, before any worker starts."""

    def __init__(self, options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None,
                 on_phase: Callable[[Phase, CampaignReport], None] | None = None,
                 on_progress: Callable[[CampaignReport], None] | None = None) -> None:
        self.options = options
        # The answers of report jobs come back through the session's pool.
        self.session = Session(options, elsewhere=lambda ticket, answer: self.bugs.report_answered(
            self.bugs.report_jobs.pop(ticket), answer))
        self.table, self.targets = self.session.table, self.session.targets
        self.report = self.session.report
        # The corpus folder as this campaign knows it: stored buckets, case sizes, filing.
        self.ledger = Ledger(options.corpus_dir)
        self.scheduler = Scheduler(seed=options.seed) if options.schedule else None
        # Shrinking and bug reports beside generation (fuzz/engine/bugwork.py).
        self.bugs = BugWork(options, self.report, pool=lambda: self.session.pool,
                            triage=lambda: self.session.triage, target=self.session.target,
                            take_answers=self.session.take_answers,
                            replay=self.session.replay_one, ledger=self.ledger)
        # Every sample the phases send goes through ``Session.submit``.
        self.filing = Filing(self.session, self.ledger, self.bugs, self.scheduler,
                             submit=self.session.submit, on_finding=on_finding)
        self.replay = ReplayPhase(self.session, self.ledger, self.bugs)
        self.generate = GeneratePhase(self.session, self.filing, self.bugs, self.scheduler,
                                      submit=self.session.submit, on_progress=on_progress)
        self.finish = FinishPhase(self.bugs, options.finish_s)
        self._on_start, self._on_phase = on_start, on_phase
        self._phase_name = Phase.START

    def run(self) -> CampaignReport:
        """Replay the corpus, fuzz until the budget ends, finish the bug work; return the report."""
        options = self.options
        start = self.filing.started = time.monotonic()
        if self._on_start is not None:
            self._on_start(self.targets)
        with stop_signals():
            try:
                with self.session:
                    # Worker start-up (imports) is not fuzzing time.
                    deadline = time.monotonic() + options.budget_s
                    try:
                        if options.replay:
                            self._phase(Phase.REPLAY, self.replay.run)
                        self.finish.bound(deadline)
                        self._phase(Phase.GENERATE,
                                    lambda: self.generate.run(deadline, each_sample))
                        self._phase(Phase.FINISH, self.finish.run)
                    except HarnessError as exc:
                        # A bug of ours (or a lost cluster) ends the campaign,
                        # never its summary of what was found so far.
                        self.report.harness_errors.append(
                            f"{self._phase_name} phase stopped: {headline(exc)}")
                    finally:
                        self._close_report()
            except Interrupted as stop:
                self.report.interrupted = stop.signum
        self.report.elapsed_s = time.monotonic() - start
        return self.report

    def _phase(self, name: Phase, body: Callable[[], None]) -> None:
        self._phase_name = name
        if self._on_phase is not None:
            self._on_phase(name, self.report)
        began = time.monotonic()
        try:
            body()
        finally:
            self.report.phase_seconds[name] = self.report.phase_seconds.get(name, 0.0) \
                + time.monotonic() - began

    def _close_report(self) -> None:
        """The pool's and the triage's figures into the report, however the phases ended."""
        pool, triage = self.session.pool, self.session.triage
        assert pool is not None and triage is not None
        self.report.workers_replaced = pool.replaced
        self.report.busy_s, self.report.workers = pool.busy_s, pool.slots
        if self.scheduler is not None:
            self.report.allocation = self.scheduler.allocation()
        self.report.localizations = triage.localizations
        self.report.ablations = triage.ablations

    def check_samples(self, samples: list[Sample],
                      on_sample: Callable[[int, list[Finding]], None] | None = None
                      ) -> list[list[Finding]]:
        """Run given samples on every target and judge them, filing nothing:
        ``Session.check_samples`` on this campaign's session (its report counts the witnesses)."""
        with self.session:
            return self.session.check_samples(samples, on_sample)


def run_campaign(options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None) -> CampaignReport:
    """Run a whole campaign (all phases the options enable) and return its report."""
    return Campaign(options, on_finding, on_start).run()

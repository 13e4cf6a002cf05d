"""What becomes of a campaign's sample once the session has judged it: its
work counted into the report (compiles, stage seconds, verdicts, coverage),
the checks a finding needs before it is stored (a full run when the scheduler
sent the sample to part of the targets, a second run of a new wrong answer,
which files it as FLAKY when the two disagree, the extra weight draws), then
each finding filed in the corpus (``fuzz.engine.ledger``) and handed to the
bug work (``fuzz.engine.bugwork``); a new wrong answer localization could not
see is held back until its model repro reproduces. The scheduler learns where each target
landed. A sample cut at the end of the budget files what does not depend on
the targets that were dropped; once the budget is spent (``closed``), filing
starts no new sample (no full run, no re-seeded draw): it notes what it
would have run, so the time after the budget stays bounded."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np

from fuzz.engine.bugwork import BugWork
from fuzz.engine.dispatch import InFlight
from fuzz.engine.ledger import Ledger
from fuzz.engine.records import CampaignReport
from fuzz.engine.schedule import Scheduler
from fuzz.engine.session import Session
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from fuzz.triage.findings import Finding, vanished_under_observation
from oracles import TargetResult, Verdict
from oracles.blame import same_wrong_answer
from oracles.signature import bucket_for, flaky_key

__all__ = ["Filing", "Submit"]

# How a campaign queues a sample's jobs: its session's ``Session.submit``,
# the one seam every sample it sends goes through.
Submit = Callable[[Sample, list[Target], int | None], InFlight]


class Filing:
    """A campaign's judged samples into its report, its corpus and its bug work."""

    def __init__(self, session: Session, ledger: Ledger, bugs: BugWork,
                 scheduler: Scheduler | None, *, submit: Submit,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None) -> None:
        self.session, self.ledger, self.bugs, self.scheduler = session, ledger, bugs, scheduler
        self.report = session.report
        self.submit = submit
        self.on_finding = on_finding
        self.started = time.monotonic()  # when the campaign began (first-found times)
        # Set when the budget is spent: the samples still in flight are filed
        # from what they ran, and nothing new is queued for them.
        self.closed = False

    def file(self, flight: InFlight) -> list[Finding]:
        """Judge one sample's answers, count them and file its findings
        (after a full run, when the scheduler sent it to part of the targets
        and it shows a bucket the corpus does not know)."""
        judged = self.session.judge(flight)
        if judged is None:
            return []
        sample, findings = flight.sample, judged.findings
        results, outcomes = judged.results, judged.outcomes
        if flight.cut or (self.closed and flight.partial):
            findings = self._witnessed(findings, flight)
        elif flight.partial and any(f.bucket not in self.ledger.known for f in findings):
            # Blame compares lowerings and backends: a bucket the corpus does
            # not know is only filed from a run on every target.
            self._count(results, outcomes)
            self.report.confirm_runs += 1
            full = self.submit(sample, self.session.targets, None)
            full.index = flight.index
            full.repairs = flight.repairs
            return self.file(self.session.answered(full))
        if sample.draws:
            self.check_draws(flight, judged.reference, judged.eager, results, outcomes)
        known_before = set(self.ledger.known)
        self.report.coverage.add(sample, outcomes, generated=flight.index is None)
        self._count(results, outcomes)
        findings = [self._confirmed(f, sample)
                    if f.verdict is Verdict.MISMATCH and f.bucket not in self.ledger.known
                    and f.bucket not in self.ledger.held else f
                    for f in findings]
        for finding in findings:
            finding.sample_index = flight.index if flight.index is not None else self.report.samples
            self.report.first_found_s.setdefault(finding.bucket,
                                                 round(time.monotonic() - self.started, 1))
            self._store(finding, sample, flight.repairs)
            self.report.findings.append(finding)
            if self.on_finding is not None:
                self.on_finding(finding, self.report)
        if self.scheduler is not None:
            self.scheduler.record(sample, flight.ordered, {name: f.bucket for f in findings
                                                           for name in f.targets}, known_before)
        return findings

    def _witnessed(self, findings: list[Finding], flight: InFlight) -> list[Finding]:
        """A cut sample's findings that may be filed: an error's bucket does
        not depend on which targets ran (KEY_VERSION 4), a wrong answer's
        blame does; a new wrong answer seen on part of the targets is noted,
        not filed (the next campaign checks it on every target)."""
        kept = []
        for finding in findings:
            if finding.bucket not in self.ledger.known and \
                    finding.verdict in (Verdict.MISMATCH, Verdict.FLAKY):
                self.report.cut_unfiled.append(
                    f"sample {flight.index} ({flight.sample.describe()}): a new wrong answer on "
                    f"{finding.target}, seen when the budget ended on part of the targets: "
                    "not filed without every target's witness")
                continue
            kept.append(finding)
        return kept

    def _confirmed(self, finding: Finding, sample: Sample) -> Finding:
        """A new wrong answer runs again (same program, from the artifact
        cache where there is one) before it is stored: one that does not
        recur with the same numbers is nondeterministic, filed as FLAKY with
        the spread of outputs seen, never as a plain MISMATCH."""
        target = self.session.target(finding.target)
        pool = self.session.pool
        assert target is not None and pool is not None
        (again,) = pool.run([(target, sample)], faults=True)
        self.report.confirm_reruns += 1
        # A worker lost on the re-run answers a failed TargetResult; a bug of ours raised above.
        if not isinstance(again, TargetResult) or again.failure is not None or \
                same_wrong_answer(finding.result.outputs, again.outputs):
            return finding
        outputs = again.outputs
        spread = max((float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
                      for a, b in zip(finding.result.outputs, outputs)
                      if a is not None and b is not None and np.shape(a) == np.shape(b)),
                     default=float("nan"))
        key = flaky_key(finding.owner, finding.culprit or "unlocalized")
        numbers = dict(finding.outcome.numbers, runs=2, spread=spread)
        outcome = dataclasses.replace(finding.outcome, verdict=Verdict.FLAKY, numbers=numbers,
                                      detail=f"two runs of one program disagreed by up to "
                                             f"{spread:.6g}\n{finding.outcome.detail}")
        return dataclasses.replace(finding, verdict=Verdict.FLAKY, key=key, outcome=outcome,
                                   bucket=bucket_for(Verdict.FLAKY, key))

    def check_draws(self, flight: InFlight, reference: Any, eager: Any,
                    results: dict[str, Any], outcomes: dict[str, Any]) -> None:
        """Judge the extra weight draws each target ran on its one artifact;
        the first draw that fails where the sample's own seed passed becomes a
        sample of its own (re-seeded), checked and filed like any other."""
        triage = self.session.triage
        assert triage is not None
        for seed in flight.sample.draws:
            drawn = {name: dataclasses.replace(r, outputs=r.draws[seed], draws={})
                     for name, r in results.items() if seed in r.draws}
            if not drawn or seed not in reference.draws or seed not in eager.draws:
                continue
            self.report.draws_checked += 1
            # The measured rounding spread belongs to the sample's own weights:
            # a draw is judged with the a-priori bound instead (looser, never stricter).
            judged = triage.outcomes(
                drawn, dataclasses.replace(reference, outputs=reference.draws[seed], roundings=[]),
                dataclasses.replace(eager, outputs=eager.draws[seed]), flight.sample)
            if any(o.verdict is not Verdict.PASS and outcomes[name].verdict is Verdict.PASS
                   for name, o in judged.items() if name in outcomes):
                if self.closed:
                    self.report.cut_unfiled.append(
                        f"sample {flight.index} ({flight.sample.describe()}): weight draw {seed} "
                        "failed where the sample's own weights passed, when the budget had "
                        "ended: not run again as a sample of its own")
                    return
                self.report.draws_reseeded += 1
                self.submit(flight.sample.reseeded(seed), self.session.targets, flight.index)
                return

    def _count(self, results: dict[str, Any], outcomes: dict[str, Any]) -> None:
        """A sample's work into the report: compiles, stage seconds, verdicts."""
        for name, result in results.items():
            self.report.configs_compiled += result.compiles
            self.report.target_seconds[name] = self.report.target_seconds.get(name, 0.0) \
                + sum(result.timings.values())
            for stage, seconds in result.timings.items():
                self.report.stage_seconds[stage] = self.report.stage_seconds.get(stage, 0.0) \
                    + seconds
            self.report.outcomes[(name, outcomes[name].verdict.value)] += 1
            self.report.batches_checked += sum(out is not None for out in result.outputs)

    def _store(self, finding: Finding, sample: Sample, repairs: tuple[str, ...] = ()) -> None:
        """Store a finding (``fuzz.engine.ledger``) and give a new or smaller case
        to the bug work. A new wrong answer that vanished when localization
        looked at it is held back: its model repro must reproduce first."""
        filed, entry = self.ledger.file(finding, sample, self.session.options.seed, repairs,
                                        hold=vanished_under_observation(finding))
        if filed == "held":
            self.bugs.held_case(finding.bucket)
        elif filed == "new":
            self.bugs.new_case(finding.bucket, entry)
        elif filed == "replaced":
            self.bugs.case_replaced(finding.bucket)

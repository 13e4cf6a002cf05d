"""The campaign's bug work: turning new buckets into bug reports while the
campaign goes on. New buckets queue for shrinking (cheapest verdicts first,
in short turns, within a share of the time generation has run); a bucket
whose case is final queues a report job (``fuzz.reports.bugreport``) in the
same worker pool as the generated samples; an op-level bucket gets its
report first, and a one-op repro that reproduces is its minimal case. After
the budget, ``finish`` completes what fits in the finish phase and labels
the rest, so a user who stops at any time has the smallest cases so far,
most of them filed, and never a bucket presented as ready that is not.

The campaign's session owns the pool, the triage and the samples in flight;
the campaign hands ``BugWork`` getters for them and routes the answers of
report jobs here."""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from fuzz.engine.bucketshrink import BucketShrinker
from fuzz.engine.interrupt import deferred
from fuzz.engine.ledger import Ledger
from fuzz.reports.repro import SEARCHED_FORMS, SINGLE_OP_FORMS, has_single_op_form
from fuzz.store.corpus import CorpusEntry
from fuzz.store import corpus
from fuzz.targets.catalog import Target
from fuzz.triage.findings import Triage
from fuzz.workers.interface import HarnessFault, Pool
from fuzz.engine.records import CampaignOptions, CampaignReport, ReplayRecord, ShrinkRecord
from fuzz.reports.bugreport import BugReportJob, file_bug_report
from fuzz.triage.edits import sample_size

__all__ = ["BugWork", "UNCHECKED_AT_END"]

# Below this a shrink attempt cannot make progress (one real compile is ~1 s).
_MIN_SHRINK_S = 5.0
# Worker seconds of one report job (export, compile, run repro.py forked from
# the warm server, tool files) until the campaign has measured its own: a
# median of 4 s on 2 cores (seed 1, 2026-12-07). The budget keeps room for the reports to write.
_REPORT_S = 8.0
# One bucket's turn at shrinking: short, so that one slow wrong answer does not
# hold up a queue of lowering failures that shrink in seconds each.
_SHRINK_TURN_S = 20.0
# The repro status of a bucket whose report job was still running at the end.
UNCHECKED_AT_END = "not checked: the campaign ended before its repro's check (the next replay checks it)"
# A bucket whose ``--shrink-budget`` ran out before a fixpoint is reported as
# it is, then shrunk further in turns no other bucket wants, up to this many
# times its budget in all: on 2 cores a Vulkan or dynamic-shape compile error
# takes 0.3-0.7 steps/s, and seed 97's were stopped at 11 of ~30 steps with
# six minutes of the campaign left (a bucket that is not a fixpoint is no bug
# report, however long the campaign went on idle of bug work).
_OVERTIME_FACTOR = 4.0
# Cheapest to shrink first (the verdict part of a bucket id).
_SHRINK_ORDER = ("EXPORT_ERROR", "LOWERING_UNSUPPORTED_OP", "LOWERING_INVALID_IR",
                 "LOWERING_ERROR", "COMPILE_ERROR", "RUNTIME_ERROR", "CRASH", "TIMEOUT",
                 "MISMATCH")


class BugWork:
    """The shrink queue, the report jobs in flight and what each bucket still needs."""

    def __init__(self, options: CampaignOptions, report: CampaignReport, *,
                 pool: Callable[[], Pool | None], triage: Callable[[], Triage | None],
                 target: Callable[[str], Target | None],
                 take_answers: Callable[[float | None], None],
                 replay: Callable[[CorpusEntry], ReplayRecord] | None = None,
                 ledger: Ledger | None = None) -> None:
        self.options = options
        # The corpus folder as the campaign knows it: which buckets are held
        # back (``Ledger.held``), and the move of a held case into the corpus.
        self.ledger = ledger
        self.report = report
        self._pool, self._triage = pool, triage
        self.target_named = target
        # Takes the pool's answers (the campaign routes a report job's here).
        self.take_answers = take_answers
        self.unshrunk: list[str] = []
        # Reported, but stopped on its shrink budget: more turns while no
        # bucket waits for its first budget (``_OVERTIME_FACTOR``).
        self.overtime: list[str] = []
        # Bug reports in flight (ticket -> bucket), and buckets whose case
        # changed while theirs ran (their report is written again).
        self.report_jobs: dict[int, str] = {}
        self.stale_reports: set[str] = set()
        self.op_first: set[str] = set()  # new op-level buckets whose single-op report runs
        # Of those, the ones whose first report searched the model for one
        # failing op and found none: their next report does not search again.
        self.searched: set[str] = set()
        self._shrink_spent: dict[str, float] = {}  # bucket -> seconds shrunk so far
        # Each turn at one bucket's case (``fuzz.engine.bucketshrink``).
        self.shrinker = BucketShrinker(options, pool=pool, triage=triage, target=target,
                                       replay=replay)
        self.needs_report: set[str] = set()  # new or replaced cases without their report
        self.to_report: list[str] = []  # of those, the ones ready for it (shrunk)
        self.generating_since = 0.0
        # When the campaign's bug work must be over (the end of the finish
        # phase): the reports not yet written are kept room before it.
        self.finish_by = float("inf")

    @property
    def pool(self) -> Pool | None:
        """The campaign's worker pool (local or Ray), once it runs."""
        return self._pool()

    @property
    def triage(self) -> Triage | None:
        """The campaign's triage, once its pool runs."""
        return self._triage()

    def new_case(self, bucket: str, entry: CorpusEntry) -> None:
        """A new bucket was filed: an op-level one gets its report first (the
        single op is the minimal case when it fails the same way; shrinking
        only if it does not), any other queues for shrinking (or, without
        shrinking, for its report)."""
        self.needs_report.add(bucket)
        if self.options.shrink and self.options.report and has_single_op_form(entry):
            self.op_first.add(bucket)
            self.ready_for_report(bucket)
        elif self.options.shrink:
            self.unshrunk.append(bucket)
        else:
            self.ready_for_report(bucket)

    def held_case(self, bucket: str) -> None:
        """A new wrong answer localization could not see was held back
        (``fuzz.engine.ledger``): its report runs first, and only a model repro
        that reproduces brings it into the corpus (``report_answered``)."""
        if not self.options.report or self.ledger is None:
            self.report.held_back[bucket] = ("reports are off (--no-report): its repro never "
                                             "ran, so it was not stored")
            return
        self.report.held_back[bucket] = "waiting for its repro"
        self.needs_report.add(bucket)
        self.ready_for_report(bucket)
        self.queue_reports()

    def _root(self, bucket: str) -> Path:
        """The folder ``bucket``'s case is in: the corpus, or its holding area."""
        root = self.options.corpus_dir
        return root / corpus.HELD if self.is_held(bucket) else root

    def is_held(self, bucket: str) -> bool:
        """Whether ``bucket``'s case is in the holding area (the ledger knows)."""
        return self.ledger is not None and bucket in self.ledger.held

    def _after_held(self, bucket: str, status: str) -> None:
        """A held case's report is in: stored (and shrunk) if its repro
        reproduces, else it stays in the holding area, named in the summary."""
        if status != "reproduces":
            self.report.held_back[bucket] = f"its model repro does not reproduce ({status})"[:300]
            return
        assert self.ledger is not None
        if not self.ledger.promote(bucket):
            self.report.held_back[bucket] = "the corpus had this bucket already: kept its case"
            return
        del self.report.held_back[bucket]
        first = next((f for f in self.report.findings if f.bucket == bucket), None)
        if first is not None:  # now a new bucket of this campaign
            first.new, first.path = True, self.options.corpus_dir / bucket
        if self.options.shrink:  # shrunk like any new bucket, then reported again
            self.needs_report.add(bucket)
            self.unshrunk.append(bucket)

    def case_replaced(self, bucket: str) -> None:
        """A smaller generated case replaced ``bucket``'s stored one: it needs its
        own repro, tool files and REPORT.md (one minimal as one op is never
        replaced: ``Ledger.one_op``)."""
        self.needs_report.add(bucket)
        if bucket not in self.unshrunk:
            self.ready_for_report(bucket)

    def work(self, deadline: float, share: float | None = -1.0) -> None:
        """Turn new buckets into bug reports while the campaign goes on: shrink
        the oldest unshrunk bucket (one turn of at most ``shrink_budget_s``)
        while shrinking has used less than ``share`` of the time generation
        has run (None: any time left before ``deadline``), then queue its
        report as a pool job beside the generated samples' jobs. A user who
        stops at any time has the smallest cases so far, most of them filed.
        With no bucket waiting, one already reported whose budget ran out is
        shrunk further (``_overtime_allowed``) and reported again if smaller."""
        share = self.options.shrink_share if share == -1.0 else share
        self.queue_reports()
        while self.options.shrink and (self.unshrunk or self.overtime):
            now = time.monotonic()
            before_reports = self.finish_by - now - self.reserve_s()
            if before_reports < _MIN_SHRINK_S:
                # What is left of the campaign is the reports': every bucket
                # still waiting for shrinking is reported as it is now.
                self.report_unshrunk("budget kept for the reports")
                return
            left = min(deadline - now, before_reports)
            if left < _MIN_SHRINK_S:  # the finish phase goes on with it
                return
            if (
                    share is not None and self.report.shrink_s > share * (now - self.generating_since)):
                return
            overtime = not self.unshrunk
            if not overtime:
                bucket, cap = self._next_to_shrink(), self.options.shrink_budget_s
            elif self._overtime_allowed(share, now):
                bucket = min(self.overtime, key=lambda b: self._shrink_spent.get(b, 0.0))
                self.overtime.remove(bucket)
                cap = self._overtime_cap
            else:
                return
            spent = self._shrink_spent.get(bucket, 0.0)
            turn = min(_SHRINK_TURN_S, cap - spent, left)
            if turn < _MIN_SHRINK_S:  # its shrink budget is spent: report it as it is
                if not overtime:  # (one in overtime was reported when its budget ran out)
                    self.ready_for_report(bucket)
                continue
            record = self.shrink_one(bucket, turn)
            took = time.monotonic() - now
            self.report.shrink_s += took
            self._shrink_spent[bucket] = spent + took
            self.note_shrink(record)
            if record.record.get("stopped") == "budget":
                if self._shrink_spent[bucket] + _MIN_SHRINK_S < self.options.shrink_budget_s:
                    self.unshrunk.append(bucket)  # another turn, after the others had theirs
                    continue
                if self._shrink_spent[bucket] + _MIN_SHRINK_S < self._overtime_cap:
                    self.overtime.append(bucket)  # reported now, shrunk on when nothing waits
            if record.replaced:
                self.needs_report.add(bucket)
            if record.replaced or not overtime:  # else its report stands
                self.ready_for_report(bucket)
                self.queue_reports()

    def _overtime_allowed(self, share: float | None, now: float) -> bool:
        """Whether a bucket past its budget may have a turn: only while
        generation runs (the bounded finish phase has no time to report a
        smaller case again) and while a whole turn of the shrink share stays
        free, so a bucket found next still has its first turn at once."""
        if share is None:
            return False
        room = share * (now - self.generating_since) - self.report.shrink_s
        return room >= 2 * _SHRINK_TURN_S

    @property
    def _overtime_cap(self) -> float:
        """Shrink seconds a bucket may have in all, overtime included."""
        return _OVERTIME_FACTOR * self.options.shrink_budget_s

    def reserve_s(self) -> float:
        """Wall seconds the reports not yet written will take (the mean of
        this campaign's report jobs: a median of ~4 worker-seconds each on 2
        cores with warm repro checks, 4-24), so they end inside the budget."""
        unreported = self.needs_report | set(self.unshrunk)
        costs = self.report.report_seconds
        each = statistics.fmean(costs) if costs else _REPORT_S
        return each * len(unreported) / max(1, self.pool.slots if self.pool is not None else 1)

    def report_unshrunk(self, why: str) -> None:
        """Report every bucket still waiting for shrinking as it is now, its shrink row saying ``why`` not."""
        for bucket in self.unshrunk:
            self.note_shrink(ShrinkRecord(bucket, "", {"skipped": why}, False))
            self.ready_for_report(bucket)
        self.unshrunk.clear()
        self.queue_reports()

    def _next_to_shrink(self) -> str:
        """The unshrunk bucket to shrink next: fewest turns first, then the
        cheapest verdicts (an export or lowering failure shrinks in seconds, a
        wrong answer compiles and localizes at every step), oldest first."""
        def cost(item: tuple[int, str]) -> tuple[int, int, int]:
            position, bucket = item
            verdict = bucket.split("-", 1)[0].upper()
            rank = _SHRINK_ORDER.index(verdict) if verdict in _SHRINK_ORDER else len(_SHRINK_ORDER)
            return (self._shrink_spent.get(bucket, 0.0) > 0, rank, position)

        _, bucket = min(enumerate(self.unshrunk), key=cost)
        self.unshrunk.remove(bucket)
        return bucket

    def note_shrink(self, record: ShrinkRecord) -> None:
        """One row per bucket in the report: a later turn continues the first."""
        earlier = [r for r in self.report.shrinks if r.bucket == record.bucket]
        if earlier and "skipped" not in record.record:
            record = dataclasses.replace(record, replaced=record.replaced
                                         or any(r.replaced for r in earlier))
        elif earlier:
            return
        self.report.shrinks = [r for r in self.report.shrinks if r.bucket != record.bucket] \
            + [record]

    def ready_for_report(self, bucket: str) -> None:
        """Queue ``bucket``'s report once its case is final for now (shrunk, or not to be shrunk)."""
        if bucket in self.needs_report and bucket not in self.to_report:
            self.to_report.append(bucket)

    def queue_reports(self) -> None:
        """Submit the report jobs of buckets whose case is final for now; a
        bucket whose report is running gets another once it is in."""

        if not self.options.report:
            self.to_report.clear()
            return
        assert self.pool is not None
        running = set(self.report_jobs.values())
        for bucket in self.to_report:
            if bucket in running:
                self.stale_reports.add(bucket)
                continue
            job = BugReportJob(str(self._root(bucket) / bucket), self.options.table,
                               one_op_only=bucket in self.op_first,
                               searched=bucket in self.searched)
            # Urgent only where a worker is held for bug work: on a shared pool
            # a report ahead of the samples' jobs delays them, never itself.
            urgent = self.options.bug_workers > 0
            self.report_jobs[self.pool.submit(job, urgent=urgent)] = bucket
        self.to_report.clear()

    def report_answered(self, bucket: str, answer: Any) -> None:
        """A report job came back: file REPORT.md and the repro status; an op-level
        bucket learns whether its one op is the minimal case; a case that
        changed while its report ran gets another."""

        if isinstance(answer, dict) and "seconds" in answer:
            self.report.report_costs.setdefault(bucket, []).append(float(answer["seconds"]))
        if isinstance(answer, HarnessFault):  # a bug of ours: this bucket's report only
            last = answer.traceback.strip().splitlines()[-1]
            self.report.harness_errors.append(f"report of {bucket}: {last}")
            answer = f"bug in dlrm-fuzz: {last}"
        self.report.repro_status[bucket] = self._file(bucket, answer)
        self.needs_report.discard(bucket)
        if self.is_held(bucket):
            self._after_held(bucket, self.report.repro_status[bucket])
            return
        if bucket in self.op_first and bucket not in self.stale_reports:
            self.op_first.discard(bucket)
            self.after_single_op(bucket, answer, self.report.repro_status[bucket])
        if bucket in self.stale_reports:  # its case changed while the report ran
            self.stale_reports.discard(bucket)
            self.needs_report.add(bucket)
            self.ready_for_report(bucket)
            self.queue_reports()

    def _file(self, bucket: str, answer: Any) -> str:
        """File a report's answer (``file_bug_report``); returns the repro
        status. A folder that no longer loads is a bug of ours in that
        report, named in the harness errors, never the campaign's end (nor
        the end of its finish phase, which files the reports cut off)."""
        try:
            with deferred():
                return file_bug_report(self._root(bucket), bucket, answer)
        except ValueError as unreadable:
            self.report.harness_errors.append(f"report of {bucket}: {unreadable}"[:300])
            return f"cannot run: its case no longer loads ({unreadable})"[:300]

    def after_single_op(self, bucket: str, answer: Any, status: str) -> None:
        """An op-level bucket's first report is in: a single-op repro that
        reproduces is the minimal case (recorded as the bucket's shrink, so
        the bucket is actionable); any other form sends it to shrinking."""
        repro = answer.get("repro", {}) if isinstance(answer, dict) else {}
        if status != "reproduces" and repro.get("kind") in SEARCHED_FORMS:
            self.searched.add(bucket)
        if status != "reproduces" or repro.get("kind") not in SINGLE_OP_FORMS:
            # Its first report held the one-op form only: the shrunk case
            # gets the full report (model form, tool files).
            self.needs_report.add(bucket)
            self.unshrunk.append(bucket)
            return

        entry = corpus.load_entry(self.options.corpus_dir / bucket)
        record: dict[str, object] = {
            "stopped": "single-op", "form": repro.get("kind"),
            "op": entry.culprit or entry.op or "", "steps_tried": 0, "steps_accepted": 0,
            "seconds": 0.0, "size_before": dict(sample_size(entry.sample))}
        self.note_shrink(ShrinkRecord(bucket, entry.target, record, False))
        with deferred():
            corpus.update_case(self.options.corpus_dir, bucket, shrink=record)
        if self.ledger is not None:  # its stored case stays: a smaller model changes no repro
            self.ledger.one_op.add(bucket)

    def finish(self, until: float) -> None:
        """After the budget: buckets still waiting for shrinking are reported
        as they are (the next campaign's replay shrinks them), and the reports
        in flight are waited for until ``until``; a bucket whose report is not
        in by then is unconfirmed (summary), never presented as ready."""
        if until != float("inf"):  # what the bounded finish has room for is still shrunk
            self.work(until, share=None)
        self.report_unshrunk("budget spent")
        running = set(self.report_jobs.values())
        for bucket in sorted(self.needs_report - running):  # in flight: written already
            self.ready_for_report(bucket)
        self.queue_reports()
        while self.report_jobs and time.monotonic() < until:
            self.take_answers(max(0.0, until - time.monotonic()))
            if self.unshrunk:  # a one-op report that did not reproduce: shrink it now
                self.work(until, share=None)
                self.report_unshrunk("budget spent")  # and report it while the others finish
        # Buckets sent to shrinking by a report that came in too late for it.
        self.report_unshrunk("budget spent")
        for bucket in self.report_jobs.values():
            # Its job is killed with the pool, perhaps after writing repro.py
            # and before checking it: the case and REPORT.md say "not
            # checked", never the status of the repro that was there before.
            self.report.repro_status[bucket] = self._file(
                bucket, {"repro": {"status": UNCHECKED_AT_END}, "tools": {}})
            if self.is_held(bucket):
                self.report.held_back[bucket] = "its repro was not in when the campaign ended"

    def write_reports(self) -> None:
        """Every pending report now, waiting for all (a caller outside a
        campaign's phases: tests, the repro of a replaced case)."""
        self.finish(until=float("inf"))

    def shrink_one(self, bucket: str, budget_s: float) -> ShrinkRecord:
        """One turn of at most ``budget_s`` at shrinking ``bucket``'s stored case
        (``fuzz.engine.bucketshrink``). Its steps' jobs go ahead of the queued
        samples', as many side by side as workers are free, and a worker
        that answered one lingers a moment for the next
        (``fuzz.workers.pool``), then goes back to the samples: holding the
        workers for the whole turn sped its steps up, but the idle worker
        of every one-job step cost samples (seed 1: 79 checked with it, 85
        without; seed 97: 50-61 against 67-78) with no clear gain in ready
        buckets, so the shrink share alone sets the balance."""
        return self.shrinker.shrink(bucket, budget_s)

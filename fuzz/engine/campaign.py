"""A fuzzing campaign as an engine with phases, in the order Hypothesis' own
engine runs them: **replay** every stored case (still failing in its bucket,
fixed, or moved to another bucket), **generate** new samples until the budget
(less what shrinking needs) is spent, then **shrink** each new bucket's case to
the smallest sample that still fails the same way on the same target.

Hypothesis drives generation (seeded, so a campaign is reproducible from its
``--seed``); the budget ends that loop through an exception Hypothesis does
not take for a failing example. Shrinking is dlrm-fuzz's own structured
reducer (``fuzz.triage.shrink``): it must start from a stored case, for which
Hypothesis holds no choice sequence. SIGINT / SIGTERM end any phase cleanly
(``fuzz.engine.interrupt``): the report so far is returned, workers are reaped, and
corpus writes are never cut in half.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fuzz.store import corpus
from fuzz.engine.coverage import Coverage
from fuzz.store.corpus import CorpusEntry
from fuzz.engine.interrupt import Interrupted, deferred, stop_signals
from fuzz.model.focus import Focus
from fuzz.model.sample import Sample
from fuzz.engine.schedule import Planned, Scheduler
from fuzz.targets.catalog import (EAGER, REFERENCE, TARGETS, CompiledTarget, Target, available_targets,
                          resolve_targets)
from fuzz.triage.findings import CandidateRejected, Finding, Triage
from fuzz.workers.pool import HarnessError, HarnessFault, WorkerPool
from fuzz.reports.repro import SINGLE_OP_FORMS, has_single_op_form
from oracles import KEY_VERSION, ReferenceFailed, Tolerance, Verdict
from strategies.draw import ROUND, each_sample

__all__ = ["CampaignOptions", "CampaignReport", "Campaign", "Finding", "ReplayRecord",
           "ShrinkRecord", "run_campaign", "dispatch_order", "leaders", "PHASES"]

PHASES = ("replay", "generate", "finish")
# Below this a shrink attempt cannot make progress (one real compile is ~1 s).
_MIN_SHRINK_S = 5.0
# Worker seconds of one report job (export, compile, run repro.py in a fresh
# interpreter, tool files) until the campaign has measured its own: 5-7 s for
# a shrunk case on 2 cores. The budget keeps room for the reports to write.
_REPORT_S = 8.0
# The finish phase waits at least this long for the reports in flight.
_LAST_WAIT_S = 10.0
# One bucket's turn at shrinking: short, so that one slow wrong answer does not
# hold up a queue of lowering failures that shrink in seconds each.
_SHRINK_TURN_S = 20.0
# Cheapest to shrink first (the verdict part of a bucket id).
_SHRINK_ORDER = ("EXPORT_ERROR", "LOWERING_UNSUPPORTED_OP", "LOWERING_INVALID_IR",
                 "LOWERING_ERROR", "COMPILE_ERROR", "RUNTIME_ERROR", "CRASH", "TIMEOUT",
                 "MISMATCH")


@dataclass(frozen=True)
class CampaignOptions:
    """Everything one campaign is told: budget, seed, corpus, targets, workers, limits."""
    budget_s: float = 60.0
    seed: int = 0
    corpus_dir: Path = Path("corpus")
    # None: every target available on this machine.
    targets: tuple[str, ...] | None = None
    table: dict[str, Target] | None = None  # built-ins plus plugins; None: built-ins
    workers: int = 2
    timeout_s: float = 120.0
    memory_mb: int | None = 8192
    max_samples: int | None = None
    tolerance: Tolerance = Tolerance()
    cache_dir: Path | None = None  # None: no artifact cache
    cache_mb: int = 2048
    replay: bool = True
    shrink: bool = True
    # Per new bucket and turn. Shrinking runs beside generation, inside the
    # budget, taking at most ``shrink_share`` of the time generation has run.
    shrink_budget_s: float = 60.0
    shrink_share: float = 0.4
    # After the budget: the longest the campaign waits for the bug reports
    # still in flight (a bucket without one is counted unconfirmed).
    finish_s: float = 60.0
    # Write and check repro.py, tool files and REPORT.md for new / shrunk buckets.
    report: bool = True
    # Send a sample to fewer targets where they keep landing in known buckets,
    # repairing around known failures (``dlrm-fuzz run --schedule``). Off by
    # default: on bench/discovery.py (3 seeds x 10 min) it found fewer distinct
    # and fewer wrong-answer buckets than every sample to every target.
    schedule: bool = False
    # Finish each sample before the next starts (the old engine; for benchmarks).
    barrier: bool = False
    # Every sample's weights inline, no extra weight draws: one compile per
    # weight seed, as before weights could be inputs (for benchmarks).
    inline_weights: bool = False
    # One export and import per shape mode, shared by every output type; off:
    # each output type exports and imports on its own (for benchmarks).
    shared_import: bool = True
    # Workers as Ray actors (fuzz/raypool.py): "local", "auto" or HOST:PORT.
    ray: str | None = None
    ray_gpu_workers: int = 0
    # The region every generated sample and every shrink step stays inside
    # (``--focus``, ``--config``, ``--preset``; fuzz/model/focus.py).
    focus: Focus | None = None


@dataclass(frozen=True)
class ReplayRecord:
    """A stored case re-run: ``status`` is still-failing, fixed, moved or skipped."""

    bucket: str
    target: str
    status: str
    now: tuple[str, ...] = ()  # the buckets it lands in today
    seconds: float = 0.0
    note: str = ""
    timings: dict[str, dict[str, float]] = field(default_factory=dict)  # target -> stage -> s
    keys: tuple[str, ...] = ()  # the readable signature keys of ``now`` (same order)


@dataclass(frozen=True)
class ShrinkRecord:
    """What shrinking one bucket's case did, and whether the stored case was replaced."""
    bucket: str
    target: str
    record: dict[str, object]  # fuzz.triage.shrink.ShrinkResult.to_dict(), or why not shrunk
    replaced: bool


@dataclass
class CampaignReport:
    """What a campaign did and found: counts, findings, timings, for the summary and JSON."""
    targets: list[str] = field(default_factory=list)
    samples: int = 0
    configs_compiled: int = 0
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    # Samples whose eager references did not fit a worker's memory cap.
    skipped: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    workers_replaced: int = 0
    batches_checked: int = 0
    replays: list[ReplayRecord] = field(default_factory=list)
    shrinks: list[ShrinkRecord] = field(default_factory=list)
    localizations: int = 0
    ablations: int = 0
    repro_status: dict[str, str] = field(default_factory=dict)  # bucket -> repro check
    interrupted: int | None = None  # the signal that stopped the campaign
    coverage: Coverage = field(default_factory=Coverage)
    # Program group -> (cells, samples offered, samples run): the scheduler's allocation.
    allocation: list[tuple[str, int, int, int]] = field(default_factory=list)
    confirm_runs: int = 0  # partially scheduled samples re-run on every target
    confirm_reruns: int = 0  # new wrong answers run again before they were stored
    unscheduled: int = 0  # samples the scheduler sent to no target (counted in ``samples``)
    repaired: int = 0  # plan parts that ran a repaired variant (fuzz.triage.repair)
    draws_checked: int = 0  # extra weight draws judged (no compile of their own)
    draws_reseeded: int = 0  # failing draws re-run as samples of their own
    first_found_s: dict[str, float] = field(default_factory=dict)  # bucket -> s since start
    busy_s: float = 0.0  # seconds workers spent on jobs
    # At the end of the budget: jobs dropped before they started, and the
    # samples of which too little had run to be judged at all.
    cut_jobs: int = 0
    cut_samples: int = 0
    witness_runs: int = 0  # jobs run only to blame a wrong answer (``_witness_runs``)
    cut_unfiled: list[str] = field(default_factory=list)  # new wrong answers not filed
    workers: int = 0
    # Wall seconds of the generate phase spent shrinking (inside the budget).
    shrink_s: float = 0.0

    @property
    def new_buckets(self) -> list[Finding]:
        """Findings not in the corpus before this campaign: what a user must look at."""
        return [f for f in self.findings if f.new]

    def summary(self) -> dict[str, object]:
        """The headline figures as JSON-ready values (``run --summary-json``,
        read by ``dlrm-fuzz bump``)."""
        return {"samples": self.samples, "targets": list(self.targets),
                "configs_compiled": self.configs_compiled,
                "batches_checked": self.batches_checked, "elapsed_s": round(self.elapsed_s, 2),
                "failures": len(self.findings),
                "new_buckets": [f.bucket for f in self.new_buckets],
                "phase_seconds": {k: round(v, 2) for k, v in self.phase_seconds.items()},
                "workers_replaced": self.workers_replaced,
                "harness_errors": list(self.harness_errors), "skipped": list(self.skipped),
                "interrupted": self.interrupted,
                "coverage": self.coverage.to_dict(),
                "allocation": [dict(zip(("group", "cells", "offered", "run"), row))
                               for row in self.allocation],
                "confirm_runs": self.confirm_runs, "unscheduled": self.unscheduled,
                "witness_runs": self.witness_runs,
                "repaired": self.repaired,
                "busy_fraction": round(self.busy_fraction, 3),
                "draws_checked": self.draws_checked, "draws_reseeded": self.draws_reseeded,
                "first_found_s": dict(self.first_found_s),
                "shrink_s": round(self.shrink_s, 2),
                "cut_at_deadline": {"jobs": self.cut_jobs, "samples": self.cut_samples,
                                    "unfiled": list(self.cut_unfiled)},
                "actionable": self._actionable_summary()}

    def _actionable_summary(self) -> dict[str, object]:
        ready, unconfirmed = self.actionable()
        return {"ready": len(ready), "buckets": len(self.new_buckets),
                "unconfirmed": dict(unconfirmed)}

    def actionable(self) -> tuple[list[str], dict[str, str]]:
        """This campaign's new buckets that are bug reports (shrunk to a
        fixpoint, repro reproduces), and every other one with why not."""
        shrinks = {r.bucket: r.record for r in self.shrinks}
        ready: list[str] = []
        unconfirmed: dict[str, str] = {}
        for finding in self.new_buckets:
            record = shrinks.get(finding.bucket, {"skipped": "not shrunk"})
            repro = self.repro_status.get(finding.bucket, "no report")
            if "skipped" in record or record.get("stopped") not in ("fixpoint", "single-op"):
                why = str(record.get("skipped") or f"shrinking stopped on {record.get('stopped')}")
                unconfirmed[finding.bucket] = f"not minimal: {why}"
            elif repro != "reproduces":
                unconfirmed[finding.bucket] = f"repro: {repro}"[:200]
            else:
                ready.append(finding.bucket)
        return ready, unconfirmed

    @property
    def busy_fraction(self) -> float:
        """Seconds workers spent on jobs / (wall seconds x workers)."""
        return self.busy_s / (self.elapsed_s * self.workers) if self.elapsed_s and self.workers \
            else 0.0


@dataclass(eq=False)
class _InFlight:
    """One sample's jobs: references first, then ``ordered`` targets; answers
    fill in as they finish, in any order."""

    sample: Sample
    ordered: list[Target]
    index: int | None  # the generated sample's number; None: checked at once
    answers: list[Any]
    left: int = 0
    partial: bool = False  # the scheduler left some targets out
    repairs: tuple[str, ...] = ()  # a repaired variant: the features switched off
    cut: bool = False  # some jobs were dropped at the end of the budget (``_CUT`` answers)


class _Cut:
    """The answer of a job dropped at the end of the budget before it started."""


_CUT = _Cut()


def _headline(error: object) -> str:
    """A bug of ours in one line: its first line (what was running) and,
    for a traceback, its last (the exception)."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    return lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")


class _BudgetSpent(BaseException):
    """Ends Hypothesis' loop without being taken for a failing example."""


def dispatch_order(targets: list[Target]) -> list[Target]:
    """One target per import group (static, dynamic) first, then one per
    lowered program, then one per compiled artifact, then the targets
    sharing one: by the time a follower starts, its leader has usually put
    the import, the program and the artifact in the artifact cache, so each
    sample is exported and imported once per shape mode, lowered once per
    output type and compiled once per backend and flags."""
    seen: tuple[set[str], set[str], set[str]] = (set(), set(), set())

    def tier(target: Target) -> int:
        groups = (target.import_group, target.program_group, target.compile_group)
        firsts = [group not in known for group, known in zip(groups, seen)]
        for group, known in zip(groups, seen):
            known.add(group)
        return firsts.index(True) if True in firsts else len(firsts)

    tiers = [tier(target) for target in targets]
    return [target for _, target in sorted(zip(tiers, targets), key=lambda pair: pair[0])]


def leaders(ordered: list[Target]) -> list[int | None]:
    """For each target of ``dispatch_order``'s list, the position of the
    earlier target whose cached work it reuses most (same artifact, else same
    program, else same import), or None: the job it should start after."""
    found: list[int | None] = []
    for position, target in enumerate(ordered):
        found.append(None)
        for group in ("compile_group", "program_group", "import_group"):
            mine = getattr(target, group)
            earlier = [i for i in range(position) if getattr(ordered[i], group) == mine]
            if earlier:
                found[-1] = earlier[0]
                break
    return found


class Campaign:
    """Pool, references, targets, known buckets and the report of one campaign.

    Targets and the corpus folder are checked (and may raise) in the
    constructor, before any worker starts."""

    def __init__(self, options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None,
                 on_phase: Callable[[str, CampaignReport], None] | None = None,
                 on_progress: Callable[[CampaignReport], None] | None = None) -> None:
        self.options = options
        self.table = options.table if options.table is not None else TARGETS
        names = options.targets if options.targets is not None else available_targets(self.table)
        if options.ray is not None:
            # GPU targets run on the cluster's GPU actors, not on this machine.
            from fuzz.workers.raypool import check_gpu_workers, needs_gpu

            self.targets = resolve_targets(names, self.table)
            check_gpu_workers(self.targets, options.ray_gpu_workers)
            resolve_targets([t.name for t in self.targets if not needs_gpu(t)], self.table,
                            check_available=True)
        else:
            self.targets = resolve_targets(names, self.table, check_available=True)
        if not options.shared_import:
            self.targets = [dataclasses.replace(t, shared_import=False)
                            if isinstance(t, CompiledTarget) else t for t in self.targets]
        self.references = resolve_targets([REFERENCE, EAGER])
        self.report = CampaignReport(targets=[t.name for t in self.targets],
                                     coverage=Coverage(focus=options.focus))
        stored, _ = corpus.load(options.corpus_dir)
        self.stored = stored
        self.known = {entry.bucket for entry in stored}
        self._sizes: dict[str, tuple[int, ...]] = {}
        self.unshrunk: list[str] = []
        self._on_finding = on_finding
        self._on_start = on_start
        self._on_phase = on_phase
        self._on_progress = on_progress
        self._started = time.monotonic()
        self.pool: Any = None  # a WorkerPool, or a RayPool with --ray
        self._last_timings: dict[str, dict[str, float]] = {}
        self.triage: Triage | None = None
        # Samples in flight: each job's ticket -> (its sample, its position);
        # generated samples waiting to be triaged, oldest first.
        self._open: dict[int, tuple[_InFlight, int]] = {}
        self._flights: list[_InFlight] = []
        self._phase_name = "start"
        self.scheduler = Scheduler(seed=options.seed) if options.schedule else None
        # Bug reports in flight (ticket -> bucket), and buckets whose case
        # changed while theirs ran (their report is written again).
        self._reports: dict[int, str] = {}
        self._stale_reports: set[str] = set()
        self._report_costs: list[float] = []  # worker seconds of each report job so far
        self._op_first: set[str] = set()  # new op-level buckets whose single-op report runs
        self._witnesses: dict[str, Target | None] = {}  # target -> its blame witness
        self._shrink_spent: dict[str, float] = {}  # bucket -> seconds shrunk so far
        self._needs_report: set[str] = set()  # new or replaced cases without their report
        self._to_report: list[str] = []  # of those, the ones ready for it (shrunk)
        self._generating_since = 0.0
        # When the campaign's bug work must be over (the end of the finish
        # phase): the reports not yet written are kept room before it.
        self._finish_by = float("inf")

    # -- the engine -------------------------------------------------------------
    def run(self) -> CampaignReport:
        """Replay the corpus, fuzz until the budget ends, finish the bug work; return the report."""
        options = self.options
        start = self._started = time.monotonic()
        if self._on_start is not None:
            self._on_start(self.targets)
        with stop_signals():
            try:
                with self._pool() as pool:
                    self.pool = pool
                    self.triage = Triage(pool, options.tolerance)
                    # Worker start-up (imports) is not fuzzing time.
                    deadline = time.monotonic() + options.budget_s
                    try:
                        if options.replay:
                            self._phase("replay", self._replay)
                        # Shrinking may use the finish phase too, less
                        # what the reports not yet written will need.
                        self._finish_by = deadline + options.finish_s
                        self._phase("generate", lambda: self._generate(deadline))
                        # The bound counts from the end of the budget: the
                        # last samples in flight, checked after it, use it too.
                        self._phase("finish", lambda: self._finish(
                            max(self._finish_by, time.monotonic() + _LAST_WAIT_S)))
                    except HarnessError as exc:
                        # A bug of ours (or a lost cluster) ends the campaign,
                        # never its summary of what was found so far.
                        self.report.harness_errors.append(
                            f"{self._phase_name} phase stopped: {_headline(exc)}")
                    finally:
                        self.report.workers_replaced = pool.replaced
                        self.report.busy_s, self.report.workers = pool.busy_s, pool.slots
                        if self.scheduler is not None:
                            self.report.allocation = self.scheduler.allocation()
                        self.report.localizations = self.triage.localizations
                        self.report.ablations = self.triage.ablations
            except Interrupted as stop:
                self.report.interrupted = stop.signum
        self.report.elapsed_s = time.monotonic() - start
        return self.report

    def _pool(self) -> Any:
        """The worker pool: local processes, or Ray actors with ``--ray``."""
        options = self.options
        if options.ray is None:
            return WorkerPool(options.workers, options.timeout_s, options.memory_mb,
                              cache_dir=options.cache_dir, cache_mb=options.cache_mb)
        from fuzz.workers.raypool import RayPool

        return RayPool(options.workers, options.timeout_s, options.memory_mb,
                       cache_dir=options.cache_dir, cache_mb=options.cache_mb,
                       address=options.ray, gpu_workers=options.ray_gpu_workers)

    def _phase(self, name: str, body: Callable[[], None]) -> None:
        self._phase_name = name
        if self._on_phase is not None:
            self._on_phase(name, self.report)
        began = time.monotonic()
        try:
            body()
        finally:
            self.report.phase_seconds[name] = self.report.phase_seconds.get(name, 0.0) \
                + time.monotonic() - began

    def _target(self, name: str) -> Target | None:
        """A target by name: this campaign's, the table's, or a FAKE one."""
        for target in self.targets:
            if target.name == name:
                return target
        try:
            return resolve_targets([name], self.table)[0]
        except ValueError:
            return None

    # -- replay -------------------------------------------------------------------
    def _replay(self) -> None:
        for entry in self.stored:
            record = self._replay_one(entry)
            self.report.replays.append(record)
            # A case that is not yet a bug report (shrinking cut short or never
            # run; a repro that does not reproduce) gets another turn here.
            if record.status != "still-failing":
                continue
            if (entry.shrink or {}).get("stopped") != "fixpoint":
                self.unshrunk.append(entry.bucket)
            if entry.repro_status != "reproduces":
                self._needs_report.add(entry.bucket)
                if entry.bucket not in self.unshrunk:
                    self._ready_for_report(entry.bucket)

    def _replay_one(self, entry: CorpusEntry) -> ReplayRecord:
        began = time.monotonic()
        target = self._target(entry.target)
        if target is None or not target.availability()[0]:
            return ReplayRecord(entry.bucket, entry.target, "skipped",
                                note=f"target {entry.target!r} is not available here")
        replay_targets = [target, *self._blame_witnesses(entry, target)]
        findings = self._run_sample(entry.sample, replay_targets, file=False)
        by_bucket = {f.bucket: f.key for f in findings}
        now = tuple(sorted(by_bucket))
        status = "still-failing" if entry.bucket in now else "moved" if now else "fixed"
        note = "" if entry.key_version == KEY_VERSION else \
            f"stored with bucket-key version {entry.key_version}, now {KEY_VERSION}"
        return ReplayRecord(entry.bucket, entry.target, status, now,
                            time.monotonic() - began, note, dict(self._last_timings),
                            tuple(by_bucket[b] for b in now))

    def reproduce(self, bucket: str) -> ReplayRecord:
        """Re-run one stored case through the engine (``dlrm-fuzz repro``)."""
        entry = corpus.load_entry(self.options.corpus_dir / bucket)
        return self.replay_entries([entry])[0][0]

    def replay_entries(self, entries: list[CorpusEntry], repeat: int = 1,
                       on_record: Callable[[CorpusEntry, list[ReplayRecord]], None] | None = None,
                       again: Callable[[CorpusEntry, ReplayRecord], bool] = lambda e, r: False,
                       ) -> list[list[ReplayRecord]]:
        """Re-run stored cases with one worker pool (``dlrm-fuzz replay``): each
        once, and ``repeat - 1`` more times when ``again(first run)`` says so
        (a case that seems fixed is re-run before anyone calls it fixed)."""
        runs: list[list[ReplayRecord]] = []
        with stop_signals(), self._pool() as pool:
            self.pool = pool
            self.triage = Triage(pool, self.options.tolerance)
            for entry in entries:
                records = [self._replay_one(entry)]
                if again(entry, records[0]):
                    records += [self._replay_one(entry) for _ in range(repeat - 1)]
                runs.append(records)
                if on_record is not None:
                    on_record(entry, records)
        return runs

    def check_samples(self, samples: list[Sample],
                      on_sample: Callable[[int, list[Finding]], None] | None = None
                      ) -> list[list[Finding]]:
        """Run given samples on every target and triage them, filing nothing
        (``dlrm-fuzz matrix``): the same buckets a campaign would give them."""
        found: list[list[Finding]] = []
        with stop_signals(), self._pool() as pool:
            self.pool = pool
            self.triage = Triage(pool, self.options.tolerance)
            for i, sample in enumerate(samples):
                found.append(self._run_sample(sample, self.targets, file=False))
                if on_sample is not None:
                    on_sample(i, found[-1])
        return found

    def _blame_witnesses(self, entry: CorpusEntry, target: Target) -> list[Target]:
        """A mismatch blamed on a shared lowering needs a second backend to be
        blamed the same way again: one other target it was seen on."""
        if entry.verdict is not Verdict.MISMATCH or entry.owner != target.lowering_owner:
            return []
        for name in entry.seen_on:
            other = self._target(name)
            if other is not None and other.name != target.name and \
                    other.owner("run") != target.owner("run") and other.availability()[0]:
                return [other]
        return []

    # -- generate -----------------------------------------------------------------
    def _generate(self, deadline: float) -> None:
        options = self.options

        self._generating_since = time.monotonic()

        def check(sample: Sample) -> None:
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            self.report.samples += 1
            if options.inline_weights:
                sample = dataclasses.replace(
                    sample, config=dataclasses.replace(sample.config, weights="inline"), draws=())
            self._dispatch(sample)
            # No barrier: the next sample's jobs are queued while this one's
            # slowest targets still run; wait only while every worker has work
            # (a follower waiting for its leader is no work yet).
            assert self.pool is not None
            if options.barrier:
                while self.pool.pending or self._flights:
                    self._drain()
            while self.pool.runnable > self.pool.slots:
                self._drain()
            self._bug_work(deadline)
            if options.max_samples is not None and self.report.samples >= options.max_samples:
                raise _BudgetSpent

        if options.max_samples != 0:
            try:  # rounds of Hypothesis runs: strategies/draw.py says why
                each_sample(options.seed, check,
                            round_size=min(ROUND, options.max_samples or ROUND),
                            focus=options.focus)
            except _BudgetSpent:
                pass
        if time.monotonic() >= deadline:
            self._cut_at_deadline()
        while self._flights:  # what is running when the budget ends is still checked
            self._drain()
        # A campaign of replay and shrinking only (or one that found its bugs
        # late) spends what is left of the budget on the buckets.
        self._bug_work(deadline, share=None)

    # -- samples in flight ----------------------------------------------------------
    def _dispatch(self, sample: Sample) -> None:
        """Queue a generated sample where the scheduler's plan sends it: the
        original, and repaired variants for the groups a known bug would stop
        early (``fuzz.engine.schedule``); every target without a scheduler."""
        plan = self.scheduler.plan(sample, self.targets) if self.scheduler \
            else [Planned(sample, list(self.targets))]
        self.report.coverage.add(sample, {})
        if not plan:  # (the scheduler never throws a sample away whole)
            self.report.unscheduled += 1
        for part in plan:
            flight = self._submit(part.sample, part.targets, index=self.report.samples)
            flight.partial = len(part.targets) < len(self.targets)
            flight.repairs = part.repairs
            self.report.repaired += bool(part.repairs)

    def _submit(self, sample: Sample, targets: list[Target], index: int | None) -> _InFlight:
        """Queue every job of one sample (references first); ``index``: a
        generated sample, to be filed when its last answer is in."""
        assert self.pool is not None
        ordered = dispatch_order(targets)
        flight = _InFlight(sample, ordered, index, [None] * (2 + len(ordered)))
        # A follower of a generated sample starts once its leader has cached
        # what they share: other samples keep the workers busy meanwhile. A
        # sample checked alone (replay, shrink, matrix, a confirm run) would
        # leave a worker idle instead, and the old engine shares nothing.
        wait = self.options.shared_import and index is not None
        follows = leaders(ordered) if wait else [None] * len(ordered)
        tickets: list[int] = []
        for position, target in enumerate(self.references + ordered):
            leader = follows[position - 2] if position >= 2 else None
            ticket = self.pool.submit((target, sample),
                                      after=None if leader is None else tickets[2 + leader])
            tickets.append(ticket)
            self._open[ticket] = (flight, position)
        flight.left = len(flight.answers)
        if index is not None:
            self._flights.append(flight)
        return flight

    def _cut_at_deadline(self) -> None:
        """Drop the generated samples' jobs that no worker has started: with
        every sample going to every target, the queue behind the running jobs
        holds a minute or more of compiles that would eat the finish phase.
        What already ran is judged on the targets that answered."""
        assert self.pool is not None
        queued = [ticket for ticket, (flight, _) in self._open.items() if flight.index is not None]
        dropped = self.pool.cancel(queued)
        self.report.cut_jobs += len(dropped)
        for ticket in dropped:
            flight, position = self._open.pop(ticket)
            flight.answers[position] = _CUT
            flight.left -= 1
            flight.cut = True

    def _take_answers(self, timeout: float | None = None) -> None:
        assert self.pool is not None
        for ticket, answer in self.pool.completed(timeout):
            if ticket in self._reports:
                self._report_answered(self._reports.pop(ticket), answer)
                continue
            flight, position = self._open.pop(ticket)
            flight.answers[position] = answer
            flight.left -= 1

    def _drain(self) -> None:
        """Take finished answers; triage and file every generated sample whose
        answers are all in, in the order the samples were made."""
        self._take_answers()
        ready = [flight for flight in self._flights if not flight.left]
        for flight in ready:
            self._flights.remove(flight)
            self._triage_or_report(flight)
            if self._on_progress is not None:
                self._on_progress(self.report)

    def _triage_or_report(self, flight: _InFlight) -> None:
        """A bug of ours while checking one generated sample is reported (exit
        status 3 at the end) and the campaign goes on with the next."""
        try:
            self._triage(flight, file=True)
        except HarnessError as exc:
            self.report.harness_errors.append(
                f"sample {flight.index} ({flight.sample.describe()}): {_headline(exc)}")

    def _run_sample(self, sample: Sample, targets: list[Target], file: bool) -> list[Finding]:
        """All targets on one sample, triaged now (replay, matrix, shrink);
        answers for generated samples in flight are kept for ``_drain``."""
        return self._triage(self._answered(self._submit(sample, targets, index=None)), file)

    def _answered(self, flight: _InFlight) -> _InFlight:
        """Wait for every answer of ``flight`` (others' answers are kept)."""
        while flight.left:
            self._take_answers()
        return flight

    def _triage(self, flight: _InFlight, file: bool) -> list[Finding]:
        """Judge one sample's answers, blame across targets, group by bucket;
        ``file``: count and store its findings."""
        assert self.triage is not None
        faults = [a for a in flight.answers if isinstance(a, HarnessFault)]
        if faults:
            raise HarnessError(str(faults[0]))
        if flight.cut and not self._trim_cut(flight):
            return []
        sample, ordered = flight.sample, flight.ordered
        reference, eager = flight.answers[0], flight.answers[1]
        results = {t.name: r for t, r in zip(ordered, flight.answers[2:])}
        self._last_timings = {name: dict(r.timings) for name, r in results.items()}
        try:
            outcomes = self.triage.outcomes(results, reference, eager, sample)
        except ReferenceFailed as exc:
            if exc.out_of_memory:  # too big for a worker's memory cap: skipped, no one's bug
                self.report.skipped.append(f"sample {flight.index} ({sample.describe()}): {exc}")
            else:
                self.report.harness_errors.append(f"{sample.describe()}: {exc}")
            return []
        judged = {t.name: t for t in ordered}
        if eager.target in outcomes:  # eager float32 itself failed: PyTorch's bug
            judged[eager.target] = self.references[1]
            results[eager.target] = eager
        witnesses = {} if flight.cut else self._witness_runs(sample, ordered, outcomes)
        for name, (witness, answer) in witnesses.items():
            judged[name], results[name] = witness, answer
            outcomes[name] = self.triage.outcomes({name: answer}, reference, eager, sample)[name]
        findings = self.triage.findings(sample, judged, results, outcomes)
        if witnesses:  # a witness tells blame apart; its own findings are not this campaign's
            findings = [f for f in findings if set(f.targets) - set(witnesses)]
            for name in witnesses:
                del results[name], outcomes[name]
        if not file:
            return findings
        if flight.cut:
            findings = self._witnessed(findings, flight)
        elif flight.partial and any(f.bucket not in self.known for f in findings):
            # Blame compares lowerings and backends: a bucket the corpus does
            # not know is only filed from a run on every target.
            self._count(results, outcomes)
            self.report.confirm_runs += 1
            full = self._submit(sample, self.targets, index=None)
            full.index = flight.index
            full.repairs = flight.repairs
            return self._triage(self._answered(full), file=True)
        if sample.draws:
            self._check_draws(flight, reference, eager, results, outcomes)
        known_before = set(self.known)
        self.report.coverage.add(sample, outcomes, generated=flight.index is None)
        self._count(results, outcomes)
        findings = [self._confirmed(f, sample)
                    if f.verdict is Verdict.MISMATCH and f.bucket not in self.known else f
                    for f in findings]
        for finding in findings:
            finding.sample_index = flight.index if flight.index is not None else self.report.samples
            self.report.first_found_s.setdefault(finding.bucket,
                                                 round(time.monotonic() - self._started, 1))
            self._file(finding, sample, flight.repairs)
            self.report.findings.append(finding)
            if self._on_finding is not None:
                self._on_finding(finding, self.report)
        if self.scheduler is not None:
            self.scheduler.record(sample, ordered, {name: f.bucket for f in findings
                                                    for name in f.targets}, known_before)
        return findings

    def _witness_runs(self, sample: Sample, ran: list[Target],
                      outcomes: dict[str, Any]) -> dict[str, tuple[Target, Any]]:
        """A wrong answer is blamed on its lowering when another backend of
        that lowering computes the same wrong numbers, else on its backend:
        which one depends on whether such a witness ran. So a wrong answer
        with no other backend of its lowering among the targets that ran gets
        one from the table (same program first), run here, and its bucket is
        the one a campaign on every target would give it."""
        chosen: dict[str, tuple[Target, Any]] = {}
        for target in ran:
            outcome = outcomes.get(target.name)
            if outcome is None or outcome.verdict is not Verdict.MISMATCH:
                continue
            siblings = [t for t in [*ran, *(w for w, _ in chosen.values())]
                        if t.lowering_owner == target.lowering_owner
                        and t.owner("run") != target.owner("run")]
            if siblings:
                continue
            witness = self._witness_for(target)
            if witness is not None:
                chosen[witness.name] = (witness, None)
        if not chosen:
            return {}
        assert self.pool is not None
        answers = self.pool.run([(w, sample) for w, _ in chosen.values()], faults=True)
        self.report.witness_runs += len(answers)
        return {name: (witness, answer) for (name, (witness, _)), answer
                in zip(chosen.items(), answers) if not isinstance(answer, HarnessFault)}

    def _witness_for(self, target: Target) -> Target | None:
        """Another backend of ``target``'s lowering, available here: one that
        compiles the same program (shape mode) first, the lowering project's
        own executor (refbackend for torch-mlir's) before others, then in the
        table's order."""
        if target.name not in self._witnesses:
            project = target.lowering_owner.split(":", 1)[0] + ":"
            others = [t for t in self.table.values()
                      if t.lowering_owner == target.lowering_owner
                      and t.owner("run") != target.owner("run") and t.availability()[0]]
            others.sort(key=lambda t: (t.program_group != target.program_group,
                                       not t.owner("run").startswith(project)))
            self._witnesses[target.name] = others[0] if others else None
        return self._witnesses[target.name]

    def _trim_cut(self, flight: _InFlight) -> bool:
        """Keep the targets of a cut sample that answered; False when a
        reference or every target was dropped (nothing to judge)."""
        answers = flight.answers
        kept = [(t, a) for t, a in zip(flight.ordered, answers[2:]) if a is not _CUT]
        if answers[0] is _CUT or answers[1] is _CUT or not kept:
            self.report.cut_samples += 1
            return False
        flight.ordered = [t for t, _ in kept]
        flight.answers = answers[:2] + [a for _, a in kept]
        return True

    def _witnessed(self, findings: list[Finding], flight: _InFlight) -> list[Finding]:
        """A cut sample's findings that may be filed: an error's bucket does
        not depend on which targets ran (KEY_VERSION 4), a wrong answer's
        blame does; a new wrong answer seen on part of the targets is noted,
        not filed (the next campaign checks it on every target)."""
        kept = []
        for finding in findings:
            if finding.bucket not in self.known and \
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
        from oracles.blame import same_wrong_answer
        from oracles.signature import bucket_for, flaky_key

        target = self._target(finding.target)
        assert target is not None and self.pool is not None
        (again,) = self.pool.run([(target, sample)], faults=True)
        self.report.confirm_reruns += 1
        outputs = getattr(again, "outputs", None)
        if getattr(again, "failure", None) is not None or outputs is None or \
                same_wrong_answer(finding.result.outputs, outputs):
            return finding
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

    def _check_draws(self, flight: _InFlight, reference: Any, eager: Any,
                     results: dict[str, Any], outcomes: dict[str, Any]) -> None:
        """Judge the extra weight draws each target ran on its one artifact;
        the first draw that fails where the sample's own seed passed becomes a
        sample of its own (re-seeded), checked and filed like any other."""
        assert self.triage is not None
        for seed in flight.sample.draws:
            drawn = {name: dataclasses.replace(r, outputs=r.draws[seed], draws={})
                     for name, r in results.items() if seed in r.draws}
            if not drawn or seed not in reference.draws or seed not in eager.draws:
                continue
            self.report.draws_checked += 1
            # The measured rounding spread belongs to the sample's own weights:
            # a draw is judged with the a-priori bound instead (looser, never stricter).
            judged = self.triage.outcomes(
                drawn, dataclasses.replace(reference, outputs=reference.draws[seed], roundings=[]),
                dataclasses.replace(eager, outputs=eager.draws[seed]), flight.sample)
            if any(o.verdict is not Verdict.PASS and outcomes[name].verdict is Verdict.PASS
                   for name, o in judged.items() if name in outcomes):
                self.report.draws_reseeded += 1
                self._submit(flight.sample.reseeded(seed), self.targets, index=flight.index)
                return

    def _count(self, results: dict[str, Any], outcomes: dict[str, Any]) -> None:
        """A sample's work into the report: compiles, stage seconds, verdicts."""
        for name, result in results.items():
            self.report.configs_compiled += result.compiles
            for stage, seconds in result.timings.items():
                self.report.stage_seconds[stage] = self.report.stage_seconds.get(stage, 0.0) \
                    + seconds
            self.report.outcomes[(name, outcomes[name].verdict.value)] += 1
            self.report.batches_checked += sum(out is not None for out in result.outputs)

    def _file(self, finding: Finding, sample: Sample, repairs: tuple[str, ...] = ()) -> None:
        from fuzz.triage.edits import size_key

        root = self.options.corpus_dir
        outcome = finding.outcome
        entry = CorpusEntry(
            bucket=finding.bucket, signature=finding.key, verdict=finding.verdict,
            owner=finding.owner, target=finding.target, sample=sample, stage=outcome.stage,
            error=outcome.error, op=outcome.op, culprit=finding.culprit,
            localization=finding.localization, numbers=outcome.numbers,
            timings=outcome.timings, seen_on=finding.targets, features=tuple(sample.features()),
            campaign_seed=self.options.seed, detail=outcome.detail, texts=finding.result.texts,
            repairs=repairs)
        finding.path = root / finding.bucket
        with deferred():  # a stop signal waits until the entry is whole
            if finding.bucket in self.known:
                corpus.record_seen(root, finding.bucket, finding.targets)
                size = size_key(sample)
                if size < self._stored_size(finding.bucket) and \
                        corpus.replace_if_smaller(root, entry, size_key):
                    self._sizes[finding.bucket] = size
                    # The new case needs its own repro, tool files and REPORT.md;
                    # one minimal as one op must be found so again (its record
                    # went with the old case).
                    self._needs_report.add(finding.bucket)
                    if any(r.bucket == finding.bucket and r.record.get("stopped") == "single-op"
                           for r in self.report.shrinks):
                        self._op_first.add(finding.bucket)
                    if finding.bucket not in self.unshrunk:
                        self._ready_for_report(finding.bucket)
                return
            path = corpus.save(root, entry)
            self.known.add(finding.bucket)
            finding.new = path is not None
            if finding.new:
                self._sizes[finding.bucket] = size_key(sample)
                self._needs_report.add(finding.bucket)
                if self.options.shrink and self.options.report and has_single_op_form(entry):
                    # The single op is the minimal case when it fails the same
                    # way: its report comes first, shrinking only if it does not.
                    self._op_first.add(finding.bucket)
                    self._ready_for_report(finding.bucket)
                elif self.options.shrink:
                    self.unshrunk.append(finding.bucket)
                else:
                    self._ready_for_report(finding.bucket)

    def _stored_size(self, bucket: str) -> tuple[int, ...]:
        from fuzz.triage.edits import size_key

        if bucket not in self._sizes:
            try:
                self._sizes[bucket] = size_key(
                    corpus.load_entry(self.options.corpus_dir / bucket).sample)
            except (OSError, ValueError, KeyError, TypeError):
                self._sizes[bucket] = ()  # junk: never replaced by us
        return self._sizes[bucket]

    # -- bug work: shrinking and reports beside generation ------------------------
    def _bug_work(self, deadline: float, share: float | None = -1.0) -> None:
        """Turn new buckets into bug reports while the campaign goes on: shrink
        the oldest unshrunk bucket (one turn of at most ``shrink_budget_s``)
        while shrinking has used less than ``share`` of the time generation
        has run (None: any time left before ``deadline``), then queue its
        report as a pool job beside the generated samples' jobs. A user who
        stops at any time has the smallest cases so far, most of them filed."""
        share = self.options.shrink_share if share == -1.0 else share
        self._queue_reports()
        while self.options.shrink and self.unshrunk:
            now = time.monotonic()
            before_reports = self._finish_by - now - self._report_reserve_s()
            if before_reports < _MIN_SHRINK_S:
                # What is left of the campaign is the reports': every bucket
                # still waiting for shrinking is reported as it is now.
                self._report_unshrunk("budget kept for the reports")
                return
            left = min(deadline - now, before_reports)
            if left < _MIN_SHRINK_S:  # the finish phase goes on with it
                return
            if (
                    share is not None and self.report.shrink_s > share * (now - self._generating_since)):
                return
            bucket = self._next_to_shrink()
            spent = self._shrink_spent.get(bucket, 0.0)
            turn = min(_SHRINK_TURN_S, self.options.shrink_budget_s - spent, left)
            record = self._shrink_one(bucket, turn)
            took = time.monotonic() - now
            self.report.shrink_s += took
            self._shrink_spent[bucket] = spent + took
            self._note_shrink(record)
            if record.record.get("stopped") == "budget" and \
                    self._shrink_spent[bucket] + _MIN_SHRINK_S < self.options.shrink_budget_s:
                self.unshrunk.append(bucket)  # another turn, after the others had theirs
                continue
            if record.replaced:
                self._needs_report.add(bucket)
            self._ready_for_report(bucket)
            self._queue_reports()

    def _report_reserve_s(self) -> float:
        """Wall seconds the reports not yet written will take (measured: a
        report job is ~13 worker-seconds), so they end inside the budget."""
        unreported = self._needs_report | set(self.unshrunk)
        each = statistics.fmean(self._report_costs) if self._report_costs else _REPORT_S
        return each * len(unreported) / max(1, getattr(self.pool, "slots", 1))

    def _report_unshrunk(self, why: str) -> None:
        for bucket in self.unshrunk:
            self._note_shrink(ShrinkRecord(bucket, "", {"skipped": why}, False))
            self._ready_for_report(bucket)
        self.unshrunk.clear()
        self._queue_reports()

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

    def _note_shrink(self, record: ShrinkRecord) -> None:
        """One row per bucket in the report: a later turn continues the first."""
        earlier = [r for r in self.report.shrinks if r.bucket == record.bucket]
        if earlier and "skipped" not in record.record:
            record = dataclasses.replace(record, replaced=record.replaced
                                         or any(r.replaced for r in earlier))
        elif earlier:
            return
        self.report.shrinks = [r for r in self.report.shrinks if r.bucket != record.bucket] \
            + [record]

    def _ready_for_report(self, bucket: str) -> None:
        if bucket in self._needs_report and bucket not in self._to_report:
            self._to_report.append(bucket)

    def _queue_reports(self) -> None:
        """Submit the report jobs of buckets whose case is final for now; a
        bucket whose report is running gets another once it is in."""
        from fuzz.reports.bugreport import BugReportJob

        if not self.options.report:
            self._to_report.clear()
            return
        assert self.pool is not None
        running = set(self._reports.values())
        for bucket in self._to_report:
            if bucket in running:
                self._stale_reports.add(bucket)
                continue
            job = BugReportJob(str(self.options.corpus_dir / bucket), self.options.table)
            self._reports[self.pool.submit(job)] = bucket
        self._to_report.clear()

    def _report_answered(self, bucket: str, answer: Any) -> None:
        from fuzz.reports.bugreport import file_bug_report

        if isinstance(answer, dict) and "seconds" in answer:
            self._report_costs.append(float(answer["seconds"]))
        if isinstance(answer, HarnessFault):  # a bug of ours: this bucket's report only
            last = answer.traceback.strip().splitlines()[-1]
            self.report.harness_errors.append(f"report of {bucket}: {last}")
            answer = f"bug in dlrm-fuzz: {last}"
        with deferred():
            self.report.repro_status[bucket] = file_bug_report(self.options.corpus_dir, bucket,
                                                               answer)
        self._needs_report.discard(bucket)
        if bucket in self._op_first and bucket not in self._stale_reports:
            self._op_first.discard(bucket)
            self._after_single_op(bucket, answer, self.report.repro_status[bucket])
        if bucket in self._stale_reports:  # its case changed while the report ran
            self._stale_reports.discard(bucket)
            self._needs_report.add(bucket)
            self._ready_for_report(bucket)
            self._queue_reports()

    def _after_single_op(self, bucket: str, answer: Any, status: str) -> None:
        """An op-level bucket's first report is in: a single-op repro that
        reproduces is the minimal case (recorded as the bucket's shrink, so
        the bucket is actionable); any other form sends it to shrinking."""
        repro = answer.get("repro", {}) if isinstance(answer, dict) else {}
        if status != "reproduces" or repro.get("kind") not in SINGLE_OP_FORMS:
            self.unshrunk.append(bucket)
            return
        from fuzz.triage.edits import sample_size

        entry = corpus.load_entry(self.options.corpus_dir / bucket)
        record: dict[str, object] = {
            "stopped": "single-op", "form": repro.get("kind"),
            "op": entry.culprit or entry.op or "", "steps_tried": 0, "steps_accepted": 0,
            "seconds": 0.0, "size_before": dict(sample_size(entry.sample))}
        self._note_shrink(ShrinkRecord(bucket, entry.target, record, False))
        with deferred():
            corpus.update_case(self.options.corpus_dir, bucket, shrink=record)

    def _finish(self, until: float) -> None:
        """After the budget: buckets still waiting for shrinking are reported
        as they are (the next campaign's replay shrinks them), and the reports
        in flight are waited for until ``until``; a bucket whose report is not
        in by then is unconfirmed (summary), never presented as ready."""
        if until != float("inf"):  # what the bounded finish has room for is still shrunk
            self._bug_work(until, share=None)
        self._report_unshrunk("budget spent")
        running = set(self._reports.values())
        for bucket in sorted(self._needs_report - running):  # in flight: written already
            self._ready_for_report(bucket)
        self._queue_reports()
        while self._reports and time.monotonic() < until:
            self._take_answers(timeout=max(0.0, until - time.monotonic()))
            if self.unshrunk:  # a one-op report that did not reproduce: shrink it now
                self._bug_work(until, share=None)
        # Buckets sent to shrinking by a report that came in too late for it.
        self._report_unshrunk("budget spent")
        for bucket in self._reports.values():
            self.report.repro_status[bucket] = "not written: the campaign ended first"

    def _write_reports(self) -> None:
        """Every pending report now, waiting for all (a caller outside a
        campaign's phases: tests, the repro of a replaced case)."""
        self._finish(until=float("inf"))

    def _shrink_one(self, bucket: str, budget_s: float) -> ShrinkRecord:
        from fuzz.triage.edits import size_key
        from fuzz.triage.shrink import StepRejected, shrink

        assert self.triage is not None
        triage = self.triage
        root = self.options.corpus_dir
        entry = corpus.load_entry(root / bucket)
        target = self._target(entry.target)
        if target is None:
            return ShrinkRecord(bucket, entry.target, {"skipped": "target unknown here"}, False)
        method = (entry.culprit or "").split(":", 1)[0] or None
        try:
            wanted = triage.solo_key(target, entry.sample, method)
        except CandidateRejected as rejected:
            return ShrinkRecord(bucket, target.name, {
                "skipped": f"the stored case cannot be checked alone: {rejected}"}, False)
        if wanted is None:
            return ShrinkRecord(bucket, target.name, {
                "skipped": "the stored case does not fail on its target alone"}, False)

        def same_bucket(candidate: Sample) -> bool:
            if not is_error:
                return triage.solo_key(target, candidate, method) == wanted
            # An error needs only the target's own job, and the references
            # only for a candidate that kept the error.
            return triage.solo_error_key(target, candidate) == wanted and \
                triage.references_accept(candidate)

        def same_bucket_many(candidates: list[Sample]) -> list[bool | StepRejected]:
            """Error candidates side by side, one worker each; only the first
            that keeps the error is checked against the references (the
            reducer takes the first that holds)."""
            judged: list[bool | StepRejected] = []
            for candidate, key in zip(candidates, triage.solo_error_keys(target, candidates)):
                if isinstance(key, CandidateRejected) or key != wanted or True in judged:
                    judged.append(key if isinstance(key, CandidateRejected) else False)
                    continue
                try:
                    judged.append(triage.references_accept(candidate))
                except CandidateRejected as rejected:
                    judged.append(rejected)
            return judged

        is_error = entry.verdict not in (Verdict.MISMATCH, Verdict.FLAKY)
        result = shrink(entry.sample, same_bucket, budget_s,
                        many=same_bucket_many if is_error else None,
                        width=max(1, getattr(self.pool, "slots", 1)),
                        region=self.options.focus)
        record = _merged(entry.shrink, result.to_dict())
        if size_key(result.sample) >= size_key(entry.sample):
            return ShrinkRecord(bucket, target.name, record, False)
        # The stored evidence (error line, numbers, programs) must be the shrunk case's.
        try:
            _, outcome, got = triage.solo_verdict(target, result.sample)
        except CandidateRejected:
            return ShrinkRecord(bucket, target.name, record, False)
        if outcome is None or got is None:
            return ShrinkRecord(bucket, target.name, record, False)
        shrunk = dataclasses.replace(
            entry, sample=result.sample, shrink=record, features=tuple(result.sample.features()),
            error=outcome.error, op=outcome.op, numbers=outcome.numbers,
            timings=outcome.timings, detail=outcome.detail or entry.detail, texts=got.texts)
        with deferred():
            replaced = corpus.replace_if_smaller(root, shrunk, size_key)
        return ShrinkRecord(bucket, target.name, record, replaced)


def _merged(before: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    """A case shrunk again continues its record: sizes from the very first
    case, steps and seconds summed over every pass."""
    if not before or "size_before" not in before:
        return now
    merged = dict(now, size_before=before["size_before"],
                  passes=int(before.get("passes", 1)) + 1)
    for counter in ("steps_tried", "steps_accepted", "steps_rejected", "seconds"):
        merged[counter] = before.get(counter, 0) + now.get(counter, 0)
    return merged


def run_campaign(options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None) -> CampaignReport:
    """Run a whole campaign (all phases the options enable) and return its report."""
    return Campaign(options, on_finding, on_start).run()

"""A fuzzing campaign as an engine with phases, in the order Hypothesis' own
engine runs them: **replay** every stored case (still failing in its bucket,
fixed, or moved to another bucket), **generate** new samples until the budget
is spent, every sample to every target, then **finish** the bug work that is
left, bounded. This module holds the phases and the samples in flight:
dispatch, answers and triage; filing a finding in the corpus is
``fuzz.engine.ledger``, the bug work beside generation (shrinking, reports,
one op first) is ``fuzz.engine.bugwork``, and what a campaign is told and
reports is ``fuzz.engine.records``.

Hypothesis drives generation (seeded, so a campaign is reproducible from its
``--seed``); the budget ends that loop through an exception Hypothesis does
not take for a failing example. SIGINT / SIGTERM end any phase cleanly
(``fuzz.engine.interrupt``): the report so far is returned, workers are
reaped, and corpus writes are never cut in half.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fuzz.store import corpus
from fuzz.engine.coverage import Coverage
from fuzz.store.corpus import CorpusEntry
from fuzz.engine.interrupt import Interrupted, stop_signals
from fuzz.model.sample import Sample
from fuzz.engine.schedule import Planned, Scheduler
from fuzz.targets.catalog import (EAGER, REFERENCE, TARGETS, Target, available_targets,
                          resolve_targets)
from fuzz.triage.findings import Finding, Triage
from fuzz.workers.interface import HarnessError, HarnessFault, Pool
from fuzz.workers.pool import WorkerPool
from fuzz.engine.bugwork import BugWork
from fuzz.engine.ledger import Ledger
from fuzz.engine.records import (CampaignOptions, CampaignReport, Observed, Phase, ReplayRecord,
                                 ShrinkRecord)
from oracles import KEY_VERSION, ReferenceFailed, TargetResult, Verdict
from strategies.draw import ROUND, each_sample

__all__ = ["CampaignOptions", "CampaignReport", "Campaign", "Finding", "ReplayRecord",
           "ShrinkRecord", "run_campaign", "dispatch_order", "leaders", "PHASES"]

PHASES = ("replay", "generate", "finish")
# The finish phase waits at least this long for the reports in flight.
_LAST_WAIT_S = 10.0


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
                 on_phase: Callable[[Phase, CampaignReport], None] | None = None,
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
        self.references = resolve_targets([REFERENCE, EAGER])
        self.report = CampaignReport(targets=[t.name for t in self.targets],
                                     coverage=Coverage(focus=options.focus))
        # The corpus folder as this campaign knows it: stored buckets, case sizes, filing.
        self.ledger = Ledger(options.corpus_dir)
        self._on_finding = on_finding
        self._on_start = on_start
        self._on_phase = on_phase
        self._on_progress = on_progress
        self._started = time.monotonic()
        self.pool: Pool | None = None  # a WorkerPool, or a RayPool with --ray
        self._last_timings: dict[str, dict[str, float]] = {}
        self.triage: Triage | None = None
        # Samples in flight: each job's ticket -> (its sample, its position);
        # generated samples waiting to be triaged, oldest first.
        self._open: dict[int, tuple[_InFlight, int]] = {}
        self._flights: list[_InFlight] = []
        self._phase_name = Phase.START
        self.scheduler = Scheduler(seed=options.seed) if options.schedule else None
        # Shrinking and bug reports beside generation (fuzz/engine/bugwork.py).
        self.bugs = BugWork(options, self.report, pool=lambda: self.pool, triage=lambda: self.triage,
                            target=lambda name: self._target(name),
                            take_answers=lambda timeout: self._take_answers(timeout))
        self._witnesses: dict[str, Target | None] = {}  # target -> its blame witness

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
                            self._phase(Phase.REPLAY, self._replay)
                        # Shrinking may use the finish phase too, less
                        # what the reports not yet written will need.
                        self.bugs.finish_by = deadline + options.finish_s
                        self._phase(Phase.GENERATE, lambda: self._generate(deadline))
                        # The bound counts from the end of the budget: the
                        # last samples in flight, checked after it, use it too.
                        self._phase(Phase.FINISH, lambda: self.bugs.finish(
                            max(self.bugs.finish_by, time.monotonic() + _LAST_WAIT_S)))
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
        for entry in self.ledger.stored:
            record = self._replay_one(entry)
            self.report.replays.append(record)
            # A case that is not yet a bug report (shrinking cut short or never
            # run; a repro that does not reproduce) gets another turn here.
            if record.status is not Observed.STILL_FAILING:
                continue
            if (entry.shrink or {}).get("stopped") != "fixpoint":
                self.bugs.unshrunk.append(entry.bucket)
            if entry.repro_status != "reproduces":
                self.bugs.needs_report.add(entry.bucket)
                if entry.bucket not in self.bugs.unshrunk:
                    self.bugs.ready_for_report(entry.bucket)

    def _replay_one(self, entry: CorpusEntry) -> ReplayRecord:
        began = time.monotonic()
        target = self._target(entry.target)
        if target is None or not target.availability()[0]:
            return ReplayRecord(entry.bucket, entry.target, Observed.SKIPPED,
                                note=f"target {entry.target!r} is not available here")
        replay_targets = [target, *self._blame_witnesses(entry, target)]
        findings = self._run_sample(entry.sample, replay_targets, file=False)
        by_bucket = {f.bucket: f.key for f in findings}
        now = tuple(sorted(by_bucket))
        status = Observed.STILL_FAILING if entry.bucket in now else Observed.MOVED if now else Observed.FIXED
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

        self.bugs.generating_since = time.monotonic()

        def check(sample: Sample) -> None:
            if time.monotonic() >= deadline:
                raise _BudgetSpent
            self.report.samples += 1
            self._dispatch(sample)
            # No barrier: the next sample's jobs are queued while this one's
            # slowest targets still run; wait only while every worker has work
            # (a follower waiting for its leader is no work yet).
            assert self.pool is not None
            while self.pool.runnable > self.pool.slots:
                self._drain()
            self.bugs.work(deadline)
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
        self.bugs.work(deadline, share=None)

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
        # leave a worker idle instead.
        follows = leaders(ordered) if index is not None else [None] * len(ordered)
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
            if ticket in self.bugs.report_jobs:
                self.bugs.report_answered(self.bugs.report_jobs.pop(ticket), answer)
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
        elif flight.partial and any(f.bucket not in self.ledger.known for f in findings):
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
        known_before = set(self.ledger.known)
        self.report.coverage.add(sample, outcomes, generated=flight.index is None)
        self._count(results, outcomes)
        findings = [self._confirmed(f, sample)
                    if f.verdict is Verdict.MISMATCH and f.bucket not in self.ledger.known else f
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
        from oracles.blame import same_wrong_answer
        from oracles.signature import bucket_for, flaky_key

        target = self._target(finding.target)
        assert target is not None and self.pool is not None
        (again,) = self.pool.run([(target, sample)], faults=True)
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
        """Store a finding (``fuzz.engine.ledger``) and give a new or smaller case to the bug work."""
        filed, entry = self.ledger.file(finding, sample, self.options.seed, repairs)
        if filed == "new":
            self.bugs.new_case(finding.bucket, entry)
        elif filed == "replaced":
            self.bugs.case_replaced(finding.bucket)


def run_campaign(options: CampaignOptions,
                 on_finding: Callable[[Finding, CampaignReport], None] | None = None,
                 on_start: Callable[[list[Target]], None] | None = None) -> CampaignReport:
    """Run a whole campaign (all phases the options enable) and return its report."""
    return Campaign(options, on_finding, on_start).run()

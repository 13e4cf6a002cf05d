"""One run of the engine's machinery, whoever drives it: the worker pool
(local processes, or Ray actors with ``--ray``), the targets and the two
references, the jobs of the samples in flight and their answers, and judging
a sample across targets (triage, blame witnesses) into findings. A campaign
runs its phases on one; replay, the support matrix and ``dlrm-fuzz repro``
use one directly, so every road to a verdict is the campaign's. Filing a
finding is not the session's job (``fuzz.engine.filing``): a session tells
what a sample does on its targets, and nothing it does writes the corpus.

A session is a context manager: it opens its pool (stop signals turned into
``Interrupted`` meanwhile) and closes it on the way out, whatever the body
raised.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable

from fuzz.engine.coverage import Coverage
from fuzz.engine.dispatch import CUT, InFlight, dispatch_order, leaders
from fuzz.engine.interrupt import stop_signals
from fuzz.engine.records import CampaignOptions, CampaignReport, Observed, ReplayRecord
from fuzz.engine.witnesses import Witnesses, replay_witnesses
from fuzz.model.sample import Sample
from fuzz.store import corpus
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import (EAGER, REFERENCE, TARGETS, Target, available_targets,
                                  expand_groups, resolve_targets)
from fuzz.triage.findings import Finding, Triage
from fuzz.workers.interface import HarnessError, HarnessFault, Pool
from fuzz.workers.pool import WorkerPool
from fuzz.workers.raypool import RayPool, check_gpu_workers, needs_gpu
from oracles import KEY_VERSION, ReferenceFailed

__all__ = ["Judged", "Session", "headline"]


def headline(error: object) -> str:
    """A bug of ours in one line: its first line (what was running) and,
    for a traceback, its last (the exception)."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    return lines[0] + (f" ... {lines[-1]}" if len(lines) > 1 else "")


@dataclass
class Judged:
    """One sample judged across its targets: the findings, and the answers and
    verdicts they came from (what a campaign counts and files them with)."""

    findings: list[Finding]
    results: dict[str, Any]
    outcomes: dict[str, Any]
    reference: Any
    eager: Any


def _no_one_waits(ticket: int, answer: Any) -> None:
    raise HarnessError(f"an answer to job {ticket} that nothing waits for: {answer!r:.200}")


class Session:
    """The pool, targets and references one run shares, and a sample's way
    through them: dispatch, answers, judging. Targets are checked (and may
    raise) in the constructor, before any worker starts."""

    def __init__(self, options: CampaignOptions,
                 elsewhere: Callable[[int, Any], None] = _no_one_waits) -> None:
        self.options = options
        self.table = options.table if options.table is not None else TARGETS
        self.targets = _resolved_targets(options, self.table)
        self.references = resolve_targets([REFERENCE, EAGER])
        self.report = CampaignReport(targets=[t.name for t in self.targets],
                                     coverage=Coverage(focus=options.focus))
        self.pool: Pool | None = None  # a WorkerPool, or a RayPool with --ray
        self.triage: Triage | None = None
        # Every job's ticket -> (its sample, its position); generated samples
        # (those with an index) waiting to be filed, oldest first.
        self._open: dict[int, tuple[InFlight, int]] = {}
        # Running jobs no sample waits for any more (``cut_running``): their
        # answers are dropped when they come.
        self._abandoned: set[int] = set()
        self.waiting: list[InFlight] = []
        # Answers to jobs that are no sample's (a campaign's report jobs).
        self.elsewhere = elsewhere
        self.witnesses = Witnesses(self.table)
        self.last_timings: dict[str, dict[str, float]] = {}  # of the last sample judged
        self._closing: contextlib.ExitStack | None = None

    # -- the pool ---------------------------------------------------------------
    def open_pool(self, reserved: int = 0) -> WorkerPool | RayPool:
        """A new worker pool: local processes, or Ray actors with ``--ray``.
        ``reserved``: local workers held for urgent jobs (bug work) beside
        ``options.workers`` (a Ray pool has none: its actors are many)."""
        options = self.options
        if options.ray is None:
            return WorkerPool(options.workers, options.timeout_s, options.memory_mb,
                              cache_dir=options.cache_dir, cache_mb=options.cache_mb,
                              reserved=reserved)
        return RayPool(options.workers, options.timeout_s, options.memory_mb,
                       cache_dir=options.cache_dir, cache_mb=options.cache_mb,
                       address=options.ray, gpu_workers=options.ray_gpu_workers)

    def reserved_workers(self) -> int:
        """Local workers held for bug work (``--bug-workers``), when there is bug work."""
        options = self.options
        return options.bug_workers if options.shrink or options.report else 0

    def attach(self, pool: Pool) -> None:
        """Run on ``pool`` (one the caller holds), with a triage over it."""
        self.pool, self.triage = pool, Triage(pool, self.options.tolerance)

    def __enter__(self) -> Session:
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(stop_signals())
            self.attach(stack.enter_context(self.open_pool(reserved=self.reserved_workers())))
        except BaseException:
            stack.close()
            raise
        self._closing = stack
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        closing, self._closing = self._closing, None
        if closing is not None:
            closing.__exit__(kind, error, trace)

    def target(self, name: str) -> Target | None:
        """A target by name: this session's, the table's, or a FAKE one."""
        for target in self.targets:
            if target.name == name:
                return target
        try:
            return resolve_targets([name], self.table)[0]
        except ValueError:
            return None

    # -- samples in flight ----------------------------------------------------------
    def submit(self, sample: Sample, targets: list[Target], index: int | None = None) -> InFlight:
        """Queue every job of one sample (references first); ``index``: a
        generated sample, kept in ``waiting`` until its last answer is in."""
        assert self.pool is not None
        ordered = dispatch_order(targets)
        flight = InFlight(sample, ordered, index, [None] * (2 + len(ordered)))
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
            self.waiting.append(flight)
        return flight

    def take_answers(self, timeout: float | None = None) -> None:
        """Take the pool's finished answers into their samples (waits up to ``timeout``)."""
        assert self.pool is not None
        for ticket, answer in self.pool.completed(timeout):
            if ticket in self._abandoned:
                self._abandoned.discard(ticket)
                continue
            if ticket not in self._open:
                self.elsewhere(ticket, answer)
                continue
            flight, position = self._open.pop(ticket)
            flight.answers[position] = answer
            flight.left -= 1

    def answered(self, flight: InFlight) -> InFlight:
        """Wait for every answer of ``flight`` (others' answers are kept)."""
        while flight.left:
            self.take_answers()
        return flight

    def cut_queued(self) -> None:
        """Drop the generated samples' jobs that no worker has started: with
        every sample going to every target, the queue behind the running jobs
        holds a minute or more of compiles that would eat the finish phase.
        What already ran is judged on the targets that answered."""
        assert self.pool is not None
        queued = [ticket for ticket, (flight, _) in self._open.items() if flight.index is not None]
        dropped = self.pool.cancel(queued)
        self.report.cut_jobs += len(dropped)
        for ticket in dropped:
            self._cut(ticket)

    def cut_running(self) -> None:
        """Stop waiting for the generated samples' jobs that still run some
        time after the budget ended (a compile may take its whole job
        timeout): their samples are judged on the targets that answered, the
        workers finish them and their answers are dropped."""
        running = [ticket for ticket, (flight, _) in self._open.items() if flight.index is not None]
        self.report.cut_running += len(running)
        self._abandoned.update(running)
        for ticket in running:
            self._cut(ticket)

    def _cut(self, ticket: int) -> None:
        flight, position = self._open.pop(ticket)
        flight.answers[position] = CUT
        flight.left -= 1
        flight.cut = True

    # -- judging ----------------------------------------------------------------------
    def run_sample(self, sample: Sample, targets: list[Target]) -> list[Finding]:
        """All ``targets`` on one sample, judged now (replay, matrix); answers
        for generated samples in flight are kept for their turn."""
        judged = self.judge(self.answered(self.submit(sample, targets)))
        return judged.findings if judged is not None else []

    def judge(self, flight: InFlight) -> Judged | None:
        """Judge one sample's answers, blame across targets (running a witness
        where blame needs one), group by bucket; None: nothing to judge (its
        references failed, or were cut)."""
        assert self.triage is not None
        faults = [a for a in flight.answers if isinstance(a, HarnessFault)]
        if faults:
            raise HarnessError(str(faults[0]))
        if flight.cut and not self._trim_cut(flight):
            return None
        sample, ordered = flight.sample, flight.ordered
        reference, eager = flight.answers[0], flight.answers[1]
        results = {t.name: r for t, r in zip(ordered, flight.answers[2:])}
        self.last_timings = {name: dict(r.timings) for name, r in results.items()}
        try:
            outcomes = self.triage.outcomes(results, reference, eager, sample)
        except ReferenceFailed as exc:
            if exc.out_of_memory:  # too big for a worker's memory cap: skipped, no one's bug
                self.report.skipped.append(f"sample {flight.index} ({sample.describe()}): {exc}")
            else:
                self.report.harness_errors.append(f"{sample.describe()}: {exc}")
            return None
        judged = {t.name: t for t in ordered}
        if eager.target in outcomes:  # eager float32 itself failed: PyTorch's bug
            judged[eager.target] = self.references[1]
            results[eager.target] = eager
        witnesses = {} if flight.cut else self._witness_runs(sample, ordered, outcomes)
        for name, (witness, answer) in witnesses.items():
            judged[name], results[name] = witness, answer
            outcomes[name] = self.triage.outcomes({name: answer}, reference, eager, sample)[name]
        findings = self.triage.findings(sample, judged, results, outcomes)
        if witnesses:  # a witness tells blame apart; its own findings are not this run's
            findings = [f for f in findings if set(f.targets) - set(witnesses)]
            for name in witnesses:
                del results[name], outcomes[name]
        return Judged(findings, results, outcomes, reference, eager)

    def _witness_runs(self, sample: Sample, ran: list[Target],
                      outcomes: dict[str, Any]) -> dict[str, tuple[Target, Any]]:
        """Run the witnesses this sample's wrong answers need
        (``fuzz.engine.witnesses``), so each gets the bucket a run on every
        target would give it; a witness that hit a bug of ours is left out."""
        chosen = self.witnesses.for_wrong_answers(ran, outcomes)
        if not chosen:
            return {}
        assert self.pool is not None
        answers = self.pool.run([(witness, sample) for witness in chosen], faults=True)
        self.report.witness_runs += len(answers)
        return {witness.name: (witness, answer) for witness, answer in zip(chosen, answers)
                if not isinstance(answer, HarnessFault)}

    def _trim_cut(self, flight: InFlight) -> bool:
        """Keep the targets of a cut sample that answered; False when a
        reference or every target was dropped (nothing to judge)."""
        answers = flight.answers
        kept = [(t, a) for t, a in zip(flight.ordered, answers[2:]) if a is not CUT]
        if answers[0] is CUT or answers[1] is CUT or not kept:
            self.report.cut_samples += 1
            return False
        flight.ordered = [t for t, _ in kept]
        flight.answers = answers[:2] + [a for _, a in kept]
        return True

    # -- stored cases and given samples ------------------------------------------------
    def replay_one(self, entry: CorpusEntry) -> ReplayRecord:
        """Re-run one stored case on its target: still failing in its bucket,
        fixed, moved to another, or skipped (its target cannot run here)."""
        began = time.monotonic()
        target = self.target(entry.target)
        if target is None or not target.availability()[0]:
            return ReplayRecord(entry.bucket, entry.target, Observed.SKIPPED,
                                note=f"target {entry.target!r} is not available here")
        findings = self.run_sample(entry.sample,
                                   [target, *replay_witnesses(entry, target, self.target)])
        by_bucket = {f.bucket: f.key for f in findings}
        now = tuple(sorted(by_bucket))
        status = Observed.STILL_FAILING if entry.bucket in now else \
            Observed.MOVED if now else Observed.FIXED
        note = "" if entry.key_version == KEY_VERSION else \
            f"stored with bucket-key version {entry.key_version}, now {KEY_VERSION}"
        return ReplayRecord(entry.bucket, entry.target, status, now,
                            time.monotonic() - began, note, dict(self.last_timings),
                            tuple(by_bucket[b] for b in now))

    def reproduce(self, bucket: str) -> ReplayRecord:
        """Re-run one stored case of the corpus folder (``dlrm-fuzz repro``)."""
        return self.replay_one(corpus.load_entry(self.options.corpus_dir / bucket))

    def replay_entries(self, entries: list[CorpusEntry], repeat: int = 1,
                       on_record: Callable[[CorpusEntry, list[ReplayRecord]], None] | None = None,
                       again: Callable[[CorpusEntry, ReplayRecord], bool] = lambda e, r: False,
                       ) -> list[list[ReplayRecord]]:
        """Re-run stored cases (``dlrm-fuzz replay``): each once, and
        ``repeat - 1`` more times when ``again(first run)`` says so (a case
        that seems fixed is re-run before anyone calls it fixed)."""
        runs: list[list[ReplayRecord]] = []
        for entry in entries:
            records = [self.replay_one(entry)]
            if again(entry, records[0]):
                records += [self.replay_one(entry) for _ in range(repeat - 1)]
            runs.append(records)
            if on_record is not None:
                on_record(entry, records)
        return runs

    def check_samples(self, samples: list[Sample],
                      on_sample: Callable[[int, list[Finding]], None] | None = None
                      ) -> list[list[Finding]]:
        """Run given samples on every target and judge them, filing nothing
        (``dlrm-fuzz matrix``): the same buckets a campaign would give them."""
        found: list[list[Finding]] = []
        for i, sample in enumerate(samples):
            found.append(self.run_sample(sample, self.targets))
            if on_sample is not None:
                on_sample(i, found[-1])
        return found


def _resolved_targets(options: CampaignOptions, table: dict[str, Target]) -> list[Target]:
    """The targets ``options`` name (None: every one available here), checked."""
    names = expand_groups(options.targets, table) if options.targets is not None \
        else available_targets(table)
    if options.ray is None:
        return resolve_targets(names, table, check_available=True)
    # GPU targets run on the cluster's GPU actors, not on this machine.
    targets = resolve_targets(names, table)
    check_gpu_workers(targets, options.ray_gpu_workers)
    resolve_targets([t.name for t in targets if not needs_gpu(t)], table, check_available=True)
    return targets

"""What a campaign is told and what it tells back: ``CampaignOptions`` (budget,
seed, corpus, targets, limits, the region), and the report (``CampaignReport``
with its ``ReplayRecord`` and ``ShrinkRecord`` rows, the summary JSON, the
actionable line). Apart from the engine so that the phases, the bug work and
the command line share them without importing the campaign."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.engine.coverage import Coverage
from fuzz.model.focus import Focus
from fuzz.targets.catalog import Target
from fuzz.triage.findings import Finding
from oracles import Tolerance

__all__ = ["CampaignOptions", "CampaignReport", "Observed", "Phase", "ReplayRecord",
           "ShrinkRecord"]


class Phase(enum.StrEnum):
    """A campaign's phases in their order (a string enum: the summary JSON's
    ``phase_seconds`` keys and the progress line show the plain names)."""

    START = "start"
    REPLAY = "replay"
    GENERATE = "generate"
    FINISH = "finish"


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
    # The most of the targets' stage seconds the road targets (turbine, ONNX,
    # onnxruntime) take beside the FX road's: ``fuzz.engine.roadshare``.
    road_share: float = 0.2
    # Workers beside ``workers`` that take bug work only (shrink steps, the
    # reports): a step never waits for a generation compile to end. Off by
    # default: on 2 cores a third process cost generation a quarter of its
    # samples (seed 73, 10 minutes: 41 against 56) for no more bug reports.
    bug_workers: int = 0
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
    # Workers as Ray actors (fuzz/raypool.py): "local", "auto" or HOST:PORT.
    ray: str | None = None
    ray_gpu_workers: int = 0
    # The region every generated sample and every shrink step stays inside
    # (``--focus``, ``--config``, ``--preset``; fuzz/model/focus.py).
    focus: Focus | None = None


class Observed(str, enum.Enum):
    """What one replay of a stored case saw (``fuzz.regress.replay`` judges it
    against what the corpus expects: XFAIL, XPASS, MOVED, ...)."""
    STILL_FAILING = "still-failing"  # in its own bucket
    MOVED = "moved"  # failing, in other buckets
    FIXED = "fixed"  # passing on its target and the witnesses
    SKIPPED = "skipped"  # its target is not available here


@dataclass(frozen=True)
class ReplayRecord:
    """A stored case re-run: ``status`` says what it did today."""

    bucket: str
    target: str
    status: Observed
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
    target_seconds: dict[str, float] = field(default_factory=dict)  # target -> its stages' seconds
    # The road targets under their share (``fuzz.engine.roadshare``): the
    # samples each was sent, and the samples sent to none of them.
    road_samples: dict[str, int] = field(default_factory=dict)
    road_samples_left_out: int = 0
    phase_seconds: dict[Phase, float] = field(default_factory=dict)
    workers_replaced: int = 0
    batches_checked: int = 0
    replays: list[ReplayRecord] = field(default_factory=list)
    shrinks: list[ShrinkRecord] = field(default_factory=list)
    localizations: int = 0
    ablations: int = 0
    repro_status: dict[str, str] = field(default_factory=dict)  # bucket -> repro check
    # Wrong answers localization could not see, held out of the corpus until
    # their model repro reproduces: bucket -> why still held (``corpus.HELD``).
    held_back: dict[str, str] = field(default_factory=dict)
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
    cut_running: int = 0  # jobs still running a while after the budget, not waited for
    cut_samples: int = 0
    witness_runs: int = 0  # jobs run only to blame a wrong answer (``_witness_runs``)
    cut_unfiled: list[str] = field(default_factory=list)  # seen when the budget ended, not filed
    workers: int = 0
    # Wall seconds of the generate phase spent shrinking (inside the budget).
    shrink_s: float = 0.0
    # Worker seconds of each bug-report job answered (repro search and check,
    # tool files), by bucket in answer order (an op-level bucket's first is its
    # one-op report): with ``shrink_s``, what the bug work cost the samples.
    report_costs: dict[str, list[float]] = field(default_factory=dict)
    road_share: float = 1.0  # the most of the targets' seconds the road targets take

    @property
    def report_seconds(self) -> list[float]:
        """Worker seconds of every report job answered, whichever bucket."""
        return [c for costs in self.report_costs.values() for c in costs]

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
                "report_jobs": {"answered": len(self.report_seconds),
                                "worker_s": round(sum(self.report_seconds), 2),
                                "by_bucket": {b: [round(c, 2) for c in costs]
                                              for b, costs in self.report_costs.items()}},
                "cut_at_deadline": {"jobs": self.cut_jobs, "running": self.cut_running,
                                    "samples": self.cut_samples,
                                    "unfiled": list(self.cut_unfiled)},
                "actionable": self._actionable_summary(),
                "held_back": dict(self.held_back),
                "target_seconds": {k: round(v, 2) for k, v in self.target_seconds.items()},
                "roads": {"share": self.road_share, "samples": dict(self.road_samples),
                          "left_out": self.road_samples_left_out}}

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
                moved_to = record.get("moved_to") or "no bucket"
                moved_to = ", ".join(moved_to) if isinstance(moved_to, list) else str(moved_to)
                why = str(record.get("skipped") or (
                    f"its smaller case replays in {moved_to}" if record.get("stopped") == "moved"
                    else f"shrinking stopped on {record.get('stopped')}"))
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

"""Toolchain bumps (``dlrm-fuzz bump``): what a new torch-mlir / IREE / torch
brings, in the terms CI needs: new bugs, fixed bugs, still failing, moved.

Two toolchains, ``--from`` (default: the pins of this install) and ``--to``,
each get their own cached uv environment (``fuzz.regress.toolchains``; the install
running this command is reused when it is ``--from``). Then:

1. the corpus is replayed on both (``replay --format json`` run by each
   environment's Python: the same harness, only the toolchain differs);
2. the new toolchain is fuzzed for ``--budget`` into a scratch copy of the
   corpus, so the buckets it stores are the ones the corpus did not know;
3. those new buckets are replayed on the old toolchain: a bug that fails there
   too is *pre-existing* (new to the corpus, not brought by the bump), one
   that passes there is *new*.

Each bucket then gets one :class:`Change` from what the sample did on each
side (:func:`classify`, pure). A side that could not run a case (target
missing there, or a compiler that does not understand today's program or
flags, see ``oracles.compat``) makes it CANNOT_COMPARE with the reason, never
a new or a fixed bug. Rendering (Markdown, JSON, JUnit) is ``fuzz.regress.bumpreport``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fuzz.store import corpus
from fuzz.regress.replay import ReplayResult, ReplayStatus
from fuzz.regress.toolchains import (Toolchain, current_toolchain, environment,
                             run_with, same_toolchain)
from oracles.compat import incompatibility
from fuzz.regress.toolchain_path import prepare

__all__ = ["Change", "Observation", "BumpRow", "Side", "BumpOptions", "BumpReport",
           "classify", "observe", "run_bump", "BumpError"]


class BumpError(Exception):
    """A side could not be run at all (its replay or fuzz command failed):
    one line with the reason."""


class Change(str, enum.Enum):
    """How a bucket's case moved between the --from and --to toolchains (one report row)."""
    NEW = "new"                      # fails on --to, passed on --from: the bump brought it
    FIXED = "fixed"                  # failed on --from, passes on --to
    MOVED = "moved"                  # fails on both, in different buckets
    STILL_FAILING = "still-failing"  # fails on both, in the same bucket
    PRE_EXISTING = "pre-existing"    # found by fuzzing --to, fails on --from too
    PASSING = "passing"              # a stored case that passes on both (stale corpus)
    CANNOT_COMPARE = "cannot-compare"
    FLAKY = "flaky"


# Changes a PR must act on: the corpus (or the pins) need updating.
NEWS = frozenset({Change.NEW, Change.FIXED, Change.MOVED, Change.PRE_EXISTING, Change.FLAKY})


@dataclass(frozen=True)
class Observation:
    """What one case did on one toolchain: the buckets it fails in (empty:
    it passes), or why it could not be judged there."""

    now: tuple[str, ...] = ()
    flaky: bool = False
    cannot: str = ""  # why this side cannot judge the case ("" when it can)

    @property
    def fails(self) -> bool:
        """A case fails on a side when it lands in any bucket there."""
        return bool(self.now)


def observe(result: ReplayResult | None, side: str) -> Observation:
    """An observation from one side's replay result (None: never replayed)."""
    if result is None:
        return Observation(cannot=f"{side}: not replayed")
    if result.status is ReplayStatus.SKIPPED:
        return Observation(cannot=f"{side}: {result.note or 'the target cannot run here'}")
    if result.status is ReplayStatus.FLAKY:
        return Observation(result.now, flaky=True)
    reasons = [incompatibility(key) for key in result.keys]
    if result.now and reasons and all(reasons):
        return Observation(result.now, cannot=f"{side}: {reasons[0]} "
                                              f"({_excerpt(result.keys[0])})")
    return Observation(result.now)


def _excerpt(key: str) -> str:
    return key.split("|")[-1][:160]


def classify(bucket: str, before: Observation, after: Observation,
             found: bool = False) -> tuple[Change, str]:
    """The change of one bucket's case from ``before`` (--from) to ``after``
    (--to), and a short note. ``found``: the bucket was found by this bump's
    fuzzing (it fails on --to by construction)."""
    for side in (before, after):
        if side.cannot:
            return Change.CANNOT_COMPARE, side.cannot
    if before.flaky or after.flaky:
        return Change.FLAKY, "repeated runs disagree"
    was, now = bucket in before.now, bucket in after.now
    if not before.fails and not after.fails:
        return Change.PASSING, "passes on both toolchains"
    if not before.fails:
        return Change.NEW, "" if now else f"fails as {', '.join(after.now)}"
    if not after.fails:
        return Change.FIXED, "" if was else f"failed as {', '.join(before.now)}"
    if set(before.now) == set(after.now):
        if found:
            return Change.PRE_EXISTING, "fails on --from too"
        return Change.STILL_FAILING, "" if was else f"fails as {', '.join(after.now)} on both"
    return Change.MOVED, f"{', '.join(before.now)} -> {', '.join(after.now)}"


@dataclass(frozen=True)
class BumpRow:
    """One bucket's case in the bump report: what it did on each side and the change."""
    bucket: str
    target: str
    owner: str
    change: Change
    note: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    found: bool  # found by this bump's fuzzing (else a stored case)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """The row as JSON for the bump report file (seconds rounded)."""
        return {"bucket": self.bucket, "target": self.target, "owner": self.owner,
                "change": self.change.value, "note": self.note, "before": list(self.before),
                "after": list(self.after), "found": self.found, "seconds": round(self.seconds, 2)}


@dataclass(frozen=True)
class Side:
    """One toolchain of the bump and where it runs."""

    label: str  # "from" | "to"
    toolchain: Toolchain
    python: str
    build_seconds: float
    reused_install: bool  # this process's own install, no environment built
    versions: dict[str, str] = field(default_factory=dict)
    pythonpath: str = ""  # this checkout, for a --from/--to PATH without dlrm-fuzz

    def to_dict(self) -> dict[str, object]:
        """The side as JSON: what was installed and where, so a report can be reproduced."""
        return {"label": self.label, "path": self.toolchain.path or None,
                "pins": [] if self.toolchain.path else list(self.toolchain.resolved()),
                "python": self.python, "build_seconds": round(self.build_seconds, 2),
                "reused_install": self.reused_install, "versions": self.versions}


@dataclass(frozen=True)
class BumpOptions:
    """What ``run_bump`` compares and how: the two toolchains, corpus, budget, workers."""
    to: Toolchain
    from_: Toolchain = field(default_factory=Toolchain)
    corpus_dir: Path = Path("corpus")
    out_dir: Path = Path("bump")
    budget_s: float = 300.0  # 0: no fuzzing, replay only
    seed: int = 0
    targets: str | None = None
    workers: int = 2
    repeat: int = 3
    timeout_s: float = 300.0
    env_root: Path | None = None
    extra_run_args: tuple[str, ...] = ()  # e.g. ("--target-plugin", "mod:factory")


@dataclass
class BumpReport:
    """Everything a bump found: the sides, one row per bucket, timings and fuzz figures."""
    sides: list[Side]
    rows: list[BumpRow] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    fuzz: dict[str, object] = field(default_factory=dict)  # the --to campaign's figures
    junk: list[str] = field(default_factory=list)

    def count(self, change: Change) -> int:
        """How many rows show ``change`` (for the summary and the JSON counts)."""
        return sum(1 for row in self.rows if row.change is change)

    def compared(self) -> bool:
        """Could anything be compared (or was there nothing to compare)?"""
        return not self.rows or any(r.change is not Change.CANNOT_COMPARE for r in self.rows)

    def exit_status(self, strict: bool = False) -> int:
        """0 nothing new; 1 new bugs (with ``strict``: any news); 4 nothing
        could be compared (see the README's table)."""
        if not self.compared():
            return 4
        news = NEWS if strict else {Change.NEW}
        return 1 if any(row.change in news for row in self.rows) else 0

    def to_dict(self) -> dict[str, object]:
        """The whole report as JSON, with per-change counts, for CI and later reading."""
        return {"sides": [s.to_dict() for s in self.sides], "rows": [r.to_dict() for r in self.rows],
                "counts": {c.value: self.count(c) for c in Change},
                "phases": {k: round(v, 2) for k, v in self.phases.items()},
                "fuzz": self.fuzz, "junk": self.junk}


def _side(label: str, toolchain: Toolchain, root: Path | None) -> Side:
    began = time.monotonic()
    if toolchain.path:  # a venv or a folder of wheels, checked (and built) by path

        ready = prepare(toolchain.path, root)
        return Side(label, toolchain, str(ready.python), time.monotonic() - began, False,
                    pythonpath=ready.pythonpath or "")
    if same_toolchain(toolchain, current_toolchain()):
        return Side(label, toolchain, sys.executable, 0.0, True)
    python = environment(toolchain, root)
    return Side(label, toolchain, str(python), time.monotonic() - began, False)


def _call(side: Side, args: list[str], timeout_s: float, what: str
          ) -> subprocess.CompletedProcess[str]:
    try:
        done = run_with(side.python, args, timeout_s, side.pythonpath or None)
    except subprocess.TimeoutExpired as exc:
        raise BumpError(f"{what} on --{side.label} ({side.toolchain.describe()}) ran over "
                        f"{timeout_s:.0f}s; raise --timeout or lower --budget") from exc
    return done


def _replay(side: Side, folder: Path, options: BumpOptions
            ) -> tuple[dict[str, ReplayResult], dict[str, str], list[str]]:
    """Replay ``folder`` with ``side``'s Python: results by bucket, the
    versions it ran with, junk lines."""
    args = ["replay", str(folder), "--format", "json", "--repeat", str(options.repeat),
            "--workers", str(options.workers), "--timeout", f"{options.timeout_s}s",
            *options.extra_run_args]
    n = len(corpus.load(folder)[0])
    done = _call(side, args, options.timeout_s * max(1, n) * (options.repeat + 1) + 600,
                 "replay")
    try:
        document = json.loads(done.stdout)
        results = [ReplayResult.from_dict(item) for item in document["results"]]
    except (ValueError, KeyError, TypeError) as exc:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BumpError(f"replay on --{side.label} ({side.toolchain.describe()}) gave no "
                        f"report (exit {done.returncode}: {tail}); run `dlrm-fuzz replay` "
                        "in that environment to see why") from exc
    return ({r.bucket: r for r in results}, dict(document.get("toolchain", {})),
            list(document.get("junk", [])))


def _fuzz(side: Side, scratch: Path, options: BumpOptions) -> dict[str, object]:
    """Fuzz ``side`` into ``scratch`` (a copy of the corpus); the campaign's
    headline figures."""
    summary = scratch.parent / "fuzz-summary.json"
    summary.unlink(missing_ok=True)
    args = ["run", "--budget", f"{options.budget_s}s", "--seed", str(options.seed),
            "--corpus", str(scratch), "--no-replay", "--workers", str(options.workers),
            "--summary-json", str(summary),
            *(["--targets", options.targets] if options.targets else []),
            *options.extra_run_args]
    # The budget, then shrinking (within it) and the report phase, plus start-up.
    done = _call(side, args, options.budget_s * 2 + 900, "fuzzing")
    if done.returncode not in (0,):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BumpError(f"fuzzing on --{side.label} ({side.toolchain.describe()}) failed "
                        f"(exit {done.returncode}: {tail})")
    try:
        figures = json.loads(summary.read_text())
    except (OSError, ValueError) as exc:
        raise BumpError(f"fuzzing on --{side.label} wrote no summary ({exc})") from exc
    return figures if isinstance(figures, dict) else {}


def _owner_and_target(folder: Path) -> dict[str, tuple[str, str]]:
    entries, _ = corpus.load(folder)
    return {e.bucket: (e.owner, e.target) for e in entries}


def run_bump(options: BumpOptions, say: Callable[[str], None] = lambda line: None
             ) -> BumpReport:
    """The whole bump; ``say`` gets a progress line per phase."""
    if options.budget_s < 0:
        raise ValueError(f"budget_s={options.budget_s}: must be >= 0")
    phases: dict[str, float] = {}
    stored = _owner_and_target(options.corpus_dir)  # a bad corpus fails before any build
    began = time.monotonic()
    sides = [_side("from", options.from_, options.env_root),
             _side("to", options.to, options.env_root)]
    phases["environments"] = time.monotonic() - began
    for side in sides:
        say(f"--{side.label}: {side.toolchain.describe()} "
            + ("(this install)" if side.reused_install else f"({side.build_seconds:.1f}s)"))
    report = BumpReport(sides, phases=phases)
    before: dict[str, ReplayResult] = {}
    after: dict[str, ReplayResult] = {}
    if stored:
        began = time.monotonic()
        before, versions, report.junk = _replay(sides[0], options.corpus_dir, options)
        sides[0] = dataclasses.replace(sides[0], versions=versions)
        phases["replay --from"] = time.monotonic() - began
        say(f"replayed {len(before)} stored cases on --from ({phases['replay --from']:.0f}s)")
        began = time.monotonic()
        after, versions, _ = _replay(sides[1], options.corpus_dir, options)
        sides[1] = dataclasses.replace(sides[1], versions=versions)
        phases["replay --to"] = time.monotonic() - began
        say(f"replayed {len(after)} stored cases on --to ({phases['replay --to']:.0f}s)")
    report.sides = sides
    for bucket, (owner, target) in sorted(stored.items()):
        b, a = before.get(bucket), after.get(bucket)
        change, note = classify(bucket, observe(b, "--from"), observe(a, "--to"))
        report.rows.append(BumpRow(bucket, target, owner, change, note,
                                   b.now if b else (), a.now if a else (), False,
                                   (b.seconds if b else 0.0) + (a.seconds if a else 0.0)))

    if options.budget_s > 0:
        _fuzz_phase(options, sides, report, set(stored), say)
    return report


def _fuzz_phase(options: BumpOptions, sides: list[Side], report: BumpReport,
                stored: set[str], say: Callable[[str], None]) -> None:
    """Fuzz --to into a scratch corpus; replay what it found on --from."""
    out = options.out_dir
    scratch, fresh = out / "found", out / "new-on-to"
    for folder in (scratch, fresh):
        if folder.exists():
            shutil.rmtree(folder)
    if options.corpus_dir.is_dir():
        shutil.copytree(options.corpus_dir, scratch)
    else:
        scratch.mkdir(parents=True)
    began = time.monotonic()
    report.fuzz = _fuzz(sides[1], scratch, options)
    report.phases["fuzz --to"] = time.monotonic() - began
    found = {b: v for b, v in _owner_and_target(scratch).items() if b not in stored}
    say(f"fuzzed --to for {options.budget_s:.0f}s: {len(found)} buckets not in the corpus "
        f"({report.phases['fuzz --to']:.0f}s)")
    if not found:
        return
    fresh.mkdir(parents=True)
    for bucket in found:
        shutil.copytree(scratch / bucket, fresh / bucket)
    began = time.monotonic()
    before, _, _ = _replay(sides[0], fresh, options)
    report.phases["replay found on --from"] = time.monotonic() - began
    for bucket, (owner, target) in sorted(found.items()):
        b = before.get(bucket)
        change, note = classify(bucket, observe(b, "--from"), Observation((bucket,)), found=True)
        report.rows.append(BumpRow(bucket, target, owner, change, note, b.now if b else (),
                                   (bucket,), True, b.seconds if b else 0.0))

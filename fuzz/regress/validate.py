"""One command for a lowering change (``dlrm-fuzz validate``): what a new
toolchain build fixed, broke and left alone, in the region the change touches.

The person validating a lowering has two environments (their branch's build
and the one it branches from, or this install) and a feature they changed.
Three steps, each run by each toolchain's own interpreter (``PATH/bin/python
-m fuzz ...``: the same harness, only the toolchain differs), built from the
pieces ``bump`` is made of rather than a second copy of them:

1. the support matrix (``matrix --json``) of the rows inside the focus, on
   both; each (feature, target) cell compared like a bump compares a case;
2. the stored cases inside the focus, copied aside and replayed on both;
3. a focused campaign on the new toolchain for ``budget``, the buckets it
   finds that the corpus lacks replayed on the old one (new, or failing on
   both); steps 2 and 3 are ``fuzz.regress.bump.run_bump`` on the copy.

Each cell and case gets one ``Change`` (``fuzz.regress.bump.classify``), the
exit status is bump's (0 nothing broke, 1 something broke, ``strict``: also
fixed / moved / flaky / failing-on-both, 4 nothing could be compared), and
rendering is ``fuzz.regress.validatereport``. A toolchain that cannot run is
a ``ToolchainError`` before any step starts; a step that fails on one side
is a one-line ``ValidateError``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fuzz.model.config import DLRMConfig
from fuzz.model.focus import Focus
from fuzz.regress.bump import (BumpError, BumpOptions, BumpReport, BumpRow, Change, Observation,
                               Side, classify, run_bump)
from fuzz.regress.matrix import PASS, Matrix, rows_in_focus
from fuzz.regress.toolchains import Toolchain, current_toolchain
from fuzz.store import corpus
from oracles.compat import incompatibility

__all__ = ["ValidateError", "ValidateOptions", "MatrixCell", "ValidateReport", "compare_cells",
           "run_validate", "words", "SIDE_NAMES", "MATRIX_OWNER"]

# bump's side labels -> the flags of ``validate`` that name them: bump's own
# messages ("replay on --to ...") are shown in validate's words.
SIDE_NAMES = {"from": "--against", "to": "--toolchain"}
# The owner of a matrix cell's row: no bucket owner starts so (they name a
# component, "iree:compiler", "torch-mlir:tosa").
MATRIX_OWNER = "matrix."


class ValidateError(Exception):
    """A step could not run on one side (its command failed or wrote no
    report): one line naming the side, the step and how to see why."""


@dataclass(frozen=True)
class ValidateOptions:
    """What ``run_validate`` compares and how. ``region_args`` are the
    command-line flags that make ``focus`` (``--focus``, ``--config``,
    ``--preset``, ``--neighbours``, ``--rows-scale``), handed to each side's
    commands; ``focus`` and ``base`` are the same region parsed here."""

    toolchain: Toolchain  # the new build (a path)
    against: Toolchain | None = None  # the old one; None: this install
    corpus_dir: Path = Path("corpus")
    out_dir: Path = Path("validate")
    budget_s: float = 300.0  # the focused campaign on --toolchain; 0: none
    seed: int = 0
    targets: str | None = None
    workers: int = 2
    repeat: int = 3
    timeout_s: float = 300.0
    seeds: int = 2  # weight seeds per matrix row
    focus: Focus | None = None
    base: DLRMConfig | None = None  # the model of --config / --preset: the matrix's base
    region_args: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()  # e.g. ("--target-plugin", "mod:factory")
    env_root: Path | None = None


@dataclass(frozen=True)
class MatrixCell:
    """One (feature, target) cell of the matrix on both toolchains."""

    feature: str
    target: str
    change: Change
    note: str
    before: tuple[str, ...]  # the buckets on --against (empty: it passes)
    after: tuple[str, ...]  # on --toolchain

    def row(self) -> BumpRow:
        """The cell as a bump row, so that bump's JUnit writer renders it:
        owner ``matrix.TARGET`` (a JUnit class per target, a case per row)."""
        return BumpRow(self.feature, self.target, f"{MATRIX_OWNER}{self.target}", self.change,
                       self.note, self.before, self.after, False)

    def to_dict(self) -> dict[str, object]:
        """The cell as JSON for validate.json."""
        return {"feature": self.feature, "target": self.target, "change": self.change.value,
                "note": self.note, "before": list(self.before), "after": list(self.after)}


@dataclass
class ValidateReport:
    """The three steps' outcome: the sides (``against`` first), the matrix
    cells, bump's report of the replay and the campaign, and what the focus
    kept of the matrix and the corpus."""

    sides: list[Side]
    focus: str = ""  # the region's label ("" without one)
    cells: list[MatrixCell] = field(default_factory=list)
    matrix_rows: list[str] = field(default_factory=list)
    matrix_targets: list[str] = field(default_factory=list)
    seeds: int = 0
    bump: BumpReport | None = None
    stored: int = 0  # readable stored cases in the corpus
    inside: int = 0  # of them inside the focus (replayed)
    notes: list[str] = field(default_factory=list)  # a step left out, and why
    phases: dict[str, float] = field(default_factory=dict)
    # bucket -> culprit or first error line (stored cases, found cases, the
    # matrices): a bucket id alone does not tell a reviewer what failed.
    errors: dict[str, str] = field(default_factory=dict)

    def rows(self) -> list[BumpRow]:
        """Every compared thing as a bump row: matrix cells, then stored
        cases and the campaign's buckets."""
        return [cell.row() for cell in self.cells] + (self.bump.rows if self.bump else [])

    def as_bump(self) -> BumpReport:
        """All rows in one bump report: its counts, exit status and JUnit."""
        return BumpReport(self.sides, self.rows(), dict(self.phases),
                          dict(self.bump.fuzz) if self.bump else {},
                          list(self.bump.junk) if self.bump else [])

    def count(self, change: Change) -> int:
        """How many cells and cases show ``change``."""
        return self.as_bump().count(change)

    def exit_status(self, strict: bool = False) -> int:
        """bump's: 0 nothing broke, 1 something broke (``strict``: anything
        the corpus should record), 4 nothing could be compared."""
        return self.as_bump().exit_status(strict)

    def to_dict(self) -> dict[str, object]:
        """The whole report as JSON (validate.json)."""
        bump = self.bump.to_dict() if self.bump else {}
        return {"sides": [{**s.to_dict(), "label": SIDE_NAMES[s.label].lstrip("-")}
                          for s in self.sides],
                "focus": self.focus or None,
                "matrix": {"rows": self.matrix_rows, "targets": self.matrix_targets,
                           "seeds": self.seeds, "cells": [c.to_dict() for c in self.cells]},
                "corpus": {"stored": self.stored, "inside": self.inside,
                           "rows": bump.get("rows", [])},
                "campaign": bump.get("fuzz", {}),
                "counts": {c.value: self.count(c) for c in Change},
                "notes": self.notes, "junk": bump.get("junk", []), "errors": self.errors,
                "phases": {k: round(v, 2) for k, v in self.phases.items()}}


def _observation(cell: str | None, matrix: Matrix, side: str) -> Observation:
    """One side's cell as an observation: its buckets, or why it cannot be
    judged (the target does not run there; an older compiler that cannot
    read today's program, ``oracles.compat``)."""
    if cell is None:
        return Observation(cannot=f"{side}: the target does not run there")
    buckets = () if cell == PASS else tuple(cell.split("+"))
    reasons = [incompatibility(matrix.keys[b]) if b in matrix.keys else None for b in buckets]
    if buckets and all(reasons):
        return Observation(buckets, cannot=f"{side}: {reasons[0]}")
    return Observation(buckets)


def compare_cells(before: Matrix, after: Matrix) -> list[MatrixCell]:
    """Every (feature, target) cell of either matrix, as a change from
    ``before`` (--against) to ``after`` (--toolchain)."""
    features = list(dict.fromkeys([*before.cells, *after.cells]))
    targets = list(dict.fromkeys([*before.targets, *after.targets]))
    cells = []
    for feature in features:
        for target in targets:
            old = before.cells.get(feature, {}).get(target)
            new = after.cells.get(feature, {}).get(target)
            change, note = classify(feature, _observation(old, before, "--against"),
                                    _observation(new, after, "--toolchain"))
            if change in (Change.NEW, Change.FIXED):  # the two cells say it already
                note = ""
            cells.append(MatrixCell(feature, target, change, note,
                                    () if old in (None, PASS) else tuple(str(old).split("+")),
                                    () if new in (None, PASS) else tuple(str(new).split("+"))))
    return cells


def words(text: str) -> str:
    """bump's side flags in validate's words."""
    return re.sub(r"--(from|to)\b", lambda m: SIDE_NAMES[m.group(1)], text)


def _focused_corpus(options: ValidateOptions, report: ValidateReport) -> tuple[Path, set[str]]:
    """The corpus folder to replay (a copy of the stored cases inside the
    focus, or the corpus itself without one) and every stored bucket."""
    entries, _ = corpus.load(options.corpus_dir)
    report.stored = len(entries)
    report.errors.update(_errors(entries))
    every = {entry.bucket for entry in entries}
    if options.focus is None:
        report.inside = len(entries)
        return options.corpus_dir, every
    folder = options.out_dir / "corpus-in-focus"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for entry in entries:
        if entry.path is not None and options.focus.holds(entry.sample):
            shutil.copytree(entry.path, folder / entry.bucket)
            report.inside += 1
    return folder, every


def _errors(entries: list[corpus.CorpusEntry]) -> dict[str, str]:
    return {e.bucket: (e.culprit or e.error).strip().splitlines()[0][:160]
            for e in entries if (e.culprit or e.error).strip()}


def _known_elsewhere(report: BumpReport, every: set[str]) -> None:
    """A bucket the focused campaign found that the corpus holds with a case
    outside the focus is a known bug, not one to add: failing on both, it
    is still failing."""
    for i, row in enumerate(report.rows):
        if row.found and row.bucket in every and row.change is Change.PRE_EXISTING:
            report.rows[i] = dataclasses.replace(
                row, change=Change.STILL_FAILING,
                note="a known bucket (its stored case lies outside the focus)")


def _matrix(side: Side, rows: list[str], options: ValidateOptions, folder: Path) -> Matrix:
    """``matrix --json`` of ``rows`` in ``side``'s interpreter."""
    name = SIDE_NAMES[side.label]
    out = folder / f"matrix-{name.lstrip('-')}.json"
    out.unlink(missing_ok=True)
    args = ["matrix", "--json", str(out), "--features", ",".join(rows), "--seeds",
            str(options.seeds), "--workers", str(options.workers), "--timeout",
            f"{options.timeout_s}s", *(["--targets", options.targets] if options.targets else []),
            *options.region_args, *options.extra_args]
    limit = options.timeout_s * len(rows) * options.seeds * 4 + 600
    done = _call(side, args, limit, "the matrix")
    try:
        return Matrix.from_json(out.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValidateError(f"the matrix on {name} ({side.toolchain.describe()}) wrote no "
                            f"matrix (exit {done.returncode}: {tail}); run `dlrm-fuzz matrix` "
                            "in that environment to see why") from None


def _env(side: Side) -> dict[str, str]:
    """The side's environment: this one without PYTHONPATH / PYTHONHOME (as
    ``toolchains.run_with``), plus this checkout for an environment without
    dlrm-fuzz."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if side.pythonpath:
        env["PYTHONPATH"] = side.pythonpath
    return env


def _call(side: Side, args: list[str], timeout_s: float, what: str
          ) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([side.python, "-m", "fuzz", *args], env=_env(side),
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ValidateError(f"{what} on {SIDE_NAMES[side.label]} ({side.toolchain.describe()}) "
                            f"ran over {timeout_s:.0f}s; raise --timeout or narrow the focus "
                            "or --targets") from None


_VERSIONS = ("import json; from fuzz.targets.versions import recorded_versions; "
             "print(json.dumps(recorded_versions()))")


def _versions(side: Side) -> dict[str, str]:
    """What ``side`` runs, as every stored case records it (releases, the
    ``iree-compile --version`` revision, the interpreter, torch-mlir's
    location); asked of its interpreter when no step reported it."""
    try:
        done = subprocess.run([side.python, "-c", _VERSIONS], env=_env(side),
                              capture_output=True, text=True, timeout=300,
                              cwd=tempfile.gettempdir())
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def run_validate(options: ValidateOptions, say: Callable[[str], None] = lambda line: None
                 ) -> ValidateReport:
    """The three steps and the report; ``say`` gets a progress line per step."""
    if options.budget_s < 0:
        raise ValueError(f"budget_s={options.budget_s}: must be >= 0")
    if options.seeds < 1:
        raise ValueError(f"seeds={options.seeds}: must be >= 1")
    against = options.against if options.against is not None else current_toolchain()
    report = ValidateReport([], options.focus.label if options.focus else "", seeds=options.seeds)
    options.out_dir.mkdir(parents=True, exist_ok=True)
    replayed, every = _focused_corpus(options, report)  # a bad corpus fails before any build
    rows = rows_in_focus(options.focus, options.base)

    # Steps 2 and 3 (bump checks both toolchains first: one that cannot run
    # stops everything before any work).
    try:
        bumped = run_bump(BumpOptions(
            to=options.toolchain, from_=against, corpus_dir=replayed, out_dir=options.out_dir,
            budget_s=options.budget_s, seed=options.seed, targets=options.targets,
            workers=options.workers, repeat=options.repeat, timeout_s=options.timeout_s,
            env_root=options.env_root, extra_run_args=(*options.region_args,
                                                       *options.extra_args)),
            lambda line: say(words(line)))
    except BumpError as exc:
        raise ValidateError(words(str(exc))) from None
    _known_elsewhere(bumped, every)
    report.errors.update(_errors(corpus.load(options.out_dir / "found")[0]))
    report.bump, report.sides = bumped, list(bumped.sides)
    report.phases.update({words(k): v for k, v in bumped.phases.items()})

    # Step 1: the matrix of the rows inside the focus, on both.
    if not rows:
        report.notes.append(f"matrix: no row lies inside {report.focus} (each row is one "
                            "feature on a batch of 3); `dlrm-fuzz run --focus` covers it")
    else:
        matrices: list[Matrix] = []
        for side in report.sides:
            began = time.monotonic()
            matrices.append(_matrix(side, rows, options, options.out_dir))
            report.phases[f"matrix {SIDE_NAMES[side.label]}"] = time.monotonic() - began
            say(f"matrix on {SIDE_NAMES[side.label]}: {len(rows)} rows x "
                f"{len(matrices[-1].targets)} targets "
                f"({report.phases[f'matrix {SIDE_NAMES[side.label]}']:.0f}s)")
        report.cells = compare_cells(matrices[0], matrices[1])
        for matrix in matrices:
            report.errors.update({b: line for b, line in matrix.buckets.items()
                                  if b not in report.errors})
        report.matrix_rows = rows
        report.matrix_targets = list(dict.fromkeys([*matrices[0].targets, *matrices[1].targets]))
        for i, (side, matrix) in enumerate(zip(report.sides, matrices)):
            if matrix.toolchain and len(matrix.toolchain) > len(side.versions):
                report.sides[i] = dataclasses.replace(side, versions=dict(matrix.toolchain))
    if not report.inside:
        report.notes.append(f"corpus: no stored case of {options.corpus_dir} lies inside "
                            f"{report.focus or 'it'}" if report.stored else
                            f"corpus: {options.corpus_dir} holds no stored case")
    if options.budget_s == 0:
        report.notes.append("campaign: none (--budget 0s)")
    for i, side in enumerate(report.sides):  # every side says what it ran
        if not side.versions:
            report.sides[i] = dataclasses.replace(side, versions=_versions(side))
    report.bump.sides = report.sides
    return report

"""The lowering support matrix (``dlrm-fuzz matrix``): for each DLRM feature
(one knob value turned on, on a minimal config) and each target, PASS or the
bucket it fails in. It is how a developer validating a lowering works: run it
before and after the change and compare (``--against old.json``).

Features are one table (``FEATURES``), built from the knobs' declarations
(``fuzz.model.config.KNOBS``: a row per value that turns a knob on); each
row is a minimal two-table DLRM with one thing switched on, checked over a
few weight seeds, every cell triaged exactly as a campaign would (same
buckets).

A lowering change touches one feature, so the matrix can be cut to a region
(``--focus``, as ``fuzz.model.focus``): only the rows whose sample lies inside
it. ``--config`` / ``--preset`` put each feature on the given model instead
of the minimal one (``base``), so the rows are that model's own support.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.engine.records import CampaignOptions
from fuzz.engine.session import Session
from fuzz.model.config import DLRMConfig, KNOBS
from fuzz.model.focus import Focus
from fuzz.triage.edits import config_with
from fuzz.model.sample import Batch, Sample
from fuzz.targets.catalog import ROAD_TARGETS, TARGETS, Target
from fuzz.targets.versions import recorded_versions

__all__ = ["FEATURES", "feature_rows", "Matrix", "feature_sample", "rows_in_focus",
           "build_matrix", "matrix_markdown", "compare_matrices"]

PASS = "PASS"

# Rows for what the inputs do, no knob: the same config as "plain".
_INPUT_ROWS = ("empty_bags",)


def _knob_rows(extension: bool) -> dict[str, dict[str, Any]]:
    return {label: changes for declared in KNOBS.values() if declared.extension == extension
            for label, changes in declared.matrix_rows().items()}


def feature_rows() -> dict[str, dict[str, Any]]:
    """Row name -> config changes on the minimal DLRM (``_BASE``): each knob's
    rows as declared (``fuzz.model.config.Knob.matrix_rows``), upstream's
    knobs first, then the input rows, then the knobs beyond ``DLRM_Net``."""
    return {"plain": {}, **_knob_rows(extension=False), **{name: {} for name in _INPUT_ROWS},
            **_knob_rows(extension=True)}


FEATURES: dict[str, dict[str, Any]] = feature_rows()
"""The matrix's rows (``feature_rows``), in the order the table prints them."""

_BASE = DLRMConfig(m_spa=4, ln_emb=(8, 12), ln_bot=(3, 4), ln_top=(7, 1))


def feature_sample(feature: str, seed: int, base: DLRMConfig | None = None) -> Sample:
    """The minimal DLRM (or ``base``) with ``feature`` on, weights from
    ``seed``, one batch of three examples whose bags hit the first and last
    rows and repeat an index (row 1: the padding row, when there is one; row
    0 of a one-row table). Fixed-length bags are all two long; per-sample
    weights are drawn from ``seed`` too. A feature ``base`` cannot take (MD
    widths for its tables, a padding row it lacks) is a ValueError."""
    if feature not in FEATURES:
        raise ValueError(f"feature={feature!r}: unknown; choose from {list(FEATURES)}")
    config = config_with(_BASE if base is None else base, **FEATURES[feature])
    if config is None:
        raise ValueError(f"feature={feature!r}: its changes {FEATURES[feature]} give no valid config")
    rng = np.random.default_rng(seed)
    dtype = np.dtype(config.index_dtype)
    empty = feature == "empty_bags"
    offsets, indices = [], []
    for rows in config.ln_emb:
        second = min(1, rows - 1)
        bags = [[0, rows - 1], [] if empty else [second, second], [rows - 1]]
        if config.input_layout == "fixed":
            bags[2] = [rows - 1, 0]
        offsets.append(np.cumsum([0] + [len(b) for b in bags[:-1]]).astype(dtype))
        indices.append(np.array([i for b in bags for i in b], dtype))
    dense = rng.standard_normal((3, config.num_dense)).astype(np.float32)
    weights = tuple(rng.uniform(-1.0, 1.0, i.shape[0]).astype(np.float32) for i in indices) \
        if config.per_sample_weights else None
    return Sample(config, seed, (Batch.for_config(config, dense, tuple(offsets), tuple(indices),
                                                  weights),))


def rows_in_focus(focus: Focus | None, base: DLRMConfig | None = None,
                  features: Sequence[str] | None = None) -> list[str]:
    """The rows (of ``features``, default all) whose sample on ``base`` lies
    inside ``focus`` (every row without one). A row ``base`` cannot take, or
    one that changes nothing on it (the same sample as an earlier row, e.g.
    ``pooling=mean`` on a model with mean bags), is left out."""
    kept: list[str] = []
    seen: list[tuple[DLRMConfig, bool]] = []
    for feature in features or FEATURES:
        try:
            sample = feature_sample(feature, 0, base)
        except ValueError:
            continue
        identity = (sample.config, feature == "empty_bags")
        if identity in seen or (focus is not None and not focus.holds(sample)):
            continue
        seen.append(identity)
        kept.append(feature)
    return kept


@dataclass
class Matrix:
    """One run's feature-by-target cells and bucket notes, saved to compare
    before/after; ``keys`` (bucket -> signature key) lets a comparison tell an
    older compiler that cannot read the program from a bug, and ``toolchain``
    records what ran (``fuzz.targets.versions.recorded_versions``)."""
    targets: list[str]
    cells: dict[str, dict[str, str]] = field(default_factory=dict)  # feature -> target -> cell
    buckets: dict[str, str] = field(default_factory=dict)  # bucket -> culprit / error line
    seconds: float = 0.0
    keys: dict[str, str] = field(default_factory=dict)  # bucket -> signature key
    toolchain: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """Stable, sorted JSON, so two saved matrices diff cleanly."""
        return json.dumps({"targets": self.targets, "cells": self.cells, "buckets": self.buckets,
                           "seconds": round(self.seconds, 1), "keys": self.keys,
                           "toolchain": self.toolchain}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Matrix":
        """Read a saved matrix back (for ``--against``; files from before
        ``keys`` and ``toolchain`` were recorded read with them empty)."""
        data = json.loads(text)
        return cls(list(data["targets"]), dict(data["cells"]), dict(data.get("buckets", {})),
                   float(data.get("seconds", 0.0)), dict(data.get("keys", {})),
                   dict(data.get("toolchain", {})))


def build_matrix(options: CampaignOptions, features: Sequence[str] | None = None,
                 seeds: int = 2, on_row: Callable[[str, dict[str, str]], None] | None = None,
                 base: DLRMConfig | None = None) -> Matrix:
    """Every (feature, target) cell: PASS when every seed passes, else the
    buckets its failures land in (joined with ``+``). ``base``: the model the
    features are put on (default the minimal two-table DLRM)."""
    import time

    began = time.monotonic()
    session = Session(options)
    matrix = Matrix([t.name for t in session.targets], toolchain=recorded_versions())
    rows = list(features or FEATURES)
    samples = [feature_sample(feature, seed, base) for feature in rows for seed in range(seeds)]
    found: dict[str, dict[str, set[str]]] = {f: {t: set() for t in matrix.targets} for f in rows}

    def collect(i: int, findings: list[Any]) -> None:
        feature = rows[i // seeds]
        for finding in findings:
            matrix.buckets[finding.bucket] = finding.culprit or finding.outcome.error[:160]
            matrix.keys[finding.bucket] = finding.key
            for target in finding.targets:
                found[feature].setdefault(target, set()).add(finding.bucket)
        if i % seeds == seeds - 1:
            matrix.cells[feature] = {t: "+".join(sorted(b)) or PASS
                                     for t, b in found[feature].items()}
            if on_row is not None:
                on_row(feature, matrix.cells[feature])

    with session:
        session.check_samples(samples, collect)
    matrix.seconds = time.monotonic() - began
    return matrix


def matrix_markdown(matrix: Matrix) -> str:
    """Features as rows, targets as columns; a bucket shows as a short label
    (B1, B2, ...) explained under the table."""
    labels: dict[str, str] = {}
    for row in matrix.cells.values():
        for cell in row.values():
            for bucket in cell.split("+"):
                if bucket != PASS and bucket not in labels:
                    labels[bucket] = f"B{len(labels) + 1}"

    def show(cell: str) -> str:
        return "pass" if cell == PASS else "+".join(labels[b] for b in cell.split("+"))

    out = ["| feature | " + " | ".join(matrix.targets) + " |",
           "|---|" + "---|" * len(matrix.targets)]
    for feature, row in matrix.cells.items():
        out.append(f"| {feature} | " + " | ".join(show(row.get(t, '-')) if t in row else "-"
                                                    for t in matrix.targets) + " |")
    out.append("")
    # The columns of the other roads into IREE say which road they take
    # (README "Roads into IREE"); the FX road's need no legend.

    for name in matrix.targets:
        if name in ROAD_TARGETS:
            out.append(f"- `{name}`: {TARGETS[name].description}")
    for bucket, label in labels.items():
        out.append(f"- {label} `{bucket}`: {matrix.buckets.get(bucket, '')}")
    return "\n".join(out) + "\n"


def compare_matrices(old: Matrix, new: Matrix) -> list[str]:
    """One line per cell that changed (``feature x target: old -> new``)."""
    lines = []
    for feature, row in new.cells.items():
        for target, cell in row.items():
            before = old.cells.get(feature, {}).get(target)
            if before is not None and before != cell:
                lines.append(f"{feature} x {target}: {before} -> {cell}")
    return lines

"""Runs one sample on one target, inside a worker process: compile once per
distinct input shape, then run every batch of that shape on the same artifact.

Whatever the toolchain does wrong comes back as data (a ``Failure`` in the
``TargetResult``); only bugs of ours raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fuzz.cache import ArtifactCache
from fuzz.pipeline import StageFailure, Timer
from fuzz.sample import Sample
from fuzz.targets import Target

__all__ = ["Failure", "TargetResult", "execute", "MAX_TEXT_BYTES"]

# Intermediate programs bigger than this are not shipped back (corpus size).
MAX_TEXT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Failure:
    """What the toolchain said when it failed: stage, exception type, its text.

    ``signal`` is set when the worker process died (CRASH) and ``timed_out``
    when it was killed for exceeding its time limit.
    """

    stage: str
    error_type: str
    message: str
    signal: int | None = None
    exit_code: int | None = None
    timed_out: bool = False
    stderr_tail: str = ""


@dataclass
class TargetResult:
    target: str
    outputs: list[np.ndarray | None]
    failure: Failure | None = None
    stage_reached: str = "none"
    timings: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    compiles: int = 0


def _shape_key(flat: list[np.ndarray]) -> tuple[tuple[int, ...], ...]:
    return tuple(a.shape for a in flat)


def execute(target: Target, sample: Sample, on_stage: Callable[[str], None] | None = None,
            cache: ArtifactCache | None = None) -> TargetResult:
    """One compile per (config, target): a shape-polymorphic target runs every
    batch on it; a static one runs the batches shaped like the first (the
    others stay ``None``: not checked, not failed)."""
    timer = Timer(on_stage)
    result = TargetResult(target=target.name, outputs=[None] * len(sample.batches),
                          timings=timer.seconds)
    first = sample.batches[0].flat()
    try:
        artifact = target.compile(sample.config, sample.seed, first, timer, cache)
        result.compiles = 1
        result.stage_reached = "compile"
        for name, text in target.artifact_texts(artifact).items():
            if len(text) <= MAX_TEXT_BYTES:
                result.texts[name] = text
        for b, batch in enumerate(sample.batches):
            flat = batch.flat()
            if not target.any_shape and _shape_key(flat) != _shape_key(first):
                continue
            result.outputs[b] = target.run(artifact, flat, timer)[0]
            result.stage_reached = "run"
    except StageFailure as failure:
        result.failure = Failure(failure.stage, failure.error_type, failure.message)
        _keep_failed_program(failure, result)
    return result


def _keep_failed_program(failure: StageFailure, result: TargetResult) -> None:
    """A failing stage may carry the program it choked on (kept for the report)."""
    program = getattr(failure, "program", None)
    if isinstance(program, str) and len(program) <= MAX_TEXT_BYTES:
        result.texts[f"{failure.stage}-input.mlir"] = program

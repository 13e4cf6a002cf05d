"""Runs one sample on one target, inside a worker process: compile once per
distinct input shape, then run every batch of that shape on the same artifact.

Whatever the toolchain does wrong comes back as data (a ``Failure`` in the
``TargetResult``); only bugs of ours raise.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from fuzz.targets.cache import ArtifactCache
from fuzz.targets.pipeline import StageFailure, Timer
from fuzz.model.sample import Sample
from fuzz.targets.catalog import Target
from oracles.results import Failure, Stage, TargetResult

__all__ = ["Failure", "TargetResult", "execute", "MAX_TEXT_BYTES"]

# Intermediate programs bigger than this are not shipped back (corpus size).
MAX_TEXT_BYTES = 4 * 1024 * 1024


def _shape_key(flat: list[np.ndarray]) -> tuple[tuple[int, ...], ...]:
    return tuple(a.shape for a in flat)


def execute(target: Target, sample: Sample, on_stage: Callable[[str], None] | None = None,
            cache: ArtifactCache | None = None) -> TargetResult:
    """One compile per (config, target): a shape-polymorphic target runs every
    batch on it; a static one runs the batches shaped like the first (the
    others stay ``None``: not checked, not failed)."""
    from fuzz.model.recipe import call_args

    timer = Timer(on_stage)
    result = TargetResult(target=target.name, outputs=[None] * len(sample.batches),
                          timings=timer.seconds)
    first = sample.batches[0].flat()
    try:
        artifact = target.compile(sample.config, sample.seed, first, timer, cache)
        lead = target.leading_inputs(sample.config, sample.seed, timer)
        result.compiles = 1
        result.stage_reached = Stage.COMPILE
        for name, text in target.artifact_texts(artifact).items():
            if len(text) <= MAX_TEXT_BYTES:
                result.texts[name] = text
        for b, batch in enumerate(sample.batches):
            flat = batch.flat()
            if not target.any_shape and _shape_key(flat) != _shape_key(first):
                continue
            answer = target.run(artifact, call_args(lead, flat), timer)
            result.outputs[b] = answer[0]
            if len(answer) > 1 and getattr(target, "dtype", None) == "float64":
                # The float64 reference also says how large rounding may be.
                result.roundings.extend([None] * (b + 1 - len(result.roundings)))
                result.roundings[b] = answer[1]
            result.stage_reached = Stage.RUN
        _run_draws(target, sample, artifact, lead, result, timer)
    except StageFailure as failure:
        result.failure = _keep_failed_program(failure.failure, result)
    return result


def _run_draws(target: Target, sample: Sample, artifact: object, lead: list[np.ndarray],
               result: TargetResult, timer: Timer) -> None:
    """Every extra weight draw through the artifact (its weights as inputs),
    or through a fresh eager model (a reference: building one is cheap); a
    compiled target with inline weights would need a compile per draw, so it
    checks the sample's own seed only. A failing draw fails the job, like a
    failing batch: the campaign re-runs that draw as a sample of its own."""
    if not sample.draws or not (lead or not target.compiles_modules):
        return
    from fuzz.model.recipe import call_args

    for seed in sample.draws:
        if lead:
            weights, model = target.leading_inputs(sample.config, seed, timer), artifact
        else:
            weights, model = [], target.compile(sample.config, seed, sample.batches[0].flat(),
                                                timer, None)
        outputs: list[np.ndarray | None] = []
        for b, batch in enumerate(sample.batches):
            checked = result.outputs[b] is not None
            outputs.append(target.run(model, call_args(weights, batch.flat()), timer)[0]
                           if checked else None)
        result.draws[seed] = outputs


def _keep_failed_program(failure: Failure, result: TargetResult) -> Failure:
    """A failing stage may carry the program it choked on: kept as a text of
    the result (for the report), not shipped twice inside the failure."""
    if failure.program is not None and len(failure.program) <= MAX_TEXT_BYTES:
        result.texts[f"{failure.stage.value}-input.mlir"] = failure.program
    return dataclasses.replace(failure, program=None)

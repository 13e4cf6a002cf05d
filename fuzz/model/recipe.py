"""The one export recipe: what every road hands ``torch.export`` for a sample.

A target's compile, localization's instrumented program, the tool files and
every ``repro.py`` must export the very program that failed, and call it
with the very arguments the campaign did. They used to build both five times
with small differences (a seeded model here, a model of zeros there, weights
inline in localization): a localization or a repro could then test another
program than the failing one. They all ask this module now: ``recipe`` for
the export, ``leading_inputs`` and ``call_args`` for a compiled program's flat
inputs, ``eager_args`` for calling the exported module itself.

With weights as inputs (``fuzz.model.weights``) the module is built without
drawing its weights (the program is the same for every seed; the seed's
values are the program's leading inputs); inline, it is built from the
seed. A dynamic export traces on ``tracing_example`` with the
``dynamic_shapes`` spec; a static one on the sample's own first batch.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence, TypeVar

import numpy as np
from torch import nn

from fuzz.model.config import DLRMConfig, weights_as_inputs
from fuzz.model.dlrm import build, dynamic_shapes, to_torch, tracing_example
from fuzz.model.weights import export_form, state_arrays

__all__ = ["Exportable", "recipe", "leading_inputs", "call_args", "eager_args"]

_T = TypeVar("_T")


class Exportable(NamedTuple):
    """``torch.export.export(module, args, dynamic_shapes=spec)``'s arguments."""

    module: nn.Module
    args: tuple[Any, ...]
    spec: Any


def _untimed(stage: str, work: Callable[[], _T]) -> _T:
    return work()


def recipe(config: DLRMConfig, seed: int, dynamic: bool, example: Sequence[np.ndarray],
           measure: Callable[[str, Callable[[], Any]], Any] = _untimed) -> Exportable:
    """The module, example arguments and dynamic-shape spec of ``config``
    (weights from ``seed`` when inline) for a static export on ``example``
    (flat arrays of one batch) or a dynamic one; ``measure(stage, work)``
    times the model's build (a target's ``Timer.measure``)."""
    as_inputs = weights_as_inputs(config)
    model = measure("build", lambda: build(config, None if as_inputs else seed))
    inputs = tracing_example(config) if dynamic else example
    spec = dynamic_shapes(config) if dynamic else None
    return Exportable(*export_form(model, config, to_torch(inputs, config), spec))


def leading_inputs(config: DLRMConfig, seed: int,
                   measure: Callable[[str, Callable[[], Any]], Any] = _untimed) -> list[np.ndarray]:
    """What the program of ``recipe`` takes before each batch: ``seed``'s
    weights when they are inputs (the export traced on a model of zeros, so
    the seed enters here), else nothing (they are constants inside it)."""
    if not weights_as_inputs(config):
        return []
    return measure("build", lambda: state_arrays(build(config, seed)))


def call_args(leading: Sequence[np.ndarray], flat: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A compiled program's flat inputs for one batch: ``leading_inputs``
    first (``WeightsAsInputs`` takes its state before the batch), then the
    batch's flat arrays. The leading inputs are a parameter, not recomputed,
    because a campaign runs every batch of a sample on one draw of them."""
    return [*leading, *flat]


def eager_args(config: DLRMConfig, seed: int, flat: Sequence[np.ndarray],
               measure: Callable[[str, Callable[[], Any]], Any] = _untimed) -> tuple[Any, ...]:
    """The arguments of ``recipe``'s module (or of its export's ``module()``)
    for one concrete batch, ``seed``'s weights in place of the export's
    zeros: the same nesting as ``Exportable.args``, to run the exported
    program eagerly on the sample."""
    args = to_torch(flat, config)
    if not weights_as_inputs(config):
        return args
    # No grad: the weights are data here (an op's captured operand reads out as an array).
    model = measure("build", lambda: build(config, seed).requires_grad_(False))
    return export_form(model, config, args, None)[1]

"""The one export recipe: what every road hands ``torch.export`` for a sample.

A target's compile, localization's instrumented program, the tool files and
every ``repro.py`` must export the very program that failed. They used to
build it five times with small differences (a seeded model here, a model of
zeros there, weights inline in localization): a localization or a repro could
then test another program than the failing one. They all call ``recipe`` now.

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
from fuzz.model.weights import export_form

__all__ = ["Exportable", "recipe"]

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

"""One export recipe (issue 21): the campaign's compile, localization, the
repro and the tool files hand ``torch.export`` the same program for a sample:
the same graph, the same weights, the same example arguments and the same
dynamic-shape spec, with weights inline and as program inputs, static and
dynamic. Each caller is stopped right after its export (nothing is lowered or
compiled), so this stays in the unit tier."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
import torch

from fuzz.reports import toolfiles
from fuzz.reports.repro import graph
from fuzz.targets import pipeline
from fuzz.targets.catalog import TARGETS
from fuzz.targets.pipeline import Timer
from fuzz.triage import localize
from tests.helpers import tiny_config, tiny_sample


class _Exported(Exception):
    """Ends a caller right after its export."""


def _fingerprint(exported: Any, args: tuple[Any, ...], spec: Any) -> tuple[Any, ...]:
    """What makes two exports the same program: the graph's code, every
    parameter, buffer and constant by name and bytes, the example arguments'
    shapes and dtypes, and the dynamic-shape spec."""
    def arrays(named: dict[str, Any]) -> list[tuple[str, bytes]]:
        return sorted((name, np.ascontiguousarray(t.detach().numpy()).tobytes())
                      for name, t in named.items() if isinstance(t, torch.Tensor))

    flat, _ = torch.utils._pytree.tree_flatten(args)
    return (exported.graph_module.code, arrays(dict(exported.state_dict)),
            arrays(dict(exported.constants)),
            [(tuple(a.shape), str(a.dtype)) for a in flat if isinstance(a, torch.Tensor)], repr(spec))


@pytest.mark.parametrize("weights", ["inline", "inputs"])
@pytest.mark.parametrize("target_name", ["iree-cpu", "iree-cpu-dyn"])
def test_every_caller_exports_the_one_program(monkeypatch: pytest.MonkeyPatch, weights: str,
                                              target_name: str) -> None:
    target = TARGETS[target_name]
    sample = tiny_sample(tiny_config(weights=weights, weighted_pooling="learned"), seed=5)
    entry = types.SimpleNamespace(sample=sample, path=None)
    seen: dict[str, tuple[Any, ...]] = {}
    real_export = torch.export.export
    caller = ""

    def recording_export(module: Any, args: tuple[Any, ...], *rest: Any, **kwargs: Any) -> Any:
        exported = real_export(module, args, *rest, **kwargs)
        seen[caller] = _fingerprint(exported, args, kwargs.get("dynamic_shapes"))
        raise _Exported

    monkeypatch.setattr(torch.export, "export", recording_export)

    def exported_by(name: str, call: Any) -> None:
        nonlocal caller
        caller = name
        try:
            call()
        except (_Exported, pipeline.StageFailure, graph._ToolchainFailed):
            pass
        assert name in seen, f"{name} did not export"

    flat = sample.batches[0].flat()
    exported_by("campaign", lambda: target.lowered(sample.config, sample.seed, flat, Timer(), None))
    exported_by("localization", lambda: localize.first_divergent_op(target, sample, 0))
    exported_by("repro", lambda: graph._export(entry, target))  # type: ignore[arg-type]
    exported_by("tool files", lambda: toolfiles._raw_program(entry, target))  # type: ignore[arg-type]
    campaign = seen.pop("campaign")
    assert seen == {name: campaign for name in seen}
    assert ("dynamic" in repr(campaign[-1]).lower() or "Dim" in campaign[-1]) == target.dynamic


def test_the_fingerprint_tells_two_weight_draws_apart() -> None:
    """Inline weights are constants of the program: another seed is another program."""
    from fuzz.model.recipe import recipe

    sample = tiny_sample(tiny_config(weights="inline"))
    flat = sample.batches[0].flat()
    prints = []
    for seed in (1, 2):
        module, args, spec = recipe(sample.config, seed, False, flat)
        prints.append(_fingerprint(torch.export.export(module, args, dynamic_shapes=spec), args, spec))
    assert prints[0][0] == prints[1][0] and prints[0][1] != prints[1][1]

"""Every road exports the very same program for a sample (issue 21).

The campaign's compile (a compiled target and the fake that stands in for
one), localization's instrumented program, the tool files and the repro
writer each hand ``torch.export`` something for a stored sample. If one of
them built it differently (another seed, weights inline where the target takes
them as inputs, another tracing example) it would test another program than
the one that failed. Here each road runs through its public entry point with
``torch.export.export`` replaced by a recorder that keeps what it exported and
then stops the road (an export failure every road tolerates), so no compiler
runs; the recorded programs must print the same, byte for byte, for inline
weights and weights as inputs, static and dynamic shapes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import pytest

from fuzz.model.sample import Sample
from fuzz.reports.repro import write_repro
from fuzz.reports.toolfiles import write_tool_files
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS, FakeWrongOpTarget, Target
from fuzz.triage.localize import first_divergent_op
from fuzz.workers.execute import execute
from oracles.results import Stage
from oracles.verdict import Verdict
from tests.helpers import tiny_config, tiny_sample

SIGNATURE = {Verdict.MISMATCH: "MISMATCH|test|op:aten.relu.default",
             Verdict.LOWERING_ERROR: "LOWERING_ERROR|test|x"}


class _Stop(Exception):
    """Raised by the recorder right after the export it recorded."""


def _program(exported: Any) -> str:
    """What is really the program: the printed graph (every input's dtype and
    shape, symbolic sizes included), its signature (which inputs are
    parameters, which the caller's), its range constraints, and a digest of
    every value it carries (inline weights are part of the program)."""
    import torch

    values = []
    for name, value in sorted({**exported.state_dict, **exported.constants}.items()):
        if isinstance(value, torch.Tensor):
            data = value.detach().contiguous().flatten().view(torch.uint8).numpy().tobytes()
            values.append(f"{name}: {value.dtype} {hashlib.sha256(data).hexdigest()}")
        else:
            values.append(f"{name}: {value!r}")
    return "\n".join([str(exported), *values])


def _recorded(monkeypatch: pytest.MonkeyPatch, road: Callable[[], object]) -> str:
    """The program ``road`` hands ``torch.export`` first, the road stopped there."""
    import torch

    real = torch.export.export
    seen: list[Any] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        raise _Stop("recorded")

    with monkeypatch.context() as patched:
        patched.setattr(torch.export, "export", record)
        road()
    assert len(seen) == 1, f"the road exported {len(seen)} times"
    return _program(seen[0])


def _entry(sample: Sample, verdict: Verdict, target: str, stage: Stage) -> CorpusEntry:
    return CorpusEntry(bucket=f"{verdict.value.lower()}-test", signature=SIGNATURE[verdict],
                       verdict=verdict, owner="test", target=target, sample=sample, stage=stage,
                       seen_on=(target,))


def _roads(sample: Sample, target: Target, fake: Target, folder: Path) -> dict[str, Callable[[], object]]:
    """Each road to ``torch.export`` for ``sample`` on ``target``, by its public entry point."""
    mismatch = _entry(sample, Verdict.MISMATCH, target.name, Stage.RUN)
    lowering = _entry(sample, Verdict.LOWERING_ERROR, target.name, Stage.IMPORT)
    return {
        "campaign": lambda: execute(target, sample),
        "fake target": lambda: execute(fake, sample),
        "localization": lambda: first_divergent_op(target, sample, 0),
        "tool files": lambda: write_tool_files(folder / "tools", lowering),
        "repro": lambda: write_repro(folder, mismatch, check=False),
    }


@pytest.mark.parametrize("weights", ["inline", "inputs"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_every_road_exports_the_same_program(weights: str, dynamic: bool, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    sample = tiny_sample(tiny_config(weights=weights))
    suffix = "-dyn" if dynamic else ""
    target = TARGETS[f"iree-cpu{suffix}"]
    fake = FakeWrongOpTarget("fake-wrong-relu", "FAKE: relu wrong", dynamic=dynamic)
    programs = {name: _recorded(monkeypatch, road)
                for name, road in _roads(sample, target, fake, tmp_path).items()}
    campaign = programs.pop("campaign")
    assert ("state_0" in campaign) == (weights == "inputs")  # the weight form really differs
    for name, program in programs.items():
        assert program == campaign, f"{name} exports another program than the campaign compiles"

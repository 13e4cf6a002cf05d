"""The road form, for a case of the other roads into IREE (README "Roads into
IREE"): the shrunk DLRM as plain PyTorch (the model form's part), exported,
imported, compiled and run by the road's own packages only
(``templates/road.py``): ``torch.onnx.export`` -> ``iree-import-onnx`` ->
``iree-compile`` -> IREE runtime, onnxruntime on the same ``model.onnx``, or
``iree.turbine.aot.export`` -> ``iree-compile``. Beside it: the fuzzer's own
``model.onnx`` and ``commands.sh``, the same file through the command-line
tools. A case of torch-mlir's own ONNX road (``onnx-refbackend``) is
reproduced on ``onnx-iree-cpu`` of the same form: IREE runs the same
conversions, and is what an ONNX user runs."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from fuzz.reports.repro.core import _ToolchainFailed
from fuzz.reports.repro.graph import _user_inputs
from fuzz.reports.repro.model import _bf16_state, _graph_code, _model_slots, _program_files
from fuzz.reports.repro.template import fill
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS, Target
from fuzz.targets.onnx_iree import OnnxRoad
from fuzz.targets.onnx_refbackend import OnnxRefBackendTarget
from fuzz.targets.onnx_runtime import OnnxRuntimeTarget
from fuzz.targets.turbine_iree import TORCH_MLIR_TORCH, TurbineIreeTarget
from oracles.results import Stage
from oracles.verdict import Verdict
from fuzz.targets import bags
from fuzz.targets.onnx_export import onnx_model
from fuzz.targets.pipeline import StageFailure, Timer

__all__ = ["road_target", "road_of"]


def road_of(target: Target) -> str | None:
    """The road form's section for ``target``: onnx_iree, onnxruntime, turbine, or None."""
    if isinstance(target, OnnxRoad):
        return "onnx_iree"
    if isinstance(target, OnnxRuntimeTarget):
        return "onnxruntime"
    if isinstance(target, TurbineIreeTarget):
        return "turbine"
    return None


def road_target(entry: CorpusEntry, table: dict[str, Target] | None = None) -> Target | None:
    """The target a road case is reproduced on (None: not a road's case)."""
    table = TARGETS if table is None else table
    own = table.get(entry.target)
    if isinstance(own, OnnxRefBackendTarget):
        name = "onnx-iree-cpu" + ("-loopfree" if own.bags != "loop" else "") + \
            ("-dyn" if own.dynamic else "")
        own = table.get(name, TARGETS.get(name))
    return own if own is not None and road_of(own) is not None else None


def _road_export(entry: CorpusEntry, target: Any) -> Any:
    """torch.export of the model as the road exports it: the loop-free bag
    variant's rewritten bags when the target takes it (``fuzz.targets.bags``)."""
    import torch

    from fuzz.model.recipe import recipe

    sample = entry.sample
    module, args, spec = recipe(sample.config, sample.seed, target.dynamic, sample.batches[0].flat())
    variant = getattr(target, "variant", None)
    if variant is not None and variant(sample.config) == bags.LOOP_FREE:
        module = bags.loop_free(module)
    try:
        try:
            return torch.export.export(module, args, dynamic_shapes=spec)
        except Exception:
            if spec is None:
                raise
            # As torch.onnx.export does: dimensions the program relates to
            # each other (the loop-free bags relate batch and index counts)
            # become automatic ones instead of failing the named ones' checks.
            return torch.export.export(module, args, dynamic_shapes=_automatic(spec))
    except Exception as exc:
        raise _ToolchainFailed(f"torch.export failed: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}"[:300]) from exc


def _automatic(spec: Any) -> Any:
    """``spec`` with every ``torch.export.Dim`` made ``Dim.AUTO``."""
    import torch

    if isinstance(spec, dict):
        return {k: _automatic(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_automatic(v) for v in spec)
    return spec if spec is None else torch.export.Dim.AUTO


def _road_files(entry: CorpusEntry, target: Any) -> dict[str, str | bytes]:
    """repro.py (``templates/road.py``), what it loads, model.onnx and commands.sh."""
    exported = _road_export(entry, target)
    files = _program_files(entry, target, exported)
    slots = _model_slots(entry, _stand_in(target), _graph_code(exported), _user_inputs(exported),
                         _bf16_state(exported))
    slots.update(_road_slots(entry, target, bool(slots["vulkan"])),
                 road_words=target.description.removeprefix("road "))
    files["repro.py"] = fill("road", slots)
    if road_of(target) != "turbine":
        files.update(_tool_files(entry, target))
    return files


def _stand_in(target: Any) -> Any:
    """The target whose slots (``script._target_slots``) a road script fills:
    itself, or for onnxruntime, which lowers nothing, an IREE ONNX target of
    its shape mode under its name."""
    if hasattr(target, "output_type"):
        return target
    return dataclasses.replace(TARGETS["onnx-iree-cpu-dyn" if target.dynamic else "onnx-iree-cpu"],
                               name=target.name)


def _road_slots(entry: CorpusEntry, target: Any, vulkan: bool) -> dict[str, object]:
    """The road's sections and stage names (``templates/road_stages.py``) and
    how far a script goes for the entry's verdict (``templates/ending.py``)."""
    road = road_of(target)
    assert road is not None
    stage = Stage.parse(str(entry.stage))
    error = entry.verdict is not Verdict.MISMATCH
    # An onnx.* op iree-compile cannot convert is filed as the import's
    # failure (fuzz.targets.onnx_iree): the script compiles to see it.
    # So is, on turbine's road, an op torch-mlir has no lowering for
    # (fuzz.targets.turbine_iree: IREE's torch input meets it at compile),
    # and on onnxruntime's a file its session refuses as invalid, the
    # exporter's (fuzz.targets.onnx_runtime): the script loads it to see it.
    in_compile = error and ((stage is Stage.IMPORT and (
        road == "onnx_iree" or (road == "turbine" and entry.owner == TORCH_MLIR_TORCH)))
        or (stage is Stage.EXPORT and road == "onnxruntime"))
    iree = road != "onnxruntime"
    lowering = error and stage in (Stage.EXPORT, Stage.IMPORT) and not in_compile
    at_compile = error and (stage is Stage.COMPILE or in_compile)
    runs = not lowering and not at_compile
    slots: dict[str, object] = dict(
        fx=False, refbackend=False, iree=iree, onnx=road != "turbine", onnx_iree=road == "onnx_iree",
        onnxruntime=road == "onnxruntime", turbine=road == "turbine",
        to_host=iree and not vulkan, compile_stage=stage.value if in_compile else "compile",
        import_stage="export" if error and stage is Stage.EXPORT else "import",
        compiles=not lowering, runs=runs, fails_at_run=error and runs, judges=not error,
        stops_after_import=error and stage in (Stage.EXPORT, Stage.IMPORT),
        stops_after_compile=error and stage is Stage.COMPILE, fails=error,
        read_back=vulkan and runs)
    if iree:
        slots.update(backend=target.backend, flags=list(target.prepare("module {\n}")[1]),
                     driver=target.driver)
    return slots


def _tool_files(entry: CorpusEntry, target: Any) -> dict[str, str | bytes]:
    """The fuzzer's model.onnx and the command-line tools that run it."""

    sample = entry.sample
    try:
        model = onnx_model(sample.config, sample.seed, target.dynamic, sample.batches[0].flat(),
                           target.bags, Timer(), None)
    except StageFailure:
        return {}  # the export fails: repro.py shows it
    return _onnx_tool_files(target, model, "The fuzzer's model.onnx", "--input=@dense.npy ...  "
                            "# one --input per graph input (inputs.npz; repro.py passes them)")


def _onnx_tool_files(target: Any, model: bytes, whose: str, inputs: str) -> dict[str, str | bytes]:
    """``model.onnx`` and ``commands.sh``: the command-line tools of the
    target's road on it (``whose``: what the file is; ``inputs``: the run's
    ``--input`` flags)."""
    lines = ["#!/bin/sh", f"# {whose} through the command-line tools.", "set -e"]
    if road_of(target) == "onnxruntime":
        lines.append("python -c \"import onnxruntime as o; "
                     "print(o.InferenceSession('model.onnx').get_inputs())\"")
    else:
        flags = " ".join(shlex.quote(f) for f in target.prepare("module {\n}")[1])
        lines += ["iree-import-onnx model.onnx -o model.mlir",
                  f"iree-compile model.mlir --iree-hal-target-backends={target.backend} {flags} "
                  "-o model.vmfb".replace("  ", " "),
                  f"iree-run-module --module=model.vmfb --device={target.driver} "
                  f"--function=main_graph {inputs}"]
    return {"model.onnx": model, "commands.sh": "\n".join(lines) + "\n"}

"""The one-op road form (``fuzz/reports/repro/road_op.py``): an error of a road
case (ONNX -> IREE, onnxruntime, turbine -> IREE) reproduced by the one op of
the model that fails the road's own pipeline alone the same way, through the
road's own packages; a fault that needs the model's context falls back to the
road form.

Unit tier: which cases try it, the order ops are tried in, the script each
road fills (no compiler runs). Pipeline tier (``-m pipeline``): torch.onnx
without an ONNX function for the 8-bit quantized bag, and the ``onnx.Loop``
that iree-compile cannot convert, each reproduce as one op (exit 1 in an
interpreter where ``import fuzz`` fails; 0 with the failing call patched
out); turbine refusing a large bfloat16 constant (the model's own state) has
no one-op form and gets the road form (``-m slow``: the search runs to its end).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Batch, Sample
from fuzz.reports.repro import SINGLE_OP_FORMS, has_single_op_form, run_repro, write_repro
from fuzz.reports.repro.graph import _OpModule
from fuzz.reports.repro.graph import _op_kinds
from fuzz.reports.repro.road_op import _ordered, _road_op_script
from fuzz.reports.repro.template import MARKERS
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS
from oracles.results import Stage
from tests.helpers import tiny_config, tiny_sample
from tests.test_repro import (ALLOWED_IMPORTS, GATHER_ND, assert_standalone, imported_modules, make_entry,
                               one_table)
from tests.test_repro import no_fuzz_python  # noqa: F401  (the fixture: an interpreter without fuzz)

LOOP = ("LOWERING_UNSUPPORTED_OP|torch-mlir:onnx|onnx.Loop|error: failed to legalize operation "
        "'torch.operator' that was explicitly marked illegal: name = \"onnx.Loop\"")
Q8 = ("EXPORT_ERROR|torch.onnx|quantized.embedding_bag_byte_rowwise_offsets|<class 'torch.onnx._internal."
      "exporter._errors.DispatchError'>: No ONNX function found for <OpOverload(op='quantized."
      "embedding_bag_byte_rowwise_offsets', overload='default')>")
INVALID_GATHER_ND = ("EXPORT_ERROR|torch.onnx|[ONNXRuntimeError] : N : INVALID_GRAPH : This is an invalid model. "
                     "Type Error: Type 'tensor(int32)' of input parameter (val) of operator (GatherND) in node "
                     "(node_GatherND) is invalid.")
CAST = ("COMPILE_ERROR|iree|torch.aten.embedding_bag.padding_idx|error: failed to legalize operation "
        "'torch.aten.embedding_bag.padding_idx' that was explicitly marked illegal")


def _entry(signature: str, target: str, stage: Stage, **fields: Any) -> CorpusEntry:
    return make_entry(tiny_sample(one_table()), signature, target, (target,), stage=stage, **fields)


# -- unit tier --------------------------------------------------------------------

def test_road_errors_try_the_one_op_road_form_and_wrong_answers_crashes_and_hangs_do_not() -> None:
    assert "road-op" in SINGLE_OP_FORMS
    assert has_single_op_form(_entry(Q8, "onnxruntime-loopfree-dyn", Stage.EXPORT))
    assert has_single_op_form(_entry(LOOP, "onnx-refbackend", Stage.IMPORT, op="onnx.Loop"))
    assert has_single_op_form(_entry(CAST, "turbine-iree-cpu", Stage.COMPILE))
    assert has_single_op_form(_entry("RUNTIME_ERROR|iree|Error invoking function", "onnx-iree-cpu-dyn",
                                     Stage.RUN))
    # A road's wrong answer is reproduced by the road form, even localized to an op.
    assert not has_single_op_form(_entry("MISMATCH|onnxruntime|op:aten.mm.default", "onnxruntime",
                                         Stage.RUN, culprit="op:aten.mm.default"))
    assert not has_single_op_form(_entry("TIMEOUT|iree-turbine|no answer within Ns (stage import)",
                                         "turbine-iree-cpu", Stage.IMPORT))


def _small_graph() -> Any:
    """An exported graph with the ops a DLRM has: two linears of one dtype,
    a bag, a row gather, a cast (export checks it with _assert_tensor_metadata)."""
    import torch

    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 4), torch.nn.Linear(4, 4)
            self.bag = torch.nn.EmbeddingBag(10, 4, mode="sum")

        def forward(self, dense: Any, offsets: Any, indices: Any) -> Any:
            x = torch.relu(self.b(self.a(dense)))
            rows = self.bag.weight[indices].sum(0, keepdim=True)
            return (x + self.bag(indices, offsets) + rows).to(torch.float16)

    args = (torch.ones(2, 3), torch.tensor([0, 1]), torch.tensor([0, 9, 9]))
    return torch.export.export(Small(), args).graph_module


def test_one_op_a_kind_is_tried_the_likely_ones_first() -> None:
    nodes = _op_kinds(_small_graph())
    names = [str(n.target) for n in nodes]
    assert names.count("aten.linear.default") == 1  # one per (op, operand dtypes)
    assert not any(n.startswith(("aten._assert", "aten.sym_")) for n in names), names

    def first(signature: str, stage: Stage, **fields: Any) -> str:
        entry = _entry(signature, "onnx-iree-cpu", stage, **fields)
        return str(_ordered(nodes, entry)[0].target)

    assert first(LOOP, Stage.IMPORT, op="onnx.Loop").startswith("aten.embedding_bag")
    assert first(GATHER_ND, Stage.EXPORT) == "aten.index.Tensor"
    assert first(CAST, Stage.COMPILE).startswith("aten.embedding_bag")
    assert first("COMPILE_ERROR|iree|torch.aten.relu|error: x", Stage.COMPILE) == "aten.relu.default"
    assert first("COMPILE_ERROR|iree|error: x", Stage.COMPILE) == names[0]  # nothing named: graph order


_OP = _OpModule("aten.index.Tensor", ["ARGS = [", "    np.array([[1.0], [2.0]], np.float32),",
                                      "    np.array([1], np.int32),", "]"],
                ["class Op(torch.nn.Module):", "    def forward(self, a0, a1):",
                 "        return torch.ops.aten.index.Tensor(a0, [a1])"], {}, [], [])


@pytest.mark.parametrize("signature, target, stage, words", [
    (LOOP, "onnx-iree-cpu", Stage.IMPORT, ["COMPILE_STAGE = 'import'", "import_onnx(", "print(f'{STAGE} passed"]),
    (GATHER_ND, "onnxruntime-loopfree-dyn", Stage.EXPORT,
     ["COMPILE_STAGE = 'export'", "ort.InferenceSession(onnx_bytes", "dynamic_shapes=spec"]),
    (CAST, "turbine-iree-cpu", Stage.COMPILE, ["aot.export(", "print('compile passed: fixed')"]),
    ("RUNTIME_ERROR|iree:vulkan-spirv|Error invoking function: <src>: INVALID_ARGUMENT",
     "onnx-iree-vulkan-loopfree", Stage.RUN, ["DEVICE_TARGETS", "attempt('run', lambda: call(inputs))"]),
])
def test_the_one_op_road_form_fills_for_each_road(tmp_path: Path, signature: str, target: str,
                                                  stage: Stage, words: list[str]) -> None:
    source = _road_op_script(_entry(signature, target, stage), TARGETS[target], _OP)
    compile(source, "repro.py", "exec")
    (tmp_path / "repro.py").write_text(source)
    assert MARKERS.search(source) is None and "from ." not in source
    assert all(word in source for word in words), [w for w in words if w not in source]
    imported = imported_modules(tmp_path / "repro.py")
    assert imported <= ALLOWED_IMPORTS and not any(n.startswith("torch_mlir") for n in imported), imported
    assert ("aot.export(" in source) == target.startswith("turbine")
    assert ("torch.onnx.export(" in source) != target.startswith("turbine")


# -- pipeline tier ----------------------------------------------------------------

def road_entry(config: DLRMConfig, target: str) -> CorpusEntry:
    """The bucket the fuzzer files for ``config`` failing on the road
    ``target``: keyed from the real failure and owned as blame owns it."""
    from fuzz.targets.pipeline import StageFailure, Timer
    from oracles.classify import classify
    from oracles.signature import error_key

    sample, road = tiny_sample(config), TARGETS[target]
    with pytest.raises(StageFailure) as failed:
        road.compile(config, sample.seed, sample.batches[0].flat(), Timer(), None)
    failure = failed.value.failure
    verdict, line, op = classify(failure)
    owner = failure.owner or road.owner(failure.stage.value)
    return make_entry(sample, error_key(verdict, owner, op, line), target, (target,), stage=failure.stage,
                      op=op, error=failure.message)


@pytest.mark.pipeline
@pytest.mark.slow  # ~29 s: the Loop blocker below keeps the road-op form on the main tier
def test_torch_onnx_without_a_function_for_the_8_bit_bag_reproduces_as_that_op_alone(
        no_fuzz_python: str, tmp_path: Path) -> None:
    """8-bit quantized tables: torch.onnx has no ONNX function for their bag
    op. The repro is that op alone through torch.onnx and onnxruntime: exit 1
    with the stored key; with the call patched out, export and session pass: 0."""
    entry = road_entry(one_table(quantize_bits=8), "onnxruntime-loopfree-dyn")
    assert entry.signature.startswith("EXPORT_ERROR|torch.onnx|quantized.embedding_bag_byte_rowwise_offsets|")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "road-op" and repro.status == "reproduces", repro
    script = (tmp_path / "repro.py").read_text()
    call = "torch.ops.quantized.embedding_bag_byte_rowwise_offsets.default(a0, a1, a2"
    assert call in script and "import onnxruntime as ort" in script
    assert_standalone(tmp_path)
    line = next(l for l in script.splitlines() if call in l)
    (tmp_path / "repro.py").write_text(script.replace(line, "        return a0.float()"))
    fixed = subprocess.run([no_fuzz_python, "-I", "repro.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "export passed: fixed" in fixed.stdout and "signature:" not in fixed.stdout


@pytest.mark.pipeline
def test_the_onnx_loop_blocker_reproduces_as_one_bag(no_fuzz_python: str, tmp_path: Path) -> None:
    """The plain ONNX export writes a bag as an onnx.Loop that iree-compile
    cannot convert: one ``embedding_bag`` alone shows it, with its own
    model.onnx and commands.sh beside the script."""
    entry = road_entry(one_table(), "onnx-iree-cpu")
    assert entry.op == "onnx.Loop" and has_single_op_form(entry)
    repro = write_repro(tmp_path, entry, check=False, one_op_only=True)
    assert repro.kind == "road-op", repro
    assert "torch.ops.aten.embedding_bag.padding_idx(a0, a1, a2, " in (tmp_path / "repro.py").read_text()
    commands = (tmp_path / "commands.sh").read_text()
    assert "iree-import-onnx model.onnx" in commands and "iree-compile" in commands \
        and "iree-run-module" in commands
    assert (tmp_path / "model.onnx").stat().st_size > 0
    assert_standalone(tmp_path)
    code, output = run_repro(tmp_path, timeout_s=300, python=no_fuzz_python)
    assert code == 1 and f"signature: {entry.signature}" in output, output


@pytest.mark.pipeline
@pytest.mark.slow  # ~11 s: the search runs to its end
def test_a_fault_that_needs_the_models_state_falls_back_to_the_road_form(tmp_path: Path) -> None:
    """turbine's import refuses a large bfloat16 constant (a table of 400
    rows): no op's module, whose operands are inputs, fails so; the one-op
    form says so, and write_repro writes the road form."""
    entry = road_entry(tiny_config(dtype="bfloat16", ln_emb=(400, 20, 30)), "turbine-iree-cpu")
    assert entry.signature == "LOWERING_UNSUPPORTED_OP|iree-turbine|Got unsupported ScalarType BFloat16"
    assert has_single_op_form(entry)
    repro = write_repro(tmp_path, entry, check=False)
    assert (repro.kind, repro.status) == ("road", "not checked (road-op form: no single op of the model "
                                                  "fails the road so)"), repro
    assert "class Model(torch.nn.Module)" in (tmp_path / "repro.py").read_text()
    assert not list(tmp_path.glob("arg*.npy"))


@pytest.mark.pipeline
def test_a_road_program_that_does_not_run_on_its_own_batch_gives_a_cannot_run_one_op_form(
        tmp_path: Path) -> None:
    """The loop-free dynamic road re-exports with automatic dimensions, which
    may specialize the program to its tracing example: it then fails on
    batch 0 (seed 1, 2026-12-07: an IndexError in the interaction that ended
    the report job as a harness error). The one-op search has no arguments to
    record and says why (a cannot-run one-op form: the campaign shrinks the
    case and writes its road form, ``_one_op_first``), never raises."""
    config = tiny_config(m_spa=1, ln_emb=(1,), ln_bot=(1, 1), ln_top=(2, 1), index_dtype="int32")
    batch = Batch(np.array([[0.5]], np.float32), (np.array([0], np.int32),), (np.zeros(0, np.int32),))
    entry = make_entry(Sample(config, 0, (batch,)), INVALID_GATHER_ND, "onnxruntime-loopfree-dyn",
                       ("onnxruntime-loopfree-dyn",), stage=Stage.EXPORT)
    first = write_repro(tmp_path, entry, check=False, one_op_only=True)
    assert first.kind == "road-op" and first.status.startswith(
        "cannot run: the exported program does not run on batch 0: IndexError"), first

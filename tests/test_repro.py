"""Standalone reproducers: ``repro.py`` fails the same way the stored case did,
passes once the bug is absent, and needs nothing of dlrm-fuzz.

Unit tier: target choice, fault words, the imports of generated scripts
(written unchecked; no compiler runs), and exit 2 for an exception a script
did not expect. Pipeline tier (``-m pipeline``): the known bugs of torch 2.13
/ torch-mlir 20261001 / IREE 3.13 (weighted pooling miscompiled, also on
refbackend alone; int32 indices failing to lower; an empty index table
failing on Vulkan with dynamic shapes; export failing on a 4-bit bag op and
a qint8 MLP) reproduce, and a case whose bug is absent (or a low-precision
op IREE computes right) gives a repro that exits 0. Every script runs in an
interpreter where ``import fuzz`` fails.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fuzz.model.config import DLRMConfig
from fuzz.store.corpus import CorpusEntry
from fuzz.reports.repro import (ALLOWED_IMPORTS, RUNTIME_FILE, Repro, fault_parts, has_single_op_form,
                                repro_target, run_repro, write_repro)
from fuzz.model.sample import Batch, Sample
from oracles.results import Stage
from oracles.signature import error_key
from oracles.verdict import Verdict
from tests.helpers import tiny_config, tiny_sample

WEIGHTED = "MISMATCH|torch-mlir:linalg-on-tensors|op:aten.embedding_bag.padding_idx[per_sample_weights]"
INT32 = ("LOWERING_INVALID_IR|torch-mlir:linalg-on-tensors|arith.select|error: 'arith.select' op "
         "failed to verify that all of {true_value, false_value, result} have same type")
GATHER_ND = ("EXPORT_ERROR|torch.onnx|[ONNXRuntimeError] : N : INVALID_GRAPH : This is an invalid model. "
             "Type Error: Type 'tensor(int32)' of input parameter (val) of operator (GatherND) in node "
             "(node_GatherND) is invalid.")
CONCAT = ("EXPORT_ERROR|torch.onnx|[ONNXRuntimeError] : N : FAIL : Type Error: Type parameter (T) of Optype "
          "(Concat) bound to different types (tensor(int32) and tensor(int64) in node (n).")
VULKAN_EMPTY = ("RUNTIME_ERROR|iree:vulkan-spirv|Error invoking function: <src>: INVALID_ARGUMENT; "
                "Vulkan dispatch binding N resolved to an empty buffer range")


def one_table(**overrides: Any) -> DLRMConfig:
    """The tiny config cut to one table (the shape shrinking leaves)."""
    return tiny_config(ln_emb=(10,), ln_top=(5, 1), **overrides)


def make_entry(sample: Sample, signature: str, target: str, seen_on: tuple[str, ...],
               stage: Stage = Stage.RUN, **fields: Any) -> CorpusEntry:
    verdict = Verdict(signature.split("|", 1)[0])
    return CorpusEntry(bucket=f"{verdict.value.lower()}-test", signature=signature, verdict=verdict,
                       owner=signature.split("|")[1], target=target, sample=sample, stage=stage,
                       seen_on=seen_on, **fields)


def weighted_entry(sample: Sample) -> CorpusEntry:
    return make_entry(sample, WEIGHTED, "refbackend", ("refbackend", "iree-cpu", "iree-cpu-dyn"),
                      culprit="op:aten.embedding_bag.padding_idx[per_sample_weights]")


def int32_entry(sample: Sample) -> CorpusEntry:
    return make_entry(sample, INT32, "refbackend", ("refbackend", "iree-cpu"), stage=Stage.IMPORT,
                      op="arith.select")


def empty_table_sample() -> Sample:
    """One example whose only table gets no indices (an empty bag)."""
    config = tiny_config(m_spa=1, ln_emb=(1,), ln_bot=(1, 1), ln_top=(2, 1))
    batch = Batch(np.array([[0.5]], np.float32), (np.array([0], np.int64),), (np.zeros(0, np.int64),))
    return Sample(config, 3, (batch,))


def imported_modules(script: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(str(node.module))
    return names


def assert_standalone(folder: Path) -> None:
    found = imported_modules(folder / "repro.py")
    if (folder / RUNTIME_FILE).exists():  # a refbackend repro's runtime
        found |= imported_modules(folder / RUNTIME_FILE)
    assert found <= ALLOWED_IMPORTS, found - ALLOWED_IMPORTS
    assert not any(n.split(".")[0] in ("fuzz", "strategies", "oracles", "tests") for n in found)


_BLOCKER = """import importlib.abc, sys
sys.path.append({site!r})  # the toolchain, without the site's .pth files (an editable dlrm-fuzz)
class NoFuzz(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('fuzz', 'strategies', 'oracles', 'tests'):
            raise ModuleNotFoundError(f'No module named {{name!r}} (a repro must not need it)')
sys.meta_path.insert(0, NoFuzz())
"""


@pytest.fixture(scope="session")
def no_fuzz_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter with the toolchain but where ``import fuzz`` fails (a
    bare venv whose startup ``.pth`` appends this environment's packages and
    refuses dlrm-fuzz's): a repro run there cannot lean on dlrm-fuzz, however
    it is installed here (editable, or a wheel under tox)."""
    import subprocess
    import sys
    import sysconfig
    import venv

    root = tmp_path_factory.mktemp("no-fuzz-venv")
    venv.create(root, with_pip=False)
    python = str(root / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "no_fuzz.py").write_text(_BLOCKER.format(site=sysconfig.get_paths()["purelib"]))
    (Path(site) / "no_fuzz.pth").write_text("import no_fuzz\n")
    probe = subprocess.run([python, "-I", "-c", "import numpy\nimport fuzz"], capture_output=True, text=True)
    assert probe.returncode == 1 and "a repro must not need it" in probe.stderr, probe.stderr
    assert sys.executable != python
    return python


def assert_reproduces(repro: Repro, folder: Path, signature: str, python: str) -> None:
    assert repro.status == "reproduces", repro
    assert repro.exit_code == 1
    assert f"signature: {signature}" in repro.output
    assert_standalone(folder)
    code, output = run_repro(folder, timeout_s=300, python=python)  # python -I, again, without fuzz
    assert code == 1, output
    assert f"signature: {signature}" in output


# -- unit tier --------------------------------------------------------------------

def test_repro_target_prefers_the_familiar_iree_target_with_the_same_lowering() -> None:
    sample = tiny_sample(one_table())
    assert repro_target(weighted_entry(sample)).name == "iree-cpu"
    vmvx = make_entry(sample, WEIGHTED, "refbackend-dyn", ("refbackend-dyn", "iree-vmvx-dyn", "iree-torch"))
    assert repro_target(vmvx).name == "iree-vmvx-dyn"
    own = make_entry(sample, VULKAN_EMPTY, "iree-vulkan-dyn", ("iree-vulkan-dyn",))
    assert repro_target(own).name == "iree-vulkan-dyn"
    alone = make_entry(sample, WEIGHTED, "refbackend", ("refbackend",))
    assert repro_target(alone).name == "refbackend"  # no IREE target showed it


def test_a_bug_blamed_on_refbackend_gets_a_refbackend_repro() -> None:
    """An IREE repro of refbackend's own bug would pass (or fail another way):
    the repro drives refbackend, even where IREE targets ran the case too."""
    sample = tiny_sample(one_table())
    blamed = make_entry(sample, "COMPILE_ERROR|torch-mlir:refbackend|boom", "refbackend-dyn",
                        ("refbackend-dyn", "iree-cpu-dyn"), stage=Stage.COMPILE)
    assert repro_target(blamed).name == "refbackend-dyn"
    assert repro_target(weighted_entry(sample)).name == "iree-cpu"  # IREE shows torch-mlir's bug too


def test_fault_parts_are_the_literal_words_of_the_key() -> None:
    entry = make_entry(empty_table_sample(), VULKAN_EMPTY, "iree-vulkan-dyn", ("iree-vulkan-dyn",))
    assert fault_parts(entry) == ["Error invoking function:", ": INVALID_ARGUMENT; Vulkan dispatch binding",
                                  "resolved to an empty buffer range"]
    quantized = make_entry(empty_table_sample(),
                           "LOWERING_UNSUPPORTED_OP|torch-mlir:torch|torch.quantized.x|error: failed to "
                           "legalize operation 'torch.operator' that was explicitly marked illegal: "
                           'name = "torch.quantized.x"', "iree-torch", ("iree-torch",),
                           stage=Stage.IMPORT, op="torch.quantized.x")
    assert fault_parts(quantized) == ["error: failed to legalize operation 'torch.operator' that was "
                                      "explicitly marked illegal", '"torch.quantized.x"']


@pytest.mark.parametrize("signature, text", [
    (GATHER_ND, "[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: Type "
                "'tensor(int32)' of input parameter (val_5) of operator (GatherND) in node (node_GatherND_7) "
                "is invalid."),
    # seed 97: the loop-free export's Concat of int32 and int64 (node n14_n0_3 -> n)
    (CONCAT, "[ONNXRuntimeError] : 1 : FAIL : Type Error: Type parameter (T) of Optype (Concat) bound to "
             "different types (tensor(int32) and tensor(int64) in node (n14_n0_3)."),
])
def test_fault_parts_let_the_exporters_names_keep_their_numbers(signature: str, text: str) -> None:
    """The key drops the numbers of ONNX value and node names (val_5 ->
    val, node_GatherND_7 -> node_GatherND, n14_n0_3 -> n); a script's words
    must still find them in the tool's own text, numbered."""
    entry = make_entry(tiny_sample(one_table()), signature, "onnxruntime-loopfree-dyn",
                       ("onnxruntime-loopfree-dyn",), stage=Stage.EXPORT)
    assert error_key(Verdict.EXPORT_ERROR, "torch.onnx", None, text) == signature
    at = 0
    for part in fault_parts(entry):
        at = text.find(part, at)
        assert at >= 0, part
        at += len(part)


@pytest.mark.parametrize("which", ["weighted", "int32", "vulkan", "model-mismatch", "refbackend"])
def test_generated_repros_import_only_the_toolchain(tmp_path: Path, which: str) -> None:
    sample = tiny_sample(one_table(weighted_pooling="fixed"))
    entry = {"weighted": lambda: weighted_entry(sample),
             "int32": lambda: int32_entry(tiny_sample(one_table(index_dtype="int32"))),
             "vulkan": lambda: make_entry(empty_table_sample(), VULKAN_EMPTY, "iree-vulkan-dyn",
                                          ("iree-vulkan-dyn",)),
             "model-mismatch": lambda: make_entry(sample, WEIGHTED.replace("op:", "features:"),
                                                  "iree-cpu", ("iree-cpu",)),
             "refbackend": lambda: make_entry(sample, WEIGHTED.replace("op:", "features:"),
                                              "refbackend", ("refbackend",))}[which]()
    repro = write_repro(tmp_path, entry, check=False)
    assert repro.status == "not checked" and repro.exit_code is None
    assert repro.kind == ("single-op" if which == "weighted" else "model")
    assert_standalone(tmp_path)
    source = (tmp_path / "repro.py").read_text()
    compile(source, "repro.py", "exec")  # valid Python
    assert ("RefBackendModule(mlir)" in source) == (which == "refbackend")
    assert (tmp_path / RUNTIME_FILE).exists() == (which == "refbackend")
    assert repro.lines == len((tmp_path / "repro.py").read_text().splitlines())
    if which in ("int32", "refbackend"):  # a lowering failure, or refbackend, needs no IREE
        assert not any(n.startswith("iree") for n in imported_modules(tmp_path / "repro.py"))
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_a_repro_never_overwrites_the_stored_cases_inputs(tmp_path: Path) -> None:
    """A report job whose case was replaced while it ran (a smaller case from
    shrinking or generation) writes its repro from the old case: it must not
    write the old batches over the new case's inputs.npz, or the folder no
    longer loads (seed 97: the new config with 8-wide dense batches). In a
    folder without them, the model form writes them."""
    sample = tiny_sample(one_table(weighted_pooling="fixed"))
    entry = make_entry(sample, WEIGHTED.replace("op:", "features:"), "iree-cpu", ("iree-cpu",))
    newer = tiny_sample(one_table(weighted_pooling="fixed"), seed=8).npz_bytes()
    stored, fresh = tmp_path / "stored", tmp_path / "fresh"
    stored.mkdir()
    fresh.mkdir()
    (stored / "inputs.npz").write_bytes(newer)
    assert write_repro(stored, entry, check=False).kind == "model"
    assert (stored / "inputs.npz").read_bytes() == newer
    assert write_repro(fresh, entry, check=False).kind == "model"
    assert (fresh / "inputs.npz").read_bytes() == sample.npz_bytes() != newer


@pytest.mark.engine
@pytest.mark.parametrize("form", ["single-op", "model", "hang"])
def test_an_exception_a_repro_did_not_expect_exits_2_not_1(
        no_fuzz_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    """Exit 1 means "bug present" only: a script that dies of an error it did
    not expect (here the data it loads is gone) cannot run, exit 2, in every
    form, the crash/hang supervisor's parent included."""
    import fuzz.reports.repro.graph

    sample = tiny_sample(one_table(weighted_pooling="fixed"))
    if form == "single-op":
        monkeypatch.setattr(fuzz.reports.repro.graph, "INLINE_MAX_ELEMENTS", 0)  # every operand in an arg*.npy
        entry, gone = weighted_entry(sample), "arg0.npy"
    elif form == "model":
        entry, gone = make_entry(sample, WEIGHTED.replace("op:", "features:"), "iree-cpu",
                                 ("iree-cpu",)), "params.npz"
    else:
        entry, gone = make_entry(sample, "TIMEOUT|iree:llvm-cpu|no answer within Ns (stage compile)",
                                 "iree-cpu", ("iree-cpu",), stage=Stage.COMPILE,
                                 error="no answer within 300s (stage compile)"), "params.npz"
    assert write_repro(tmp_path, entry, check=False).kind == form.replace("hang", "model")
    (tmp_path / gone).unlink()
    code, output = run_repro(tmp_path, timeout_s=120, python=no_fuzz_python)
    assert code == 2, output
    assert "cannot run: unexpected FileNotFoundError" in output, output
    assert "Traceback" in output  # the cause is still shown
    assert "signature:" not in output


# -- pipeline tier ----------------------------------------------------------------

@pytest.mark.pipeline
# inline weights (~22 s) in the slow tier: inputs keep the form on the main tier
@pytest.mark.parametrize("weights", [pytest.param("inline", marks=pytest.mark.slow), "inputs"])
def test_weighted_pooling_mismatch_gives_a_single_op_repro(no_fuzz_python: str, tmp_path: Path, weights: str) -> None:
    """The op's operands are captured from an eager run of the exported
    program; with weights as inputs the seed's weights lead its inputs."""
    sample = tiny_sample(one_table(weighted_pooling="fixed", weights=weights))
    repro = write_repro(tmp_path, weighted_entry(sample), timeout_s=300)
    assert (repro.kind, repro.target) == ("single-op", "iree-cpu")
    # with the exit-2 guard, the twin's dtype switch, the target's facts as
    # constants (templates/single_op.py), the helpers' docstrings and the
    # twin's default dtype (twin_mode)
    assert repro.lines <= 60, repro.lines
    assert "torch.ops.aten.embedding_bag.padding_idx(" in (tmp_path / "repro.py").read_text()
    assert_reproduces(repro, tmp_path, WEIGHTED, no_fuzz_python)


@pytest.mark.pipeline
# inline weights (~24 s) in the slow tier: the two inputs cases stay on the main tier
@pytest.mark.parametrize("weights, target", [pytest.param("inline", "iree-cpu", marks=pytest.mark.slow),
                                             ("inputs", "iree-cpu"), ("inputs", "iree-cpu-dyn")])
def test_mismatch_without_a_culprit_op_gives_a_model_repro(no_fuzz_python: str, tmp_path: Path, weights: str,
                                                            target: str) -> None:
    """The model form follows the case's weight form: with weights as program
    inputs, the script passes them before each batch (weights.npz)."""
    signature = WEIGHTED.replace("op:aten.embedding_bag.padding_idx[per_sample_weights]",
                                 "features:weighted_pooling=fixed")
    # A sigmoid on top: a final ReLU could clip the wrong pooled value away.
    config = one_table(weighted_pooling="fixed", sigmoid_top=0, weights=weights)
    entry = make_entry(tiny_sample(config), signature, target, (target,),
                       culprit="features:weighted_pooling=fixed")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "model"
    assert (tmp_path / "params.npz").exists()
    assert (tmp_path / "weights.npz").exists() == (weights == "inputs")
    assert_reproduces(repro, tmp_path, signature, no_fuzz_python)


@pytest.mark.pipeline
def test_the_model_repro_of_a_float16_model_judges_every_batch(tmp_path: Path) -> None:
    """A float16 model's graph names its dtype in casts and in torch.export's
    metadata checks (bfloat16 too, but its inline tables do not compile on
    llvm-cpu: compile_error-0b39ec9e1a71): the float64 twin the script judges
    against must compute those in float64. (Found on a GPU campaign: such
    repros died "Tensor dtype mismatch! Expected: Float, Got: double" before
    judging anything, so no low-precision wrong answer could be reported.)"""
    signature = WEIGHTED.replace("op:aten.embedding_bag.padding_idx[per_sample_weights]",
                                 "features:weighted_pooling=fixed")
    config = one_table(weighted_pooling="fixed", sigmoid_top=0, weights="inputs", dtype="float16")
    entry = make_entry(tiny_sample(config, batches=2), signature, "iree-cpu-dyn",
                       ("iree-cpu-dyn",), culprit="features:weighted_pooling=fixed")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "model"
    assert "Error" not in repro.output, repro.output
    judged = [line for line in repro.output.splitlines() if "elements off tolerance" in line]
    assert [line.split(":")[0] for line in judged] == ["batch 0", "batch 1"], repro.output


@pytest.mark.pipeline
def test_int32_lowering_failure_reproduces(no_fuzz_python: str, tmp_path: Path) -> None:
    entry = int32_entry(tiny_sample(one_table(index_dtype="int32")))
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "model"
    assert "import failed" in repro.output
    assert_reproduces(repro, tmp_path, INT32, no_fuzz_python)


@pytest.mark.pipeline
def test_vulkan_dynamic_empty_table_runtime_error_reproduces(no_fuzz_python: str, tmp_path: Path) -> None:
    from fuzz.targets.devices import device_availability

    ok, why = device_availability("vulkan")
    if not ok:
        pytest.skip(why)
    entry = make_entry(empty_table_sample(), VULKAN_EMPTY, "iree-vulkan-dyn", ("iree-vulkan-dyn",))
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.target == "iree-vulkan-dyn"
    assert "hal.device.targets" in (tmp_path / "repro.py").read_text()
    assert_reproduces(repro, tmp_path, VULKAN_EMPTY, no_fuzz_python)


@pytest.mark.pipeline
@pytest.mark.parametrize("which", ["weighted", "int32"])
def test_a_case_whose_bug_is_absent_gives_a_repro_that_exits_0(no_fuzz_python: str, tmp_path: Path, which: str) -> None:
    """The entry claims a bug its sample does not have (no pooling weights;
    int64 indices): what is written must pass, and say it does not reproduce."""
    if which == "weighted":
        entry = weighted_entry(tiny_sample(one_table(weighted_pooling=None)))
    else:
        entry = int32_entry(tiny_sample(one_table(index_dtype="int64")))
    if which == "weighted":  # the campaign's first report of an op-level bucket: one op only
        (tmp_path / "first").mkdir()
        first = write_repro(tmp_path / "first", entry, timeout_s=300, one_op_only=True)
        assert first.kind == "single-op" and first.status.startswith("does not reproduce"), first
        # No op of the sample fails so: nothing written, no model form after it
        # (the shrunk case's report writes that).
        assert not (tmp_path / "first" / "repro.py").exists()
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.exit_code == 0, repro
    assert repro.status.startswith("does not reproduce"), repro.status
    assert "signature:" not in repro.output
    assert not list(tmp_path.glob("arg*.npy"))  # the abandoned single-op form left nothing
    code, _ = run_repro(tmp_path, timeout_s=300, python=no_fuzz_python)
    assert code == 0


@pytest.mark.pipeline
def test_single_op_repro_exits_0_once_the_op_is_fixed(no_fuzz_python: str, tmp_path: Path) -> None:
    """A fake fixed toolchain: the same single-op script, with the IREE call
    answering what the op should (the float64 result, rounded to float32)."""
    repro = write_repro(tmp_path, weighted_entry(tiny_sample(one_table(weighted_pooling="fixed"))),
                        timeout_s=300)
    assert repro.status == "reproduces"
    script = tmp_path / "repro.py"
    text = script.read_text()
    fixed = "np.asarray(Op()(*tensors(True)).numpy().astype(np.float32))"
    assert "np.asarray(ctx.modules.module['main'](*ARGS).to_host())" in text
    script.write_text(text.replace("np.asarray(ctx.modules.module['main'](*ARGS).to_host())", fixed))
    code, output = run_repro(tmp_path, timeout_s=300, python=no_fuzz_python)
    assert code == 0, output
    assert "signature:" not in output


def test_write_repro_rejects_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="folder="):
        write_repro(tmp_path / "nope", weighted_entry(tiny_sample(one_table())), check=False)


@pytest.mark.engine
def test_run_repro_reports_a_timeout(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text("import time\ntime.sleep(30)\n")
    code, output = run_repro(tmp_path, timeout_s=1)
    assert code == 124 and "timed out" in output
    shutil.rmtree(tmp_path)


@pytest.mark.pipeline
@pytest.mark.parametrize("limit, code", [(0.5, 1), (300, 0)])
def test_a_hang_repro_supervises_a_child_for_the_fuzzers_time_limit(
        tmp_path: Path, limit: float, code: int) -> None:
    """A TIMEOUT bucket: the script runs its stages in a child and calls it the
    bug (exit 1) when the child is still busy after the fuzzer's limit, read
    from the entry. Half a second is less than the stages take (the bug
    "present"); five minutes is plenty (the compile passes: "fixed")."""
    signature = "TIMEOUT|iree:llvm-cpu|no answer within Ns (stage compile); worker killed"
    entry = make_entry(tiny_sample(one_table()), signature, "iree-cpu", ("iree-cpu",),
                       stage=Stage.COMPILE,
                       error=f"no answer within {limit:g}s (stage compile); worker killed")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.exit_code == code, repro
    assert "HANG = " in (tmp_path / "repro.py").read_text()
    if code == 1:
        assert repro.status == "reproduces" and "compile hung: no answer within 0.5 s" in repro.output
    else:
        assert "compile passed: fixed" in repro.output and "signature:" not in repro.output
    assert_standalone(tmp_path)


@pytest.mark.pipeline
def test_default_vulkan_target_bug_reproduces_on_that_target_as_one_op(no_fuzz_python: str,
                                                                       tmp_path: Path) -> None:
    """A repro compiles for the target the bug was seen on: for
    `iree-vulkan-default` IREE's default (int64-less) target, not the
    described device (where the same program compiles). The QR model's i64
    remainder fails alone: the repro is that one op (the backend form,
    found first among the ops because the error names ``arith.remsi``),
    exit 1 with the stored key, and 0 compiled for llvm-cpu, where the
    remainder is legal."""
    import subprocess

    from fuzz.targets import devices

    ok, why = devices.device_availability("vulkan")
    if not ok:
        pytest.skip(why)
    signature = ("COMPILE_ERROR|iree|arith.remsi|error: failed to legalize operation "
                 "'arith.remsi' that was explicitly marked illegal")  # as bucketing keys it
    sample = tiny_sample(one_table(qr_flag=True, qr_threshold=4, qr_collisions=3))
    entry = make_entry(sample, signature, "iree-vulkan-default", ("iree-vulkan-default",),
                       stage=Stage.COMPILE, op="arith.remsi")
    assert has_single_op_form(entry)
    repro = write_repro(tmp_path, entry, timeout_s=300, one_op_only=True)
    assert repro.kind == "backend", repro
    assert_reproduces(repro, tmp_path, signature, no_fuzz_python)
    script = (tmp_path / "repro.py").read_text()
    assert "DEVICE_TARGETS = ''" in script and "torch.ops.aten.remainder.Scalar(a0, 3)" in script
    assert imported_modules(tmp_path / "repro.py") <= {
        "os", "sys", "tempfile", "numpy", "torch", "torch_mlir", "iree.compiler", "iree.runtime"}
    (tmp_path / "repro.py").write_text(script.replace("BACKEND = 'vulkan-spirv'", "BACKEND = 'llvm-cpu'"))
    fixed = subprocess.run([no_fuzz_python, "-I", "repro.py"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "compile passed: fixed" in fixed.stdout and "signature:" not in fixed.stdout


def test_a_report_after_a_fruitless_op_search_does_not_search_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket whose first report searched its model for one failing op and
    found none (``searched``) gets the model form at once after shrinking,
    its status saying the search ran on the case before; a first report
    (``one_op_only``) always searches."""
    from fuzz.reports.repro import write

    forms: list[str] = []

    def attempt(folder: Path, entry: CorpusEntry, target: Any, form: str, check: bool,
                timeout_s: float) -> Repro:
        forms.append(form)
        return Repro(form, target.name, 10, "does not reproduce: exit 0", 0, "")

    monkeypatch.setattr(write, "_attempt", attempt)
    signature = ("COMPILE_ERROR|iree|arith.remsi|error: failed to legalize operation "
                 "'arith.remsi' that was explicitly marked illegal")
    entry = make_entry(tiny_sample(one_table(qr_flag=True, qr_threshold=4, qr_collisions=3)),
                       signature, "iree-vulkan-default", ("iree-vulkan-default",),
                       stage=Stage.COMPILE, op="arith.remsi")
    write.write_repro(tmp_path, entry)
    assert forms == ["backend", "model"]
    forms.clear()
    again = write.write_repro(tmp_path, entry, searched=True)
    assert forms == ["model"] and again.kind == "model"
    assert again.status.endswith("(backend form: no op of the model alone fails so; "
                                 "searched on the case before shrinking)"), again.status
    forms.clear()
    write.write_repro(tmp_path, entry, one_op_only=True, searched=True)
    assert forms == ["backend"]


def test_the_ops_an_iree_error_names_are_tried_first() -> None:
    """``arith.remsi`` comes from a remainder, a bf16 constant from an op on
    bfloat16: those op kinds lead the backend form's search; each op kind
    (op and input dtypes) is tried once, inert ops never."""
    import torch

    from fuzz.reports.repro.backend_error import backend_candidates

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            y = torch.relu(x) + torch.relu(x * 2)
            return y.bfloat16().sigmoid().float() + (i % 3).float()

    graph = torch.export.export(Model(), (torch.ones(2, 3), torch.arange(3))).graph_module
    names = [str(n.target) for n in backend_candidates(graph, "error: failed to legalize "
                                                        "operation 'arith.remsi' (i64, i64)")]
    assert names[0] == "aten.remainder.Scalar" and names.count("aten.relu.default") == 1
    assert not any(name.startswith("aten._assert_tensor_metadata") for name in names)
    bf16 = [str(n.target) for n in backend_candidates(graph, "%0 = arith.constant 0.0 : bf16")]
    assert bf16[0] == "aten.sigmoid.default", bf16


@pytest.mark.pipeline
@pytest.mark.parametrize("dtype, culprit", [("bfloat16", "op:aten.sigmoid.default"),
                                            ("float16", "op:aten.to.dtype")])
def test_a_low_precision_single_op_repro_judges_in_its_own_dtypes(
        no_fuzz_python: str, tmp_path: Path, dtype: str, culprit: str) -> None:
    """The single op of a float16 / bfloat16 model: its float64 twin computes
    the dtypes the op names in float64 (the twin died "Tensor dtype mismatch!"
    before), and bfloat16 operands, which numpy cannot hold, enter as float32
    and are cast inside. IREE computes both right: a verdict, exit 0."""
    from fuzz.reports.repro.write import _attempt
    from fuzz.targets.catalog import TARGETS, IreeTarget

    sample = tiny_sample(one_table(dtype=dtype, sigmoid_top=0))
    entry = make_entry(sample, f"MISMATCH|torch-mlir:linalg-on-tensors|{culprit}", "iree-cpu",
                       ("iree-cpu",), culprit=culprit)
    target = TARGETS["iree-cpu"]
    assert isinstance(target, IreeTarget)
    repro = _attempt(tmp_path, entry, target, "single-op", True, 300)
    assert repro is not None and repro.kind == "single-op"
    assert repro.exit_code == 0, repro.output
    assert re.search(r"\b0/\d+ elements off tolerance", repro.output), repro.output
    assert f"_f(torch.{dtype})" in (tmp_path / "repro.py").read_text()
    code, output = run_repro(tmp_path, timeout_s=300, python=no_fuzz_python)
    assert code == 0, output


@pytest.mark.pipeline
@pytest.mark.parametrize("form", ["single-op", "model"])
def test_a_refbackend_only_wrong_answer_gets_a_refbackend_repro_that_exits_1(
        no_fuzz_python: str, tmp_path: Path, form: str) -> None:
    """A wrong answer seen on refbackend alone (torch-mlir's weighted pooling,
    from a campaign that ran no IREE target): the repro lowers with
    torch-mlir, compiles with its refback passes and runs on the MLIR
    ExecutionEngine, with no IREE anywhere, and exits 1."""
    culprit = "op:aten.embedding_bag.padding_idx[per_sample_weights]" if form == "single-op" \
        else "features:weighted_pooling=fixed"
    signature = f"MISMATCH|torch-mlir:linalg-on-tensors|{culprit}"
    entry = make_entry(tiny_sample(one_table(weighted_pooling="fixed", sigmoid_top=0)), signature,
                       "refbackend", ("refbackend",), culprit=culprit)
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert (repro.kind, repro.target) == (form, "refbackend")
    assert "class RefBackendModule" not in (tmp_path / "repro.py").read_text()  # it lies beside it
    assert "class RefBackendModule" in (tmp_path / RUNTIME_FILE).read_text()
    assert "elements off tolerance" in repro.output
    assert not any(n.startswith("iree") for n in imported_modules(tmp_path / "repro.py"))
    assert_reproduces(repro, tmp_path, signature, no_fuzz_python)


def export_error_entry(config: DLRMConfig, target: str) -> CorpusEntry:
    """The bucket the fuzzer files for ``config``'s export failure on
    ``target``: keyed from the real failure, as triage keys it."""
    return failing_entry(config, target, Stage.EXPORT)


def failing_entry(config: DLRMConfig, target: str, stage: Stage) -> CorpusEntry:
    """The bucket the fuzzer files for ``config`` failing at ``stage`` (export
    or lowering) on ``target``: keyed from the real failure, as triage keys it."""
    from fuzz.targets.pipeline import StageFailure, Timer
    from fuzz.targets.catalog import TARGETS, CompiledTarget
    from oracles.classify import classify
    from oracles.signature import error_key

    sample, compiled = tiny_sample(config), TARGETS[target]
    assert isinstance(compiled, CompiledTarget)
    with pytest.raises(StageFailure) as failed:
        compiled.lowered(config, sample.seed, sample.batches[0].flat(), Timer(), None)
    assert failed.value.stage is stage, failed.value.message
    verdict, line, op = classify(failed.value.failure)
    owner = "torch.export" if stage is Stage.EXPORT else f"torch-mlir:{compiled.output_type}"
    return make_entry(sample, error_key(verdict, owner, op, line), target, (target,),
                      stage=stage, op=op)


# What upstream would add for the 4-bit bag: a fake (meta) kernel, so that
# torch.export can trace it with symbolic shapes. Registered before the repro runs.
FAKE_4BIT_KERNEL = """
import runpy, torch
@torch.library.register_fake("quantized::embedding_bag_4bit_rowwise_offsets")
def _(weight, indices, offsets=None, scale_grad_by_freq=False, mode=0, pruned_weights=False,
      per_sample_weights=None, compressed_indices_mapping=None, include_last_offset=False):
    bags = offsets.size(0) - (1 if include_last_offset else 0)
    return weight.new_empty((bags, (weight.size(1) - 4) * 2), dtype=torch.float32)
runpy.run_path('repro.py', run_name='__main__')
"""


@pytest.mark.pipeline
def test_an_export_error_repro_exits_1_while_export_fails_and_0_once_it_passes(
        no_fuzz_python: str, tmp_path: Path) -> None:
    """A 4-bit quantized table exported with dynamic shapes: torch 2.13 has no
    fake kernel for its bag op. The repro is that op alone through
    torch.export, torch and numpy only; it exits 1 with the stored key, and 0
    once the missing kernel is registered (the failing piece, patched out)."""
    import subprocess

    entry = export_error_entry(one_table(quantize_bits=4), "iree-cpu-dyn")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "export", repro
    assert "torch.ops.quantized.embedding_bag_4bit_rowwise_offsets.default(" in (tmp_path / "repro.py").read_text()
    assert imported_modules(tmp_path / "repro.py") <= {"os", "sys", "tempfile", "numpy", "torch"}
    assert_reproduces(repro, tmp_path, entry.signature, no_fuzz_python)
    fixed = subprocess.run([no_fuzz_python, "-I", "-c", FAKE_4BIT_KERNEL], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "export passed: fixed" in fixed.stdout and "signature:" not in fixed.stdout


@pytest.mark.pipeline
def test_a_quantized_mlp_export_error_repro_rebuilds_the_packed_weights(no_fuzz_python: str,
                                                                        tmp_path: Path) -> None:
    """A qint8 MLP: torch.export cannot flatten the packed-weights object. The
    repro rebuilds it from plain arrays (int8 weight, scale, zero point) and
    fails the same way."""
    entry = export_error_entry(one_table(quantize_mlp="qint8"), "iree-cpu")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "export", repro
    assert "torch.ops.quantized.linear_prepack(" in (tmp_path / "repro.py").read_text()
    assert_reproduces(repro, tmp_path, entry.signature, no_fuzz_python)


@pytest.mark.pipeline
def test_a_lowering_failure_naming_an_op_gets_that_op_alone_as_its_repro(
        no_fuzz_python: str, tmp_path: Path) -> None:
    """Mean pooling: torch-mlir 20261001 cannot lower a mean-mode bag to
    linalg. The repro is that one ``embedding_bag`` through torch.export and
    torch-mlir (no IREE), exit 1 with the stored key; the same script with
    the bag's mode switched to sum (the lowering that exists) exits 0."""
    import subprocess

    entry = failing_entry(one_table(pooling="mean"), "refbackend", Stage.IMPORT)
    assert entry.verdict is Verdict.LOWERING_UNSUPPORTED_OP and entry.op == "torch.aten.embedding_bag.padding_idx"
    assert has_single_op_form(entry)
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "lowering", repro
    script = (tmp_path / "repro.py").read_text()
    call = re.search(r"torch\.ops\.aten\.embedding_bag\.padding_idx\(a0, a1, a2, False, 1, ", script)
    assert call is not None, script  # mode 1: mean
    assert imported_modules(tmp_path / "repro.py") <= {"os", "sys", "tempfile", "numpy", "torch", "torch_mlir"}
    assert_reproduces(repro, tmp_path, entry.signature, no_fuzz_python)
    (tmp_path / "repro.py").write_text(script.replace(call.group(0), call.group(0).replace(", 1, ", ", 0, ")))
    fixed = subprocess.run([no_fuzz_python, "-I", "repro.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "lowering passed: fixed" in fixed.stdout and "signature:" not in fixed.stdout


def test_only_lowering_failures_naming_a_torch_op_have_a_one_op_form() -> None:
    sample = tiny_sample(one_table())
    named = make_entry(sample, "LOWERING_UNSUPPORTED_OP|torch-mlir:tosa|torch.aten.gather|error: x", "iree-tosa",
                       ("iree-tosa",), stage=Stage.IMPORT, op="torch.aten.gather")
    assert has_single_op_form(named)
    assert not has_single_op_form(int32_entry(sample))  # arith.select: no torch op to cut out
    unnamed = make_entry(sample, "LOWERING_UNSUPPORTED_OP|torch-mlir:torch|error: x", "iree-torch",
                         ("iree-torch",), stage=Stage.IMPORT, op="torch.operator")
    assert not has_single_op_form(unnamed)


def test_the_float64_twin_computes_in_float64_what_the_program_leaves_to_the_default_dtype() -> None:
    """A QR model's ``indices / k`` takes torch's default dtype (float32), and
    torch.export checks it with ``_assert_tensor_metadata(dtype=float32)``:
    the twin reads that check as float64, so the division must be float64
    there too (it died "Tensor dtype mismatch! Expected: Double, Got: float",
    a bfloat16 QR wrong answer of seed 73 whose repro could not run)."""
    import torch

    from fuzz.reports.repro.script import _twin_dtypes

    program = _twin_dtypes([
        "def step(indices):",
        "    div = torch.ops.aten.div.Tensor(indices, 7)",
        "    torch.ops.aten._assert_tensor_metadata.default(div, dtype=torch.float32)",
        "    return div",
    ])
    scope: dict[str, Any] = {"torch": torch}
    exec("\n".join(program), scope)
    indices = torch.tensor([3, 15, 60])
    assert scope["step"](indices).dtype == torch.float32
    scope["twin_mode"](True)
    try:
        assert scope["step"](indices).dtype == torch.float64
    finally:
        scope["twin_mode"](False)
    assert torch.get_default_dtype() == torch.float32

"""Tool-ready files reproduce each kind of bucket without Python: the commands
``fuzz.reports.toolfiles`` returns are run as a reader of REPORT.md would run them
(torch-mlir-opt for a lowering failure, iree-compile for a compile failure,
iree-compile + iree-run-module for a runtime failure and a mismatch), and a
healthy program passes the same run with the same tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fuzz.store.corpus import CorpusEntry
from fuzz.model.sample import Sample
from fuzz.targets.catalog import TARGETS
from fuzz.reports.toolfiles import (COMPILE_FLAGS, RUN_FLAGS, ToolFiles, lowering_pipeline,
                            run_tool_commands, write_tool_files)
from oracles import Stage, Verdict
from tests.helpers import tiny_config, tiny_sample, varied_sample

ARITH_SELECT = ("error: 'arith.select' op failed to verify that all of "
                "{true_value, false_value, result} have same type")


def entry(sample: Sample, verdict: Verdict, target: str, stage: Stage, error: str = "",
          seen_on: tuple[str, ...] = ()) -> CorpusEntry:
    return CorpusEntry(bucket=f"{verdict.value.lower()}-test", signature="test", verdict=verdict,
                       owner="test", target=target, sample=sample, stage=stage, error=error,
                       seen_on=seen_on or (target,))


def tolerance_flags(folder: Path) -> list[str]:
    return [line for line in (folder / RUN_FLAGS).read_text().splitlines()
            if line.startswith(("--expected_f32_threshold=", "--expected_rtol="))]


# -- unit: no compiler ------------------------------------------------------
def test_pipelines_are_the_ones_fx_export_and_import_runs() -> None:
    prefix = ("builtin.module(func.func(torch-match-quantized-custom-ops), "
              "torchdynamo-export-to-torch-backend-pipeline")
    assert lowering_pipeline("torch") == prefix + ")"
    assert lowering_pipeline("linalg-on-tensors") == (
        prefix + ", torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=true})")
    assert lowering_pipeline("tosa") == prefix + ", torch-backend-to-tosa-backend-pipeline)"
    assert lowering_pipeline("stablehlo").endswith(
        "torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true})")
    with pytest.raises(ValueError, match="output_type='onnx'"):
        lowering_pipeline("onnx")


def test_export_failure_has_no_tool_and_says_why(tmp_path: Path) -> None:
    files = write_tool_files(tmp_path, entry(tiny_sample(), Verdict.EXPORT_ERROR, "iree-cpu",
                                             Stage.EXPORT, "torch._dynamo.exc.Unsupported"))
    assert files == ToolFiles("", "iree-cpu", (), (), files.expect)
    assert "PyTorch" in files.expect and list(tmp_path.iterdir()) == []
    assert run_tool_commands(tmp_path, files) == (0, "")
    assert files.to_dict()["commands"] == []


def test_a_file_in_place_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        write_tool_files(tmp_path / "f", entry(tiny_sample(), Verdict.EXPORT_ERROR, "iree-cpu",
                                               Stage.EXPORT))


# -- pipeline: the real tools -------------------------------------------------
@pytest.mark.pipeline
def test_mismatch_fails_iree_run_module_and_healthy_program_passes(tmp_path: Path) -> None:
    weighted = entry(tiny_sample(tiny_config(weighted_pooling="fixed")), Verdict.MISMATCH,
                     "iree-cpu", Stage.RUN, "2/2 elements off")
    files = write_tool_files(tmp_path / "bad", weighted)
    assert files.tool == "iree-run-module" and files.target == "iree-cpu"
    assert files.commands == ("iree-compile @compile.flagfile program.mlir -o module.vmfb",
                              "iree-run-module --flagfile=run.flagfile")
    assert {"program.mlir", COMPILE_FLAGS, RUN_FLAGS, "expected0.npy", "input0.npy",
            "input6.npy"} <= set(files.files)
    assert (tmp_path / "bad" / COMPILE_FLAGS).read_text().splitlines() == [
        "--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host"]
    assert np.load(tmp_path / "bad" / "expected0.npy").dtype == np.float32
    code, output = run_tool_commands(tmp_path / "bad", files)
    assert code != 0, output
    assert "[FAILED] result[0]" in output and "does not match the expected" in output

    healthy = entry(tiny_sample(tiny_config()), Verdict.MISMATCH, "iree-cpu", Stage.RUN)
    folder = tmp_path / "good"
    ok = write_tool_files(folder, healthy)
    # The mismatch's own tolerance, not a looser one computed for the healthy model.
    run_flags = (folder / RUN_FLAGS).read_text().splitlines()
    kept = [line for line in run_flags if line not in tolerance_flags(folder)]
    (folder / RUN_FLAGS).write_text("\n".join(kept + tolerance_flags(tmp_path / "bad")) + "\n")
    code, output = run_tool_commands(folder, ok)
    assert code == 0, output
    assert "all function outputs matched" in output


@pytest.mark.pipeline
def test_lowering_failure_reproduces_with_torch_mlir_opt(tmp_path: Path) -> None:
    # Stored on refbackend, as the campaign stores it: the files are for iree-cpu.
    failing = entry(tiny_sample(tiny_config(index_dtype="int32")), Verdict.LOWERING_INVALID_IR,
                    "refbackend", Stage.IMPORT, ARITH_SELECT, seen_on=("iree-cpu", "refbackend"))
    files = write_tool_files(tmp_path, failing)
    assert files.tool == "torch-mlir-opt" and files.target == "iree-cpu"
    assert files.files == ("input.torch.mlir",)
    assert files.commands == (f"torch-mlir-opt --pass-pipeline='{lowering_pipeline('linalg-on-tensors')}'"
                              f" input.torch.mlir -o lowered.mlir",)
    assert "torch.aten" in (tmp_path / "input.torch.mlir").read_text()  # torch dialect, unlowered
    code, output = run_tool_commands(tmp_path, files)
    assert code != 0
    assert files.expect == ARITH_SELECT and ARITH_SELECT in output, output


@pytest.mark.pipeline
def test_compile_failure_reproduces_with_iree_compile(tmp_path: Path) -> None:
    failing = entry(tiny_sample(tiny_config(index_dtype="int32")), Verdict.COMPILE_ERROR,
                    "iree-torch", Stage.COMPILE, f"program.mlir:1:1: {ARITH_SELECT}")
    files = write_tool_files(tmp_path, failing)
    assert files.tool == "iree-compile"
    assert files.commands == ("iree-compile @compile.flagfile program.mlir -o module.vmfb",)
    assert (tmp_path / COMPILE_FLAGS).read_text().splitlines()[:2] == [
        "--iree-hal-target-backends=llvm-cpu", "--iree-input-type=torch"]
    code, output = run_tool_commands(tmp_path, files)
    assert code != 0
    assert files.expect == ARITH_SELECT and ARITH_SELECT in output, output
    assert not (tmp_path / "module.vmfb").exists()


@pytest.mark.pipeline
def test_vulkan_runtime_failure_reproduces_with_iree_run_module(tmp_path: Path) -> None:
    target = TARGETS["iree-vulkan-dyn"]
    available, why = target.availability()
    if not available:
        pytest.skip(f"no Vulkan device: {why}")
    # Batches 0 and 1 run; batch 2 has a table with no indices: the one to write.
    sample = varied_sample()
    failing = entry(sample, Verdict.RUNTIME_ERROR, "iree-vulkan-dyn", Stage.RUN,
                    "Error invoking function: c/runtime/src/iree/hal/drivers/vulkan/command_buffer"
                    ".c:1337: INVALID_ARGUMENT; Vulkan dispatch binding 1 resolved to an empty "
                    "buffer range")
    files = write_tool_files(tmp_path, failing)
    assert files.tool == "iree-run-module"
    assert "--device=vulkan" in (tmp_path / RUN_FLAGS).read_text().splitlines()
    assert files.expect.startswith("INVALID_ARGUMENT; Vulkan dispatch binding")
    assert "hal.device.targets" in (tmp_path / "program.mlir").read_text()  # prepared for lavapipe
    written = [np.load(tmp_path / f"input{i}.npy") for i in range(7)]
    for got, want in zip(written, sample.batches[2].flat()):
        np.testing.assert_array_equal(got, want)
    code, output = run_tool_commands(tmp_path, files)
    assert code != 0
    assert "resolved to an empty buffer range" in output, output

"""Files for the toolchain's own command-line tools, so a stored bug reproduces
without Python.

A maintainer of torch-mlir or IREE reproduces a bug with their tools, not with
a fuzzer: this module writes, into a corpus folder, the program and flags
those tools need, in the shape IREE's test suites use, and returns the exact
shell commands (run from that folder) with what they show while the bug is
present. By the entry's failing stage: a lowering failure gets the program the
lowering choked on (``input.torch.mlir``, the FX importer's raw output) and a
``torch-mlir-opt`` command running the pass pipeline ``fx.export_and_import``
runs for the target's output type; a compile failure gets ``program.mlir``
(exactly what ``iree-compile`` was given, after the target's ``prepare``) and
``compile.flagfile``; a runtime failure or a mismatch adds the first failing
batch's flat inputs as ``input<i>.npy``, the float64 reference as
``expected0.npy`` (float32) and ``run.flagfile`` for ``iree-run-module``,
whose tolerance is the oracle's own (``oracles.compare``). Failures of the
toolchain while the files are prepared never raise: they change which tool
reproduces (a compile bug whose lowering now fails gets the lowering files).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.pipeline import StageFailure, Timer
from fuzz.model.sample import Batch, Sample
from fuzz.targets.catalog import TARGETS, CompiledTarget, IreeTarget, Target
from oracles.compare import Tolerance, compare
from oracles.results import Stage
from oracles.verdict import Verdict
from fuzz.targets.devices import ensure_runtime_environment
from fuzz.targets import pipeline
from fuzz.targets.onnx_iree import OnnxRoad

__all__ = ["ToolFiles", "write_tool_files", "run_tool_commands", "lowering_pipeline",
           "tool_dir", "PROGRAM", "LOWERING_INPUT", "COMPILE_FLAGS", "RUN_FLAGS", "EXPECTED"]

LOWERING_INPUT = "input.torch.mlir"
PROGRAM = "program.mlir"
COMPILE_FLAGS = "compile.flagfile"
RUN_FLAGS = "run.flagfile"
MODULE = "module.vmfb"
EXPECTED = "expected0.npy"
_STORED_RAW = "import-input.mlir"  # what fuzz.targets.pipeline.lower keeps with a lowering failure

# torch_mlir.fx._module_lowering, then compiler_utils.lower_mlir_module (torch-mlir
# 20261001): the prefix every output type runs, then one backend pipeline per
# type. The Python API runs them as two pass managers; one pipeline is the same
# passes with the same verifier between them.
_TORCH_BACKEND = ("func.func(torch-match-quantized-custom-ops), "
                  "torchdynamo-export-to-torch-backend-pipeline")
_BACKEND_PIPELINES = {
    "torch": "",
    "linalg-on-tensors": "torch-backend-to-linalg-on-tensors-backend-pipeline{allow-non-finites=true}",
    "tosa": "torch-backend-to-tosa-backend-pipeline",
    "stablehlo": "torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true}",
}


@dataclass(frozen=True)
class ToolFiles:
    """What was written for one entry and how to use it.

    ``tool`` is the tool that shows the bug ("torch-mlir-opt", "iree-compile",
    "iree-run-module"), or "" when no command-line tool can (an export
    failure is PyTorch's: there is no MLIR yet); ``expect`` then says why.
    """

    tool: str
    target: str
    files: tuple[str, ...]
    commands: tuple[str, ...]
    expect: str

    def to_dict(self) -> dict[str, Any]:
        """The tool files and commands as JSON, stored with the case under ``tools``."""
        return {"tool": self.tool, "target": self.target, "files": list(self.files),
                "commands": list(self.commands), "expect": self.expect}


def lowering_pipeline(output_type: str) -> str:
    """The ``--pass-pipeline`` that ``fx.export_and_import(output_type=...)``
    runs on the raw import, for ``torch-mlir-opt``."""
    if output_type not in _BACKEND_PIPELINES:
        raise ValueError(f"output_type={output_type!r}: expected one of "
                         f"{', '.join(sorted(_BACKEND_PIPELINES))}")
    backend = _BACKEND_PIPELINES[output_type]
    return f"builtin.module({_TORCH_BACKEND}{', ' + backend if backend else ''})"


def tool_dir() -> Path | None:
    """The folder holding the pinned toolchain's tools: the running Python's
    own ``bin`` (a virtual environment puts the wheels' tools there), else
    wherever ``iree-compile`` is on PATH."""
    own = Path(sys.executable).parent
    if (own / "iree-compile").exists():
        return own
    found = shutil.which("iree-compile")
    return Path(found).parent if found else None


def write_tool_files(folder: Path, entry: CorpusEntry,
                     table: dict[str, Target] | None = None) -> ToolFiles:
    """Write the tool-ready files for ``entry`` into ``folder`` (created if
    missing; each file atomically) and return the commands that reproduce it."""
    if not isinstance(entry, CorpusEntry):
        raise TypeError(f"entry={type(entry).__name__}: expected a CorpusEntry")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"folder={str(folder)!r}: exists but is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    target = _tool_target(entry, TARGETS if table is None else table)
    return _write(folder, entry, target)


def run_tool_commands(folder: Path, files: ToolFiles, timeout_s: float = 600) -> tuple[int, str]:
    """Run ``files.commands`` in ``folder`` the way a reader of the report
    would (one bash, each command only after the previous succeeded), with the
    toolchain's folder first on PATH; returns (exit code, stdout + stderr).
    A timeout is exit code 124, as with coreutils' ``timeout``."""
    if not files.commands:
        return 0, ""

    ensure_runtime_environment()  # the Vulkan loader wants XDG_RUNTIME_DIR
    env = dict(os.environ)
    tools = tool_dir()
    if tools is not None:
        env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    script = " && ".join(files.commands)
    try:
        done = subprocess.run(["bash", "-c", script], cwd=folder, env=env, timeout=timeout_s,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else ""
        return 124, f"{partial}\n[timed out after {timeout_s:g} s]"
    return done.returncode, done.stdout.decode("utf-8", "replace")


# -- choosing the target ---------------------------------------------------
def _tool_target(entry: CorpusEntry, table: dict[str, Target]) -> IreeTarget:
    """The entry's own target when IREE compiles it; otherwise (refbackend) an
    IREE target it was also seen on, iree-cpu first, in the same shape mode."""
    own = table.get(entry.target)
    if isinstance(own, IreeTarget):
        return own
    suffix = "-dyn" if entry.target.endswith("-dyn") else ""
    preferred = [f"iree-cpu{suffix}", "iree-cpu", "iree-cpu-dyn", *sorted(entry.seen_on)]
    for name in preferred:
        candidate = table.get(name)
        if name in entry.seen_on and isinstance(candidate, IreeTarget):
            return candidate
    fallback = table.get(f"iree-cpu{suffix}") or TARGETS[f"iree-cpu{suffix}"]
    if not isinstance(fallback, IreeTarget):
        raise ValueError(f"target={entry.target!r}: no IREE target to write tool files for "
                         f"(seen_on={list(entry.seen_on)})")
    return fallback


def _kind(entry: CorpusEntry) -> str:
    """"lower" / "compile" / "run" / "" (no tool reproduces), by failing stage."""
    if entry.verdict is Verdict.MISMATCH:
        return "run"
    stage = Stage.parse(str(entry.stage))
    return {Stage.IMPORT: "lower", Stage.COMPILE: "compile", Stage.RUN: "run"}.get(stage, "")


# -- writing ---------------------------------------------------------------
def _write(folder: Path, entry: CorpusEntry, target: IreeTarget) -> ToolFiles:

    kind = _kind(entry)
    if kind == "lower" and isinstance(target, OnnxRoad):
        # The ONNX road's conversions run inside iree-compile: its "import"
        # failure shows compiling the iree-import-onnx program (README "Roads into IREE").
        kind = "compile"
    if not kind:
        return ToolFiles("", target.name, (), (), f"stage={entry.stage}: the failure happens "
                         f"before torch-mlir (PyTorch's export); no MLIR tool reproduces it")
    if kind == "lower":
        return _write_lowering(folder, entry, target)
    example = entry.sample.batches[0].flat()
    try:
        mlir = target.lowered(entry.sample.config, entry.sample.seed, example, Timer(), None)
    except StageFailure as failure:
        # The lowering fails now: that is the bug a tool can show today.
        return _write_lowering(folder, entry, target, now=failure.failure.message)
    program, flags = target.prepare(mlir)
    names = [_write_text(folder, PROGRAM, program),
             _write_text(folder, COMPILE_FLAGS, _flagfile(
                 (f"--iree-hal-target-backends={target.backend}", *flags)))]
    # iree-compile has no --flagfile; LLVM reads a "response file" named by @.
    compile_command = f"iree-compile @{COMPILE_FLAGS} {PROGRAM} -o {MODULE}"
    if kind == "compile":
        return ToolFiles("iree-compile", target.name, tuple(names), (compile_command,),
                         _first_error_line(entry.error) or "iree-compile fails")
    batch = _first_failing_batch(entry.sample, target, mlir)
    run_names, expect = _write_run(folder, entry, target, batch)
    return ToolFiles("iree-run-module", target.name, tuple(names + run_names),
                     (compile_command, f"iree-run-module --flagfile={RUN_FLAGS}"), expect)


def _write_lowering(folder: Path, entry: CorpusEntry, target: IreeTarget,
                    now: str = "") -> ToolFiles:
    raw = _raw_program(entry, target)
    if raw is None:
        return ToolFiles("", target.name, (), (), "the FX importer itself fails on this program "
                         "(no raw MLIR to hand to torch-mlir-opt); see error.txt")
    name = _write_text(folder, LOWERING_INPUT, raw)
    command = (f"torch-mlir-opt --pass-pipeline='{lowering_pipeline(target.output_type)}' "
               f"{LOWERING_INPUT} -o lowered.mlir")
    expect = _first_error_line(now) if now else _first_error_line(entry.error)
    return ToolFiles("torch-mlir-opt", target.name, (name,), (command,),
                     expect or "torch-mlir-opt fails")


def _raw_program(entry: CorpusEntry, target: CompiledTarget) -> str | None:
    """The FX importer's raw output for the stored sample, exported exactly as
    ``target`` exports it; the stored copy when re-importing fails."""
    from fuzz.model.recipe import recipe

    sample = entry.sample
    try:
        exported = pipeline.export(*recipe(sample.config, sample.seed, target.dynamic,
                                           sample.batches[0].flat()))
        return pipeline.run_stage("import", lambda: _raw_import(exported))
    except StageFailure:
        stored = entry.path / _STORED_RAW if entry.path is not None else None
        return stored.read_text() if stored is not None and stored.is_file() else None


def _raw_import(exported: Any) -> str:
    from torch_mlir import fx

    return str(fx.export_and_import(exported, output_type="raw", func_name="main"))


def _first_failing_batch(sample: Sample, target: IreeTarget, mlir: str) -> Batch:
    """The first batch the compiled program fails on (raises, or is judged a
    mismatch). Only batches the artifact accepts count: a static program takes
    the first batch's shapes. One candidate needs no run."""
    from fuzz.model.recipe import call_args

    first = sample.batches[0]
    shape = [a.shape for a in first.flat()]
    candidates = [b for b in sample.batches
                  if target.dynamic or [a.shape for a in b.flat()] == shape]
    if len(candidates) == 1:
        return first
    try:
        artifact = target.compile_program(mlir, Timer(), None)
    except StageFailure:
        return first
    lead = target.leading_inputs(sample.config, sample.seed, Timer())
    for batch in candidates:
        try:
            got = target.run(artifact, call_args(lead, batch.flat()), Timer())
        except StageFailure:
            return batch
        ref64, eager32 = _references(sample.config, sample.seed, batch)
        if not compare(ref64, eager32, got[0]).ok:
            return batch
    return first


def _references(config: DLRMConfig, seed: int, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """(float64 reference, eager float32) outputs for one batch."""
    import torch

    from fuzz.model.dlrm import build, build_reference, to_torch

    flat = batch.flat()
    with torch.inference_mode():
        ref = build_reference(config, seed)(*to_torch(flat, config, torch.float64))
        eager = build(config, seed)(*to_torch(flat, config))
    return ref.numpy().astype(np.float64), eager.numpy().astype(np.float32)


def _write_run(folder: Path, entry: CorpusEntry, target: IreeTarget,
               batch: Batch) -> tuple[list[str], str]:
    """Inputs, expected output and ``run.flagfile``; returns (names, expect)."""
    from fuzz.model.recipe import call_args

    ref64, eager32 = _references(entry.sample.config, entry.sample.seed, batch)
    atol, rtol = _tolerance(ref64, eager32)
    # The recipe's call arguments: weights that are program inputs lead them.
    lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
    names = [_write_bytes(folder, f"input{i}.npy", _npy(a))
             for i, a in enumerate(call_args(lead, batch.flat()))]
    names.append(_write_bytes(folder, EXPECTED, _npy(ref64.astype(np.float32))))
    flags = (f"--module={MODULE}", f"--device={_device(target.driver)}", "--function=main",
             *(f"--input=@{name}" for name in names[:-1]),
             f"--expected_output=@{EXPECTED}",
             f"--expected_f32_threshold={atol:.6g}", f"--expected_rtol={rtol:.6g}")
    names.append(_write_text(folder, RUN_FLAGS, _flagfile(flags)))
    if entry.verdict is Verdict.MISMATCH:
        expect = (f"iree-run-module exits nonzero: result[0] does not match the expected "
                  f"output (|got - expected| > {atol:.3g} + {rtol:.3g}*|expected|); "
                  f"the fuzzer saw: {entry.error}")
    else:
        expect = _first_error_line(entry.error) or "iree-run-module fails"
    return names, expect


def _tolerance(ref64: np.ndarray, eager32: np.ndarray) -> tuple[float, float]:
    """``oracles.compare``'s bound as iree-run-module's approximate mode
    (``|got - expected| <= atol + rtol*|expected|``): its per-element slack
    for float32's own error becomes part of one absolute tolerance."""
    tolerance = Tolerance()
    finite = np.isfinite(ref64) & np.isfinite(eager32)
    drift = float(np.abs(eager32[finite].astype(np.float64) - ref64[finite]).max()) \
        if finite.any() else 0.0
    return tolerance.atol + tolerance.slack * drift, tolerance.rtol


def _device(driver: str) -> str:
    # iree-run-module names devices by driver (local-task, local-sync, vulkan, cuda, hip).
    return driver


def _first_error_line(text: str) -> str:
    """The first ``error:`` line of a toolchain message (else its first line),
    without what differs between the Python API and the tools: the MLIR source
    location, the runtime's "Error invoking function" and its C source line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line[line.index("error:"):]
    first = lines[0] if lines else ""
    # IREE appends the call chain ("; while invoking native function ..."): not the bug.
    return _RUNTIME_NOISE.sub("", first).split("; while ", 1)[0].strip()


_RUNTIME_NOISE = re.compile(r"Error invoking function:\s*|\S+\.(?:c|cc|cpp|h):\d+:\s*")


def _flagfile(flags: Sequence[str]) -> str:
    return "".join(f"{flag}\n" for flag in flags)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def _write_text(folder: Path, name: str, text: str) -> str:
    return _write_bytes(folder, name, text.encode())


def _write_bytes(folder: Path, name: str, data: bytes) -> str:
    """Temp file + rename: a reader never sees half a file."""
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, folder / name)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return name

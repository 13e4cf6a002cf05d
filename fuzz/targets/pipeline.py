"""The stages a DLRM goes through on its way to a compiled answer:
``export`` (torch.export) -> ``import`` (torch-mlir FX importer + lowering)
-> ``compile`` (IREE) -> ``run`` (IREE runtime).

Each stage is the one boundary where a failure of the toolchain under test is
caught and translated into a ``StageFailure`` naming the stage; anything else
that escapes is a bug of ours and propagates. Heavy imports happen inside the
functions so that only worker processes pay for them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from oracles.results import Failure, Stage
from oracles.blame import TORCH_PREFIX
from fuzz.targets.devices import call_and_read_back, ensure_runtime_environment

__all__ = ["StageFailure", "Timer", "run_stage", "out_of_memory", "memory_stage", "import_to_torch", "lower_torch", "export", "lower", "compile_vmfb", "LoadedModule"]

T = TypeVar("T")


class StageFailure(Exception):
    """The toolchain under test failed in ``stage``; ``message`` is its own text.

    The exception only carries a ``Failure`` value across the stack; the value
    is what the cache stores, the worker sends back and the oracles judge."""

    def __init__(self, stage: str, error_type: str, message: str,
                 program: str | None = None) -> None:
        super().__init__(f"{stage}: {error_type}: {message}")
        self.failure = Failure(Stage.parse(stage), error_type, message, program=program)

    @classmethod
    def of(cls, failure: Failure) -> "StageFailure":
        """Raise a stored failure again (from the artifact cache)."""
        exc = cls(failure.stage.value, failure.error_type, failure.message)
        exc.failure = failure
        return exc

    def refiled(self, stage: str, owner: str | None = None) -> "StageFailure":
        """The same failure filed under another ``stage`` (and ``owner``): where
        a road knows better than the stage it surfaced in whose fault it is."""
        return StageFailure.of(dataclasses.replace(self.failure, stage=Stage.parse(stage),
                                                   owner=owner or self.failure.owner))

    @property
    def stage(self) -> Stage:
        """Which pipeline stage failed, which decides the owner and the bucket."""
        return self.failure.stage

    @property
    def error_type(self) -> str:
        """The exception's type name, part of the failure's signature."""
        return self.failure.error_type

    @property
    def message(self) -> str:
        """The error text the failure's signature is made from."""
        return self.failure.message

    @property
    def program(self) -> str | None:
        """The program text the stage choked on, kept for the bug report (or None)."""
        return self.failure.program

    @program.setter
    def program(self, text: str | None) -> None:
        """Attach the failing program once known (a lowering adds its raw import)."""
        self.failure = dataclasses.replace(self.failure, program=text)


# What an allocation refused under a worker's address-space cap says: Python's
# MemoryError, or PyTorch's CPU allocator as a RuntimeError.
_ALLOCATION_REFUSED = ("can't allocate memory", "DefaultCPUAllocator", "not enough memory")


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation the process's memory cap refused: a
    resource limit of this machine, not a bug of the code that asked."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and any(text in str(exc) for text in _ALLOCATION_REFUSED))


def memory_stage(stage: str, fn: Callable[[], T]) -> T:
    """Run eager code of ours as ``stage``: an allocation refused by the memory
    cap becomes a ``StageFailure`` of type MemoryError (the sample is too big
    for this worker), any other exception stays a bug of ours and propagates."""
    try:
        return fn()
    except Exception as exc:
        if not out_of_memory(exc):
            raise
        raise StageFailure(stage, "MemoryError", str(exc)[:1000]) from exc


@dataclass
class Timer:
    """Accumulates wall time per stage so every outcome can report it."""

    seconds: dict[str, float]

    def __init__(self, on_stage: Callable[[str], None] | None = None) -> None:
        self.seconds = {}
        # Lets a worker publish the stage it is in, so that a crash or a hang
        # can be blamed on the right stage by the process that outlives it.
        self._on_stage = on_stage

    def measure(self, stage: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` as ``stage``, announcing the stage and adding its wall time."""
        if self._on_stage is not None:
            self._on_stage(stage)
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


MAX_DIAGNOSTIC_CHARS = 64 * 1024
STAGE_LOG_ENV = "DLRM_FUZZ_STAGE_LOG"


@contextlib.contextmanager
def _captured_stderr() -> Iterator[Callable[[], str]]:
    """Capture file descriptor 2 for the duration: MLIR prints its diagnostics
    (the ``error: ...`` lines that say what went wrong) straight to stderr,
    not into the Python exception."""
    sys.stderr.flush()
    saved = os.dup(2)
    # A worker names a file here so that, if the stage kills the process, the
    # parent can still read what it printed last.
    named = os.environ.get(STAGE_LOG_ENV)
    sink_cm = open(named, "w+b") if named else tempfile.TemporaryFile(mode="w+b")
    with sink_cm as sink:
        os.dup2(sink.fileno(), 2)
        text: list[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured = sink.read().decode("utf-8", "replace")
            text.append(captured)
            # Keep it visible too: a worker's stderr tail is evidence on a crash.
            os.write(2, captured[-MAX_DIAGNOSTIC_CHARS:].encode())


def _message(exc: BaseException) -> str:
    """``str(exc)`` and, on a last line of its own, its explicit cause's first
    line: iree.runtime raises "Could not create device. Exception for last
    tried follows." *from* the error that says why (no driver, CUDA out of
    memory), and that reason belongs in the evidence. A last line, not the
    first: the bucket key reads the first meaningful line, and stored
    buckets must not move because their evidence grew."""
    message = str(exc)
    cause = exc.__cause__
    said = str(cause).strip().splitlines()[0] if cause is not None and str(cause).strip() else ""
    if said and said not in message:
        message = f"{message.rstrip()}\ncaused by {type(cause).__name__}: {said}"
    return message


def run_stage(stage: str, fn: Callable[[], T], *, capture_stderr: bool = True) -> T:
    """Run ``fn`` as ``stage``: a failure of the toolchain becomes a
    ``StageFailure`` carrying what it printed. Per-batch calls pass
    ``capture_stderr=False``: redirecting fd 2 costs a temporary file and four
    dup2 calls, more than a compiled call of a small DLRM, and runtime errors
    carry their message in the exception anyway."""
    if not capture_stderr:
        try:
            return fn()
        except Exception as exc:
            raise StageFailure(stage, type(exc).__name__, _message(exc)) from exc
    with _captured_stderr() as diagnostics:
        try:
            return fn()
        except Exception as exc:
            error = exc
    message = _message(error)
    printed = diagnostics()[-MAX_DIAGNOSTIC_CHARS:]
    if printed.strip():
        message = f"{printed.rstrip()}\n{message}"
    raise StageFailure(stage, type(error).__name__, message) from error


def export(model: Any, args: tuple[Any, ...], dynamic_shapes: Any = None) -> Any:
    """torch.export: failures here are PyTorch's (dynamo / export), not torch-mlir's."""
    import torch

    return run_stage("export", lambda: torch.export.export(model, args, dynamic_shapes=dynamic_shapes))


def lower(exported: Any, output_type: str) -> str:
    """torch-mlir's FX importer and the lowering to ``output_type``; returns MLIR text."""
    torch_ir, raw = import_to_torch(exported, keep_raw=True)
    return lower_torch(torch_ir, output_type, raw)


def import_to_torch(exported: Any, keep_raw: bool) -> tuple[str, str | None]:
    """The FX import and torch-mlir's prefix pipeline (TorchFX IR -> Torch
    Backend IR): the part of ``fx.export_and_import`` that is the same for
    every output type, and most of its cost (decompositions, import, shape
    refinement: 0.2-0.6 s of a DLRM's 0.21-0.67 s; each backend pipeline
    after it: 0.01-0.02 s). Returns the Torch Backend IR with its locations
    (diagnostics of the backend pipelines name them) and, with ``keep_raw``,
    the raw import: the program a lowering failure is reported with
    (``torch-mlir-opt`` reproduces from it)."""
    from torch_mlir import fx
    from torch_mlir.compiler_utils import OutputType

    try:
        module = run_stage("import", lambda: fx.export_and_import(exported, output_type="raw",
                                                                  func_name="main"))
    except StageFailure as failure:
        raise _in_prefix(failure)
    raw = str(module) if keep_raw else None
    try:
        # What export_and_import runs after the import, with its defaults.
        run_stage("import", lambda: fx._module_lowering(False, False, OutputType.TORCH, module))
    except StageFailure as failure:
        failure.program = raw
        raise _in_prefix(failure)
    return run_stage("import", lambda: module.operation.get_asm(enable_debug_info=True)), raw


def _in_prefix(failure: StageFailure) -> StageFailure:
    """Mark a failure of the shared prefix as the prefix's (``Failure.owner``)."""

    failure.failure = dataclasses.replace(failure.failure, owner=TORCH_PREFIX)
    return failure


def lower_torch(torch_ir: str, output_type: str, raw: str | None = None) -> str:
    """Torch Backend IR (from ``import_to_torch``) to ``output_type``: the
    backend pipeline ``fx.export_and_import`` would run, in a fresh context,
    so one import serves every output type. Returns the text without
    locations, as ``str(module)`` of ``export_and_import`` prints it."""
    from torch_mlir import ir
    from torch_mlir.compiler_utils import BackendLoweringOptions, OutputType, lower_mlir_module
    from torch_mlir.dialects import torch as torch_dialect

    context = ir.Context()
    torch_dialect.register_dialect(context)
    with context:
        module = run_stage("import", lambda: ir.Module.parse(torch_ir))
        try:
            run_stage("import", lambda: lower_mlir_module(
                False, OutputType.get(output_type), module, BackendLoweringOptions(allow_non_finites=True)))
        except StageFailure as failure:
            failure.program = raw
            raise
        return run_stage("import", lambda: str(module))


def compile_vmfb(mlir: str, backend: str, flags: Sequence[str]) -> bytes:
    """IREE-compile MLIR for ``backend`` into a vmfb, failures as compile-stage failures."""
    import iree.compiler as ireec

    result = run_stage("compile", lambda: ireec.compile_str(
        mlir, target_backends=[backend], extra_args=list(flags)))
    assert isinstance(result, bytes)
    return result


class LoadedModule:
    """A compiled module loaded into an IREE runtime context, reusable across calls."""

    def __init__(self, vmfb: bytes, driver: str) -> None:
        import iree.runtime as rt


        ensure_runtime_environment()
        self.driver = driver
        self._read_back = call_and_read_back

        def load() -> Any:
            config = rt.Config(driver)
            context = rt.SystemContext(config=config)
            context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb))
            return context

        self._context = run_stage("run", load)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return run_stage("run", lambda: self._read_back(self._context, "main", inputs, self.driver),
                         capture_stderr=False)

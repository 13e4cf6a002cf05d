"""The targets a DLRM sample is checked on, declared in one visible table.

A target is a named pipeline split like torch-mlir's e2e ``TestConfig``:
``compile(config, seed, example_inputs) -> artifact`` then
``run(artifact, inputs) -> outputs``. An artifact is never mutated, so one
compile serves many input batches. The eager model (float32) and its float64
twin are targets like any other. Every compiled target exists in a static
form (shapes of the first batch baked in) and a ``-dyn`` form (batch size and
per-table index counts symbolic), since both code paths need testing.
``fake-*`` targets misbehave on purpose (segfault, abort, hang, memory
blow-up) and exist only to test the engine's own crash and timeout handling;
``fake-wrong-*`` answer wrong on one known op, to test localization.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.targets.cache import ArtifactCache, cache_key
from fuzz.model.config import DLRMConfig
from fuzz.targets.pipeline import StageFailure, Timer, memory_stage
from fuzz.targets.versions import tool_versions
from oracles.results import Failure

__all__ = ["Target", "EagerTarget", "CompiledTarget", "IreeTarget", "VulkanTarget", "RefBackendTarget",
           "FakeTarget", "FakeWrongOpTarget", "TARGETS", "FAKE_TARGETS", "UnknownTarget", "UnavailableTarget",
           "resolve_targets", "available_targets", "REFERENCE", "EAGER"]


class UnknownTarget(ValueError):
    """A target name that is not in the table (nor added by a plugin)."""


class UnavailableTarget(ValueError):
    """A known target that cannot run on this machine (no device, no driver)."""


@dataclass(frozen=True)
class Target:
    """One way of running the model (eager, or a compiler and backend) that the fuzzer compares."""
    name: str
    description: str

    @property
    def any_shape(self) -> bool:
        """True when one artifact runs batches of every shape."""
        return True

    def availability(self) -> tuple[bool, str]:
        """(True, "") or (False, why not and how to enable it)."""
        return True, ""

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """Arrays the artifact takes before a batch's own (none by default)."""
        return []

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Build what ``run`` executes for ``config`` and ``seed``; a stage failure raises."""
        raise NotImplementedError

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Run a compiled artifact on one batch's flat inputs; returns its outputs as arrays."""
        raise NotImplementedError

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Compile any exportable module the way ``compile`` compiles the model
        (same export, lowering, flags and device), for ``run`` to call on flat
        inputs; ``run`` then returns every output. It lets ``fuzz.triage.localize``
        compile the model with its intermediates as extra outputs. Targets that
        cannot (eager, the crash fakes) keep this default."""
        raise NotImplementedError(f"target={self.name!r} does not compile arbitrary modules")

    @property
    def compiles_modules(self) -> bool:
        """Whether ``compile_module`` is implemented (localization needs it)."""
        return type(self).compile_module is not Target.compile_module

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Intermediate programs worth keeping with a finding (file name -> text)."""
        return {}

    def owner(self, stage: str) -> str:
        """Who is to blame when ``stage`` fails: one bug shared by several targets
        (a torch-mlir lowering used by every IREE backend) gets one owner."""
        return self.name

    @property
    def lowering_owner(self) -> str:
        """Who lowered the program this target's backend consumed: targets
        sharing it share the bugs of that lowering (see ``oracles.blame``)."""
        return self.name

    @property
    def program_group(self) -> str:
        """Targets in one group compile the same lowered program."""
        return self.name

    @property
    def import_group(self) -> str:
        """Targets in one group share one export and one import to Torch
        Backend IR (``CompiledTarget.lowered``), whatever their output type."""
        return self.program_group

    @property
    def compile_group(self) -> str:
        """Targets in one group compile one program to the same artifact
        (same backend and flags; only the runtime driver differs)."""
        return self.name


@dataclass(frozen=True)
class EagerTarget(Target):
    """Eager PyTorch: float32 is the baseline a compiler should match, float64 the reference."""

    dtype: str = "float32"

    def owner(self, stage: str) -> str:
        """Every failure of eager PyTorch is PyTorch's own, whatever the stage."""
        return "pytorch:eager"

    @property
    def lowering_owner(self) -> str:
        """Eager runs no lowering; PyTorch itself stands in for it in blame."""
        return "pytorch:eager"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Eager has no compiler: building the model (float64 for the reference) is its compile."""
        from fuzz.model.dlrm import build, build_reference

        factory = build_reference if self.dtype == "float64" else build
        return timer.measure("build", lambda: memory_stage("build", lambda: factory(config, seed)))

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Forward pass in this dtype; the float64 reference also returns its rounding spread."""
        import torch

        from fuzz.model.dlrm import rounding_spread, to_torch

        dtype = torch.float64 if self.dtype == "float64" else torch.float32

        def forward() -> list[np.ndarray]:
            with torch.inference_mode():
                args = to_torch(inputs, artifact.config, dtype)
                out = artifact(*args)
            if self.dtype != "float64":
                return [out.numpy().astype(np.float32)]
            # The reference also says how far rounding in the model's dtype
            # can move each output (oracles.compare; a second output).
            return [out.numpy().astype(np.float64), rounding_spread(artifact, *args).numpy()]

        return timer.measure("run", lambda: memory_stage("run", forward))


@dataclass(frozen=True)
class CompiledTarget(Target):
    """torch.export -> torch-mlir (``output_type``) -> a backend. The lowered
    program is cached by everything that determines it, so targets sharing an
    output type (and replays) export and lower it once."""

    output_type: str = "linalg-on-tensors"
    dynamic: bool = False
    # Share one export and import to Torch Backend IR with the other output
    # types of this shape mode (off: the path before it, for benchmarks).
    shared_import: bool = True

    @property
    def any_shape(self) -> bool:
        """Only a program compiled with dynamic shapes accepts every batch shape."""
        return self.dynamic

    def owner(self, stage: str) -> str:
        """Blame export to torch.export, import to torch-mlir, the rest to the backend."""
        if stage in ("build", "export"):
            return "torch.export"
        if stage == "import":
            return f"torch-mlir:{self.output_type}"
        return self.backend_owner

    @property
    def backend_owner(self) -> str:
        """The component behind the compile and run stages: one per backend
        (static and dynamic forms, and drivers of one backend, share it)."""
        return self.name

    @property
    def lowering_owner(self) -> str:
        """The torch-mlir lowering to ``output_type`` produced what the backend consumed."""
        return f"torch-mlir:{self.output_type}"

    def dynamic_variant(self) -> "CompiledTarget":
        """The same target compiled with dynamic shapes (a ``-dyn`` twin in the table)."""
        return dataclasses.replace(self, name=f"{self.name}-dyn", dynamic=True,
                                   description=f"{self.description} (dynamic shapes)")

    @property
    def program_group(self) -> str:
        """Targets with one output type and shape mode lower the model to the same program."""
        return f"{self.output_type}|{self.import_group}"

    @property
    def import_group(self) -> str:
        """Static and dynamic forms each share one export and one Torch IR import."""
        return "dynamic" if self.dynamic else "static"

    def lowered(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None) -> str:
        """The model lowered to ``output_type`` MLIR, cached by everything that determines it."""
        from fuzz.targets import pipeline
        from fuzz.model.recipe import recipe
        from fuzz.model.weights import weights_as_inputs

        as_inputs = weights_as_inputs(config)

        shapes = "dynamic" if self.dynamic else [list(a.shape) for a in example]
        # With weights as inputs the program is the same for every seed.
        program = (config.to_dict(), None if as_inputs else seed, shapes, tool_versions())
        raw_key = cache_key("raw-program", *program)
        kept: dict[str, str | None] = {}

        def exportable() -> tuple[Any, tuple[Any, ...], Any]:
            return recipe(config, seed, self.dynamic, example, timer.measure)

        def to_torch_ir() -> str:
            # An export failure is cached here: every output type of this shape mode shares it.
            module, example_args, spec = exportable()
            exported = timer.measure("export", lambda: pipeline.export(module, example_args, spec))
            torch_ir, kept["raw"] = timer.measure("import", lambda: pipeline.import_to_torch(
                exported, keep_raw=_small_program(config, as_inputs)))
            if cache is not None and kept["raw"] is not None:
                cache.put(raw_key, kept["raw"])
            return torch_ir

        def lower() -> str:
            if not self.shared_import:
                return self.lower_module(*exportable(), timer)
            torch_ir = _through_cache(cache, cache_key("torch-program", *program), to_torch_ir)
            assert isinstance(torch_ir, str)
            if "raw" not in kept and cache is not None:  # a cached import: its raw text, if kept
                raw = cache.get(raw_key)
                kept["raw"] = raw if isinstance(raw, str) else None
            return timer.measure("import", lambda: pipeline.lower_torch(
                torch_ir, self.output_type, kept.get("raw")))

        key = cache_key("program", *program[:3], self.output_type, program[3])
        mlir = _through_cache(cache, key, lower)
        assert isinstance(mlir, str)
        return mlir

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Lower the model (cached) and hand the program to this target's backend."""
        mlir = self.lowered(config, seed, example, timer, cache)
        return self.compile_program(mlir, timer, cache)

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """What the compiled program takes before a batch: the weights of
        ``seed`` when they are inputs (``fuzz.model.weights``), else nothing."""
        from fuzz.model.weights import state_arrays, weights_as_inputs

        if not weights_as_inputs(config):
            return []
        from fuzz.model.dlrm import build

        return timer.measure("build", lambda: state_arrays(build(config, seed)))

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Backend-specific: turn lowered MLIR text into a runnable artifact."""
        raise NotImplementedError

    def lower_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                     timer: Timer) -> str:
        """torch.export then torch-mlir to ``output_type``: the one path every
        program of this target takes to MLIR (the model's own, via ``lowered``)."""
        from fuzz.targets import pipeline

        exported = timer.measure("export", lambda: pipeline.export(module, example_args, dynamic_shapes))
        return timer.measure("import", lambda: pipeline.lower(exported, self.output_type))

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Not cached by module (a module has no stable key); the backend
        compile below is, by the program text."""
        return self.compile_program(self.lower_module(module, example_args, dynamic_shapes, timer),
                                    timer, cache)

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Call the loaded module on the flat inputs, timed as the run stage."""
        return timer.measure("run", lambda: artifact.module(inputs))

    def artifact_texts(self, artifact: Any) -> dict[str, str]:
        """Keep the lowered MLIR with a finding, named by its output type."""
        return {f"{self.output_type}.mlir": artifact.mlir}


# Tables with more elements than this, weights inline: the raw import is not
# printed for a report (tens of MB of constants, over the corpus's text limit).
_RAW_PROGRAM_MAX_ELEMENTS = 1 << 20


def _small_program(config: DLRMConfig, as_inputs: bool) -> bool:
    """Whether the raw import is small enough to keep for a lowering failure's report."""
    return as_inputs or sum(rows * config.table_width(k) for k, rows in enumerate(config.ln_emb)) \
        <= _RAW_PROGRAM_MAX_ELEMENTS


def _through_cache(cache: ArtifactCache | None, key: str,
                   compute: Callable[[], str | bytes]) -> str | bytes:
    """``compute()`` once per key: a cached result is returned, a cached stage
    failure is raised again, and a new result or failure is cached."""
    if cache is None:
        return compute()
    cached = cache.get(key)
    if isinstance(cached, Failure):
        raise StageFailure.of(cached)
    if cached is not None:
        return cached
    try:
        value = compute()
    except StageFailure as failure:
        cache.put(key, failure.failure)
        raise
    cache.put(key, value)
    return value


@dataclass(frozen=True)
class _Artifact:
    mlir: str
    module: Any = field(compare=False)


@dataclass(frozen=True)
class IreeTarget(CompiledTarget):
    """... -> IREE compiler ``backend`` with ``flags`` -> IREE runtime ``driver``."""

    backend: str = "llvm-cpu"
    driver: str = "local-task"
    flags: tuple[str, ...] = ()

    @property
    def backend_owner(self) -> str:
        """``iree:<backend>``, naming the input type when it is not linalg: IREE
        then runs its own input conversion, a component of its own."""
        if self.output_type == "linalg-on-tensors":
            return f"iree:{self.backend}"
        return f"iree:{self.backend}({self.output_type} input)"

    @property
    def lowering_owner(self) -> str:
        """Who lowered what IREE compiled; for torch input, TorchToLinalg run inside IREE."""
        # IREE's torch input conversion runs torch-mlir's TorchToLinalg inside
        # IREE: a fault of that lowering shows up here too, as the same error.
        if self.output_type == "torch":
            return "torch-mlir:linalg-on-tensors"
        return f"torch-mlir:{self.output_type}"

    def availability(self) -> tuple[bool, str]:
        """Needs the backend in the installed IREE compiler and a device for the driver."""
        if self.backend not in _compiler_backends():
            return False, (f"the installed IREE compiler has no '{self.backend}' backend; "
                           f"install an iree-base-compiler build that includes it")
        from fuzz.targets.devices import device_availability

        return device_availability(self.driver)

    def prepare(self, mlir: str) -> tuple[str, tuple[str, ...]]:
        """The program and flags actually handed to the IREE compiler."""
        return mlir, self.flags

    @property
    def compile_group(self) -> str:
        """The vmfb cache key (program, backend, flags): drivers of one compile share it."""
        # The vmfb cache key is (program, backend, flags): iree-cpu and
        # iree-cpu-sync share one compile.
        return "|".join([self.program_group, self.backend, *self.flags])

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Compile to a vmfb (cached by source, backend, flags, versions) and load it."""
        from fuzz.targets import pipeline

        source, flags = self.prepare(mlir)
        key = cache_key("vmfb", cache_key(source), self.backend, list(flags), tool_versions())
        vmfb = _through_cache(cache, key, lambda: timer.measure(
            "compile", lambda: pipeline.compile_vmfb(source, self.backend, flags)))
        assert isinstance(vmfb, bytes)
        module = timer.measure("run", lambda: pipeline.LoadedModule(vmfb, self.driver))
        return _Artifact(source, module)


@dataclass(frozen=True)
class VulkanTarget(IreeTarget):
    """IREE ``vulkan-spirv`` compiled for a description of the Vulkan device
    present (lavapipe or a real GPU; see ``fuzz.targets.vulkan``), or, with
    ``describe_device=False``, for IREE's default Vulkan target: the class of
    mobile GPUs without native int64, where IREE emulates 64-bit integers with
    pairs of 32-bit ones (a code path of its own, run on whatever device is here)."""

    backend: str = "vulkan-spirv"
    driver: str = "vulkan"
    describe_device: bool = True

    @property
    def compile_group(self) -> str:
        """The device description added by ``prepare`` is part of what gets compiled."""
        # The device description ``prepare`` adds is part of what is compiled.
        return f"{super().compile_group}|described={self.describe_device}"

    def prepare(self, mlir: str) -> tuple[str, tuple[str, ...]]:
        """Target the Vulkan device present, unless IREE's default target was asked for."""
        if not self.describe_device:
            return mlir, self.flags
        from fuzz.targets.vulkan import prepare_for_vulkan

        return prepare_for_vulkan(mlir, self.flags)


@dataclass(frozen=True)
class RefBackendTarget(CompiledTarget):
    """... -> torch-mlir's own reference backend (refback passes, LLVM, MLIR
    ExecutionEngine): independent of IREE, so a wrong answer seen here and on
    IREE is torch-mlir's, and one seen only on IREE is IREE's."""

    @property
    def backend_owner(self) -> str:
        """One owner for the reference backend, apart from any IREE backend."""
        return "torch-mlir:refbackend"

    def availability(self) -> tuple[bool, str]:
        """Needs a torch-mlir wheel built with the refbackend passes and ExecutionEngine."""
        from fuzz.targets.refbackend import refbackend_available

        return refbackend_available()

    def compile_program(self, mlir: str, timer: Timer, cache: ArtifactCache | None) -> Any:
        """Compile the lowered program with torch-mlir's refbackend (not cached)."""
        from fuzz.targets.refbackend import RefBackendModule

        return _Artifact(mlir, timer.measure("compile", lambda: RefBackendModule(mlir)))


@functools.lru_cache(maxsize=1)
def _compiler_backends() -> frozenset[str]:
    try:
        from iree.compiler import query_available_targets

        return frozenset(query_available_targets())
    except Exception:  # an old compiler without the query: assume the usual set
        return frozenset({"llvm-cpu", "vmvx", "vulkan-spirv", "cuda", "rocm", "metal-spirv"})


@dataclass(frozen=True)
class FakeTarget(Target):
    """FAKE, for engine tests only: misbehaves the way a broken compiler can.

    ``behaviour`` is one of segfault, abort, hang, oom, raise, ok; it acts at
    compile time, when real compilers usually die. When it survives, it
    answers like eager PyTorch, so "ok" really is a healthy target; "flaky"
    answers eager's output plus a different offset on every call.
    """

    behaviour: str = "ok"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Misbehave as ``behaviour`` says, then build the model as eager does."""
        timer.measure("compile", self._misbehave)
        return _HEALTHY.compile(config, seed, example, timer, cache)

    def _misbehave(self) -> None:
        if self.behaviour == "segfault":
            import ctypes

            ctypes.string_at(0)
        elif self.behaviour == "abort":
            os.kill(os.getpid(), signal.SIGABRT)
        elif self.behaviour == "hang":
            while True:
                time.sleep(1)
        elif self.behaviour == "oom":
            hog = []
            while True:  # grow resident memory fast: touch one byte per page
                chunk = np.empty(256 * 1024 * 1024, dtype=np.uint8)
                chunk[::4096] = 1
                hog.append(chunk)
        elif self.behaviour == "raise":
            raise StageFailure("compile", "FakeCompilerError", "fake-raise: error: deliberate failure")

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Eager's answer, plus fresh noise on every call when ``flaky``."""
        answer = _HEALTHY.run(artifact, inputs, timer)
        if self.behaviour == "flaky":
            # Nondeterministic on purpose (a race in a runtime, uninitialized
            # memory): a different wrong answer on every call.
            noise = 0.25 + float(np.frombuffer(os.urandom(8), np.uint64)[0] % 1000) / 1000
            return [answer[0] + np.float32(noise), *answer[1:]]
        return answer


@dataclass(frozen=True)
class FakeWrongOpTarget(Target):
    """FAKE, for engine tests only: a "compiler" with one known wrong lowering.

    It runs the exported ATen graph eagerly (torch.fx Interpreter) and adds 0.5
    to every element of each output of ``op`` (its first output, for ops with
    several). Every element, not one: a single corrupted element can be
    discarded downstream (the interaction drops the diagonal of ``bmm``), and
    then the fake would not be wrong at all. An integer ``op`` (the QR
    remainder, the quotient's cast) is off by one instead, wrapped into the
    range it produced (``_off_by_one``): a wrong index that is still a row, so
    the rest of the graph runs and the wrong answer reaches the output.
    Localization must name ``op``, never the float op that reads its result.
    """

    op: str = "aten.relu.default"
    dynamic: bool = False
    # Fails to compile int32 indices first (a known bug in front of the wrong
    # op, as int32 offsets stop the linalg lowering): tests repair-not-skip.
    refuses_int32: bool = False

    @property
    def any_shape(self) -> bool:
        """Only the dynamic form accepts every batch shape, as with real compilers."""
        return self.dynamic

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Export the model (failing on int32 first if asked), as a real target would."""
        from fuzz.model.dlrm import build, dynamic_shapes, to_torch, tracing_example

        if self.refuses_int32 and config.index_dtype == "int32":
            raise StageFailure("compile", "FakeCompilerError",
                               f"{self.name}: error: int32 indices are not supported")

        model = timer.measure("build", lambda: build(config, seed))
        inputs = tracing_example(config) if self.dynamic else example
        spec = dynamic_shapes(config) if self.dynamic else None
        return self.compile_module(model, to_torch(inputs, config), spec, timer, cache)

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Export any module to an ATen graph that ``run`` interprets with the fault."""
        from fuzz.targets import pipeline

        exported = timer.measure("export", lambda: pipeline.export(module, example_args, dynamic_shapes))
        return timer.measure("compile", exported.module)

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Interpret the graph with ``op``'s outputs corrupted: the known wrong answer."""
        return timer.measure("run", lambda: _run_corrupting(artifact, inputs, self.op))


def _run_corrupting(graph_module: Any, inputs: Sequence[np.ndarray], op: str) -> list[np.ndarray]:
    """Interpret ``graph_module`` on flat inputs, corrupting the outputs of ``op``;
    returns its flat outputs as numpy arrays."""
    import torch
    import torch.fx

    def corrupt(value: Any) -> Any:
        if isinstance(value, tuple):
            return (corrupt(value[0]), *value[1:])
        return value + 0.5 if value.is_floating_point() else _off_by_one(value)

    class Corrupting(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            value = super().run_node(n)
            return corrupt(value) if n.op == "call_function" and str(n.target) == op else value

    args = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    with torch.no_grad():
        outputs = Corrupting(graph_module).run(*args)
    from fuzz.model.dlrm import to_numpy

    return to_numpy(torch.utils._pytree.tree_leaves(outputs))


def _off_by_one(value: Any) -> Any:
    """An integer tensor off by one in every element, kept within [0, max]
    (a remainder of c stays below c, a quotient within its table); a boolean
    one negated."""
    import torch

    if value.dtype == torch.bool:
        return ~value
    if value.numel() == 0:
        return value
    return (value + 1) % (value.max() + 1)


_HEALTHY = EagerTarget("eager", "what a healthy fake target answers")


_CPU = ("--iree-llvmcpu-target-cpu=host",)

# The one table of compiled targets, in their static form; each also exists
# as "<name>-dyn" with symbolic batch size and index counts.
_STATIC: tuple[CompiledTarget, ...] = (
    IreeTarget("iree-cpu", "linalg-on-tensors -> IREE llvm-cpu -> local-task",
               backend="llvm-cpu", driver="local-task", flags=_CPU),
    IreeTarget("iree-cpu-sync", "linalg-on-tensors -> IREE llvm-cpu -> local-sync (one thread)",
               backend="llvm-cpu", driver="local-sync", flags=_CPU),
    IreeTarget("iree-vmvx", "linalg-on-tensors -> IREE vmvx (reference interpreter) -> local-task",
               backend="vmvx", driver="local-task"),
    IreeTarget("iree-torch", "torch dialect -> IREE's own torch lowering -> llvm-cpu",
               output_type="torch", backend="llvm-cpu", driver="local-task",
               flags=("--iree-input-type=torch", *_CPU)),
    IreeTarget("iree-tosa", "TOSA -> IREE llvm-cpu", output_type="tosa", backend="llvm-cpu",
               driver="local-task", flags=("--iree-input-type=tosa", *_CPU)),
    IreeTarget("iree-stablehlo", "StableHLO -> IREE llvm-cpu", output_type="stablehlo",
               backend="llvm-cpu", driver="local-task", flags=("--iree-input-type=stablehlo", *_CPU)),
    RefBackendTarget("refbackend", "linalg-on-tensors -> torch-mlir refbackend (MLIR ExecutionEngine)"),
    VulkanTarget("iree-vulkan", "linalg-on-tensors -> IREE vulkan-spirv -> vulkan (GPU, or lavapipe on CPU)"),
    VulkanTarget("iree-vulkan-default", "linalg-on-tensors -> IREE vulkan-spirv for IREE's default "
                 "target (no int64: emulated) -> vulkan", describe_device=False),
    IreeTarget("iree-cuda", "linalg-on-tensors -> IREE cuda -> cuda (NVIDIA GPU)",
               backend="cuda", driver="cuda"),
    IreeTarget("iree-hip", "linalg-on-tensors -> IREE rocm -> hip (AMD GPU, gfx942)",
               backend="rocm", driver="hip", flags=("--iree-hip-target=gfx942",)),
)

TARGETS: dict[str, Target] = {t.name: t for t in (
    EagerTarget("eager-f64", "eager PyTorch in float64: the reference", dtype="float64"),
    EagerTarget("eager", "eager PyTorch in float32: the baseline precision"),
    *_STATIC,
    *(t.dynamic_variant() for t in _STATIC),
)}

# Engine-test targets: never in a default run, only when named.
FAKE_TARGETS: dict[str, Target] = {t.name: t for t in (
    *(FakeTarget(f"fake-{b}", f"FAKE target for engine tests: {b}", behaviour=b)
      for b in ("segfault", "abort", "hang", "oom", "raise", "ok", "flaky")),
    *(FakeWrongOpTarget(f"fake-wrong-{short}", f"FAKE target for engine tests: eager, but "
                        f"{op} answers +0.5 (localization must name it)", op=op)
      for short, op in (("bmm", "aten.bmm.default"), ("relu", "aten.relu.default"),
                        ("embedding-bag", "aten.embedding_bag.padding_idx"))),
    # Integer ops of the QR path: the remainder, and the first cast to int64
    # (the quotient's truncation; the remainder's own .long() comes after it).
    *(FakeWrongOpTarget(f"fake-wrong-{short}", f"FAKE target for engine tests: eager, but "
                        f"{op} answers off by one (localization must name it, not the "
                        f"embedding_bag that reads it)", op=op)
      for short, op in (("remainder", "aten.remainder.Scalar"), ("int-cast", "aten.to.dtype"))),
    FakeWrongOpTarget("fake-int32-then-wrong-relu", "FAKE target for engine tests: refuses int32 "
                      "indices at compile time; otherwise eager, but aten.relu.default answers "
                      "+0.5 (a wrong answer behind a known failure)", refuses_int32=True),
)}

REFERENCE = "eager-f64"
EAGER = "eager"
_REFERENCES = (REFERENCE, EAGER)


def available_targets(table: dict[str, Target]) -> list[str]:
    """The default campaign: every compiled target that can run here."""
    return [name for name, target in table.items()
            if name not in _REFERENCES and target.availability()[0]]


def resolve_targets(names: Sequence[str], table: dict[str, Target] | None = None,
                    check_available: bool = False) -> list[Target]:
    """Targets by name; an unknown or unavailable one is a one-line error."""
    table = TARGETS if table is None else table
    resolved = []
    for name in names:
        target = table.get(name) or FAKE_TARGETS.get(name)
        if target is None:
            raise UnknownTarget(f"target={name!r}: unknown; choose from "
                                f"{', '.join(sorted(table))} (see `dlrm-fuzz targets`)")
        if check_available:
            ok, why = target.availability()
            if not ok:
                raise UnavailableTarget(f"target={name!r}: not available here: {why}")
        resolved.append(target)
    return resolved

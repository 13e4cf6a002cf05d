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

The kinds live one per module (``target``: the interface and the eager
reference; ``compiled``: what every compiled target shares; ``fx_iree`` and
``fx_refbackend``: the roads; ``fakes``); this module is the table, and
hands the kinds on for the code that imported them from here.
"""

from __future__ import annotations

from typing import Sequence

from fuzz.targets.compiled import CompiledTarget
from fuzz.targets.fakes import FakeTarget, FakeWrongOpTarget
from fuzz.targets.fx_iree import IreeTarget, VulkanTarget
from fuzz.targets.fx_refbackend import RefBackendTarget
from fuzz.targets.onnx_iree import OnnxIreeTarget, OnnxVulkanTarget
from fuzz.targets.onnx_refbackend import OnnxRefBackendTarget
from fuzz.targets.onnx_runtime import OnnxRuntimeTarget
from fuzz.targets.turbine_iree import TurbineIreeTarget
from fuzz.targets.target import EagerTarget, Target, UnavailableTarget, UnknownTarget

__all__ = ["Target", "EagerTarget", "CompiledTarget", "IreeTarget", "VulkanTarget", "RefBackendTarget",
           "FakeTarget", "FakeWrongOpTarget", "TurbineIreeTarget", "OnnxIreeTarget",
           "OnnxVulkanTarget", "OnnxRefBackendTarget", "OnnxRuntimeTarget", "TARGETS", "BY_NAME_ONLY", "ROAD_TARGETS", "DEFAULT_ROAD_CANDIDATES", "FAKE_TARGETS", "TARGET_GROUPS", "expand_groups", "UnknownTarget", "UnavailableTarget",
           "resolve_targets", "available_targets", "REFERENCE", "EAGER"]

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
    # The other roads into IREE (README "Roads into IREE"): iree-turbine, and
    # ONNX (torch.onnx.export -> model.onnx) into IREE, into torch-mlir alone,
    # and onnxruntime on the same file. Each ONNX target also exists as
    # "<name>-loopfree": bags exported as gather + segment sum instead of the
    # onnx.Loop that blocks the road (fuzz.targets.bags).
    TurbineIreeTarget("turbine-iree-cpu", "road iree-turbine: iree.turbine.aot.export -> IREE "
                      "llvm-cpu (torch input) -> local-task", backend="llvm-cpu",
                      driver="local-task", flags=("--iree-input-type=torch", *_CPU)),
    # The loop-free rows first: a wrong answer's witness (fuzz.engine.witnesses)
    # is the first other backend of its lowering in this table, and the plain
    # ONNX programs stop at their onnx.Loop.
    *(made for bags, suffix, note in (("loop-free", "-loopfree", ", bags loop-free"),
                                      ("loop", "", ""))
      for made in (
          OnnxIreeTarget(f"onnx-iree-cpu{suffix}", f"road ONNX: torch.onnx.export{note} -> "
                         f"iree-import-onnx -> IREE llvm-cpu -> local-task",
                         backend="llvm-cpu", driver="local-task", flags=_CPU, bags=bags),
          OnnxIreeTarget(f"onnx-iree-vmvx{suffix}", f"road ONNX: torch.onnx.export{note} -> "
                         f"iree-import-onnx -> IREE vmvx -> local-task",
                         backend="vmvx", driver="local-task", bags=bags),
          OnnxVulkanTarget(f"onnx-iree-vulkan{suffix}", f"road ONNX: torch.onnx.export{note} -> "
                           f"iree-import-onnx -> IREE vulkan-spirv -> vulkan (GPU, or lavapipe)",
                           bags=bags),
          OnnxRefBackendTarget(f"onnx-refbackend{suffix}", f"road ONNX: torch.onnx.export{note} "
                               f"-> torch-mlir ONNX importer -> linalg -> torch-mlir refbackend",
                               bags=bags),
      )),
)


# onnxruntime is no compiled target (no MLIR): its own rows, same two forms.
_PEERS = tuple(OnnxRuntimeTarget(f"onnxruntime{suffix}", f"road ONNX: torch.onnx.export{note} -> "
                                 f"onnxruntime (CPU execution provider): the exporter's witness",
                                 bags=bags)
               for bags, suffix, note in (("loop", "", ""),
                                          ("loop-free", "-loopfree", ", bags loop-free")))


TARGETS: dict[str, Target] = {t.name: t for t in (
    EagerTarget("eager-f64", "eager PyTorch in float64: the reference", dtype="float64"),
    EagerTarget("eager", "eager PyTorch in float32: the baseline precision"),
    *_STATIC,
    *(t.dynamic_variant() for t in _STATIC),
    *_PEERS,
    *(t.dynamic_variant() for t in _PEERS),
)}


# The road targets: the other roads into IREE (README "Roads into IREE").
# One per road and owner is a candidate for the default set (the ``roads``
# group); a default campaign runs three of them, under a share of the
# targets' time (``fuzz.engine.roadshare``: they cost 1-3 s a sample each,
# the 18 FX-road targets together about as much as one of them). The plain
# ``onnx-iree-cpu`` stops at the bag's onnx.Loop on every sample that has a
# bag: its one bucket is met through the loop-free targets' fallback (a
# ``max`` bag keeps the Loop), so it runs by name or in the ``roads`` group.
ROAD_TARGETS: frozenset[str] = frozenset(
    name for name in TARGETS if name.startswith(("turbine-", "onnx-", "onnxruntime")))
DEFAULT_ROAD_CANDIDATES = frozenset({"turbine-iree-cpu", "onnxruntime-loopfree-dyn",
                                     "onnx-iree-cpu-loopfree-dyn", "onnx-iree-cpu"})
_DEFAULT_ROADS: frozenset[str] = DEFAULT_ROAD_CANDIDATES - {"onnx-iree-cpu"}
BY_NAME_ONLY: frozenset[str] = ROAD_TARGETS - _DEFAULT_ROADS


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
    FakeWrongOpTarget("fake-shy-wrong-relu", "FAKE target for engine tests: eager, but "
                      "aten.relu.default answers +0.5 unless intermediates are exposed (a wrong "
                      "answer that vanishes under observation)", shy=True),
)}


REFERENCE = "eager-f64"


EAGER = "eager"


_REFERENCES = (REFERENCE, EAGER)


def available_targets(table: dict[str, Target]) -> list[str]:
    """The default campaign: every compiled target that can run here, less
    the roads' targets kept for ``--targets`` (``BY_NAME_ONLY``)."""
    return [name for name, target in table.items()
            if name not in _REFERENCES and name not in BY_NAME_ONLY and target.availability()[0]]


# Names ``--targets`` takes for a set of targets: ``default`` is the default
# campaign's (what runs here), ``roads`` the road targets measured as one per
# road and owner (README "Roads into IREE"): ``--targets default,roads``.
TARGET_GROUPS = ("default", "roads")


def expand_groups(names: Sequence[str], table: dict[str, Target]) -> list[str]:
    """``names`` with each group name (``TARGET_GROUPS``) replaced by its
    targets, in order, each target once."""
    expanded: list[str] = []
    for name in names:
        members = available_targets(table) if name == "default" else \
            sorted(DEFAULT_ROAD_CANDIDATES) if name == "roads" else [name]
        expanded += [m for m in members if m not in expanded]
    return expanded


def resolve_targets(names: Sequence[str], table: dict[str, Target] | None = None,
                    check_available: bool = False) -> list[Target]:
    """Targets by name; an unknown or unavailable one is a one-line error."""
    table = TARGETS if table is None else table
    resolved = []
    for name in names:
        target = table.get(name) or FAKE_TARGETS.get(name)
        if target is None:
            raise UnknownTarget(f"target={name!r}: unknown; choose from "
                                f"{', '.join(sorted(table))}, or a group: "
                                f"{', '.join(TARGET_GROUPS)} (see `dlrm-fuzz targets`)")
        if check_available:
            ok, why = target.availability()
            if not ok:
                raise UnavailableTarget(f"target={name!r}: not available here: {why}")
        resolved.append(target)
    return resolved

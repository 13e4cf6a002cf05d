"""What every ``repro.py`` is filled with beside its template's text
(``templates/``, filled by ``template.fill``): the target's slots (shape
mode, output type, how IREE or refbackend compiles and runs it, a Vulkan
device's description), the refbackend runtime written beside a refbackend
repro, and the float64 twin's dtype switch in generated code."""

from __future__ import annotations

import re

from fuzz.targets.catalog import CompiledTarget, IreeTarget, RefBackendTarget, VulkanTarget
import fuzz.targets.refbackend

__all__ = ["RUNTIME_FILE"]


def _target_slots(target: CompiledTarget, backend: bool = True) -> dict[str, object]:
    """The slots every template fills from the target: its name, shape mode,
    output type, and, when the script goes past lowering (``backend``), how
    it compiles and runs: IREE (backend, flags, driver; on Vulkan the device
    description and the staging read-back) or torch-mlir's refbackend (its
    runtime beside the script)."""
    iree = backend and isinstance(target, IreeTarget)
    vulkan = iree and isinstance(target, VulkanTarget)
    slots: dict[str, object] = {
        "target": target.name, "static": not target.dynamic, "dynamic": target.dynamic,
        "output_type": target.output_type, "fx": True, "iree": iree, "vulkan": vulkan,
        "to_host": iree and not vulkan, "refbackend": backend and isinstance(target, RefBackendTarget),
        "runtime_file": RUNTIME_FILE}
    if isinstance(target, IreeTarget) and iree:
        slots.update(backend=target.backend, flags=_flags(target), driver=target.driver,
                     device_targets=_vulkan_device_targets(target) if vulkan else "")
    return slots


# Beside a refbackend repro: torch-mlir ships the refback passes and the MLIR
# ExecutionEngine but no Python driver for them.
RUNTIME_FILE = "refbackend_runtime.py"


def _refbackend_runtime() -> str:
    """The driver dlrm-fuzz runs refbackend with (fuzz/targets/refbackend.py:
    standard library, numpy and torch-mlir only), verbatim but for its one
    import of dlrm-fuzz, the stage wrapper, whose job the script's own
    ``attempt`` does."""
    import inspect


    source = inspect.getsource(fuzz.targets.refbackend)
    ours = "from fuzz.targets.pipeline import StageFailure, run_stage\n"
    assert ours in source, ("fuzz/targets/refbackend.py's imports changed: update "
                            "fuzz.reports.repro.script._refbackend_runtime")
    return source.replace(ours, "\n\nclass StageFailure(Exception):  # dlrm-fuzz's; only the probe raises it\n"
                                "    pass\n\n\ndef run_stage(stage, fn, capture_stderr=True):\n"
                                "    return fn()  # the repro's attempt() is its stage boundary\n")


def _vulkan_device_targets(target: IreeTarget) -> str:
    """The ``hal.device.targets`` attribute the target attaches (empty when it
    uses flags instead), as compiled here: the device description is part of
    the program IREE compiled."""
    source, _ = target.prepare("module {\n}")
    found = re.match(r"module attributes \{(.*)\} \{", source)
    return found.group(1) if found else ""


def _flags(target: IreeTarget) -> list[str]:
    return list(target.prepare("module {\n}")[1])


def _backend_words(target: CompiledTarget) -> str:
    if isinstance(target, IreeTarget):
        return f"IREE {target.backend} -> {target.driver}"
    return "torch-mlir refbackend (refback passes, MLIR ExecutionEngine)"


def _twin_dtypes(code: list[str]) -> list[str]:
    """``code`` with every float dtype it names read through ``_f``, and ``_f``
    defined before it. A low-precision program names its float dtypes (the
    casts at its edges, torch.export's _assert_tensor_metadata checks of
    them, an op's dtype argument): through _f, the float64 twin the judge
    runs (with ``TWIN`` set) computes them in float64 instead of failing
    "Tensor dtype mismatch! Expected: Float, Got: double"."""
    twin = ["TWIN = False  # True while the float64 twin runs: its float dtypes are float64",
            "def _f(dtype):", "    return torch.float64 if TWIN else dtype",
            "def twin_mode(on):  # and so are those it does not name (int / int takes the default dtype)",
            "    global TWIN; TWIN = on; torch.set_default_dtype(torch.float64 if on else torch.float32)"]
    return [*twin, *(_FLOAT_DTYPE.sub(r"_f(torch.\1)", line) for line in code)]


_FLOAT_DTYPE = re.compile(r"\btorch\.(float16|bfloat16|float32|float64|half|float)\b(?!\w|\()")

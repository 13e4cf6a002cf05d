"""What the Vulkan target compiles for: a description that matches the device
it will run on.

IREE compiles SPIR-V for a *described* GPU (subgroup size, int64 support,
shared memory), not for the device it later runs on. On Mesa's lavapipe (a
CPU Vulkan device, 8-wide subgroups) IREE's default target lacks int64, which
every DLRM with int64 indices needs, and the int64-capable named targets
assume 32- or 64-wide subgroups: their reductions come back as NaN on
lavapipe. Both would be false alarms, so on lavapipe the module is compiled
for an exact description of lavapipe (measured with vulkaninfo: subgroup 8,
int64 and fp64 shaders, 32 KiB shared memory), attached as the module's
``hal.device.targets``; on a real GPU a named target of its vendor is used.
"""

from __future__ import annotations

import functools
import re
from fuzz.targets.devices import ensure_runtime_environment

__all__ = ["LAVAPIPE_TARGET", "vulkan_device_name", "prepare_for_vulkan"]

LAVAPIPE_TARGET = (
    '#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", {iree_codegen.target_info = '
    '#iree_gpu.target<arch = "", features = "spirv:v1.6,cap:Shader", wgp = <'
    'compute = fp64|fp32|int64|int32|int16|int8, storage = b64|b32|b16|b8, '
    'subgroup = shuffle|arithmetic, subgroup_size_choices = [8], '
    'max_workgroup_sizes = [1024, 1024, 1024], max_thread_count_per_workgroup = 1024, '
    'max_workgroup_memory_bytes = 32768, max_workgroup_counts = [65535, 65535, 65535]>>}>')

# Named IREE Vulkan targets whose subgroup sizes match each vendor's GPUs.
_VENDOR_TARGETS = (("nvidia", "ampere"), ("amd", "rdna3"), ("radeon", "rdna3"))


@functools.lru_cache(maxsize=1)
def vulkan_device_name() -> str:
    """The first Vulkan device IREE sees ("" when there is none)."""

    ensure_runtime_environment()
    try:
        import iree.runtime as rt

        found = rt.get_driver("vulkan").query_available_devices()
    except Exception:
        return ""
    return str(found[0].get("name", "")) if found else ""


def _with_device_targets(mlir: str, executable_target: str) -> str:
    attribute = f'hal.device.targets = [#hal.device.target<"vulkan", [{executable_target}]> : !hal.device]'
    if re.search(r"^module attributes \{", mlir, re.M):
        return re.sub(r"^module attributes \{", "module attributes {" + attribute + ", ",
                      mlir, count=1, flags=re.M)
    return re.sub(r"^module \{", "module attributes {" + attribute + "} {", mlir, count=1,
                  flags=re.M)


def prepare_for_vulkan(mlir: str, flags: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(program, flags) to compile for the Vulkan device present here."""
    if any(flag.startswith("--iree-vulkan-target") for flag in flags):
        return mlir, flags  # the user chose a target (e.g. in a plugin): respect it
    name = vulkan_device_name().lower()
    if "llvmpipe" in name or "lavapipe" in name:
        return _with_device_targets(mlir, LAVAPIPE_TARGET), flags
    for vendor, target in _VENDOR_TARGETS:
        if vendor in name:
            return mlir, (*flags, f"--iree-vulkan-target={target}")
    return mlir, flags

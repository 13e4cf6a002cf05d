"""Which IREE runtime devices exist on this machine, and how to get results off them.

This module has one job: knowing which IREE runtime drivers (``local-task``,
``local-sync``, ``vulkan``, ``cuda``, ``hip``) have a usable device here, and
moving a compiled function's results off such a device into host numpy arrays
reliably. Both are needed because the differential fuzzer only means something
when a missing device is told apart from a miscompilation: a target that cannot
run here must be skipped with a reason that says how to enable it, never
reported as a finding, and a result that cannot be read back because of a
runtime quirk (``DeviceArray.to_host()`` fails on Mesa's lavapipe Vulkan device,
whose ``minImportedHostPointerAlignment`` of 4096 a numpy array rarely meets)
must not be mistaken for a failure of the compiler under test. Probing runs in
a subprocess because a broken driver installation can crash or hang the
process that loads it; ``iree.runtime`` is imported inside functions so that
importing this module stays cheap.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Iterator, Sequence

import numpy as np

__all__ = ["PROBE_TIMEOUT_S", "device_availability", "ensure_runtime_environment",
           "call_and_read_back"]

# Long enough for a slow Vulkan/CUDA driver to enumerate its devices, short
# enough that a hung driver does not stall a whole campaign.
PROBE_TIMEOUT_S = 60.0

MAX_REASON_CHARS = 300
_SOURCE_LOCATION = re.compile(r"\S+\.(?:c|cc|cpp|h):\d+: ")

# How to get a device for each driver: what a user needs to do, printed with
# the reason a driver is unavailable.
_HOW_TO_ENABLE: dict[str, str] = {
    "vulkan": "no Vulkan device: apt-get install mesa-vulkan-drivers libvulkan1 "
              "(lavapipe, a CPU Vulkan device) or install a GPU's Vulkan driver",
    "cuda": "no CUDA device: needs an NVIDIA GPU and driver (libcuda.so)",
    "hip": "no HIP device: needs an AMD GPU and ROCm (libamdhip64.so)",
    "local-task": "no local-task CPU device: reinstall iree-base-runtime",
    "local-sync": "no local-sync CPU device: reinstall iree-base-runtime",
}

# Runs in a fresh interpreter: prints one JSON line {"ok": bool, "detail": str}.
# It creates the device, not only lists it, because a listed device whose
# creation fails (missing extension, broken ICD) is no more usable than none.
_PROBE = r"""
import json, sys
driver = sys.argv[1]
def answer(ok, detail):
    print(json.dumps({"ok": ok, "detail": detail}), flush=True)
    sys.exit(0)
try:
    import iree.runtime as rt
except Exception as exc:
    answer(False, f"iree.runtime does not import: {type(exc).__name__}: {exc}")
registered = sorted(rt.HalDriver.query())
if driver.split(":", 1)[0] not in registered:
    answer(False, f"IREE has no runtime driver {driver!r} (registered: {', '.join(registered)})")
try:
    hal_driver = rt.get_driver(driver)
except Exception as exc:
    answer(False, f"driver does not load: {exc}")
try:
    devices = hal_driver.query_available_devices()
except Exception as exc:
    answer(False, f"device query failed: {exc}")
if not devices:
    answer(False, "the driver lists no devices")
try:
    hal_driver.create_default_device()
except Exception as exc:
    answer(False, f"device creation failed: {exc}")
answer(True, "; ".join(str(d.get("name", "")) for d in devices))
"""


def ensure_runtime_environment() -> None:
    """Set XDG_RUNTIME_DIR to a private writable temp folder if unset.

    The Vulkan loader and Mesa's drivers look for it (shader caches, sockets)
    and complain or misbehave without it; a sandbox or a CI job often has none.
    An empty value counts as unset. Subprocesses started afterwards inherit it.
    """
    if not os.environ.get("XDG_RUNTIME_DIR"):
        # mkdtemp makes the folder mode 0700, which is what the loader expects.
        folder = tempfile.mkdtemp(prefix="dlrm-fuzz-xdg-")
        os.environ["XDG_RUNTIME_DIR"] = folder
        # The process that made it removes it (one folder a process used to
        # stay behind: 49 in /tmp after one session's test runs); processes
        # started later inherit the variable and make none of their own.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


def _short(detail: str) -> str:
    """First line of an IREE status message without its source locations, so
    the reason stays one readable line."""
    lines = [line.strip() for line in detail.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    for noise in ("Error creating driver: ", "Error querying devices: "):
        line = line.replace(noise, "")
    # "c/runtime/src/iree/hal/drivers/cuda/x.c:66: UNAVAILABLE; ..." -> "UNAVAILABLE; ..."
    line = _SOURCE_LOCATION.sub("", line).rstrip(":; ")
    return line[:MAX_REASON_CHARS]


def _unavailable(driver: str, detail: str) -> tuple[bool, str]:
    base = driver.split(":", 1)[0]
    hint = _HOW_TO_ENABLE.get(base)
    short = _short(detail)
    if hint is None:
        return False, short or f"IREE has no runtime driver {driver!r}"
    return False, f"{hint} ({short})" if short else hint


@functools.lru_cache(maxsize=None)
def device_availability(driver: str) -> tuple[bool, str]:
    """(True, "") if IREE's runtime `driver` (local-task, local-sync, vulkan, cuda, hip) has at least one device here; else (False, one-line reason + how to enable, e.g. 'no Vulkan device: apt-get install mesa-vulkan-drivers libvulkan1' or 'no CUDA device: needs an NVIDIA GPU and driver').

    The probe runs in a subprocess with a timeout because loading a broken
    driver can crash (segfault in an ICD) or hang the process that does it;
    the answer is cached per driver for the life of this process, since the
    set of devices does not change under a running campaign. Never raises.
    """
    ensure_runtime_environment()
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, driver],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return _unavailable(driver, f"device probe hung for over {PROBE_TIMEOUT_S:.0f} s")
    except OSError as exc:
        return _unavailable(driver, f"device probe could not start: {exc}")
    for line in reversed(done.stdout.splitlines()):
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and "ok" in answer:
            if answer["ok"]:
                return True, ""
            return _unavailable(driver, str(answer.get("detail", "")))
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return _unavailable(driver, f"device probe died (exit {done.returncode}) {last}".strip())


def _flatten(result: Any) -> Iterator[Any]:
    if isinstance(result, (list, tuple)):
        for item in result:
            yield from _flatten(item)
    else:
        yield result


def _read_back_staged(device: Any, value: Any) -> np.ndarray:
    """Copy one device result into a freshly allocated host-visible staging
    buffer with a queue copy, wait for it, then map it.

    This is the path that works on lavapipe: ``to_host()`` there tries to
    import the numpy array's memory into Vulkan, which needs a 4096-byte
    aligned pointer, and fails. The staging buffer is allocated by the device
    itself, so it is always acceptable to it.
    """
    import iree.runtime as rt

    buffer_view = getattr(value, "_buffer_view", None)
    if buffer_view is None:  # not a device array (a host value): nothing to move
        return np.array(value, copy=True)
    dtype = np.dtype(rt.HalElementType.map_to_dtype(buffer_view.element_type))
    shape = [int(d) for d in buffer_view.shape]
    source = buffer_view.get_buffer()
    size = int(source.byte_length())
    if size == 0:
        return np.zeros(shape, dtype)
    staging = device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
        allowed_usage=rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED,
        allocation_size=size)
    semaphore = device.create_semaphore(0)
    device.queue_copy(source, staging,
                      wait_semaphores=rt.HalFence.create_at(semaphore, 0),
                      signal_semaphores=rt.HalFence.create_at(semaphore, 1))
    rt.HalFence.create_at(semaphore, 1).wait()
    mapped = staging.map()
    # The element count may be smaller than the buffer (allocators round up).
    host = mapped.asarray(shape, dtype)
    # Copy out: the mapping dies with ``staging``.
    return np.array(host, copy=True)


def _read_back_plain(value: Any) -> np.ndarray:
    to_host = getattr(value, "to_host", None)
    return np.array(to_host() if to_host is not None else value, copy=True)


def call_and_read_back(context: Any, function_name: str, inputs: Sequence[np.ndarray],
                       driver: str) -> list[np.ndarray]:
    """Call the function of a loaded iree.runtime.SystemContext and return host numpy copies of all results; on the vulkan driver use the staging-buffer path; elsewhere plain to_host().

    Inputs are made C-contiguous first: IREE copies host arrays into device
    buffers, and a strided view would otherwise be rejected. Results are
    copies, so they outlive the context and any mapped device memory. Nested
    tuples/lists of results are flattened in order.
    """
    function = context.modules.module[function_name]
    result = function(*[np.ascontiguousarray(x) for x in inputs])
    if driver.split(":", 1)[0] == "vulkan":
        device = context.config.device
        return [_read_back_staged(device, value) for value in _flatten(result)]
    return [_read_back_plain(value) for value in _flatten(result)]

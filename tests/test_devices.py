"""fuzz.targets.devices: which IREE runtime devices exist here, and reading results back.

The availability asserts hold on any machine: a driver that is absent must say
why (non-empty reason), one that is present must say nothing. The Vulkan
end-to-end test runs on Mesa's lavapipe (a CPU Vulkan device) where installed
and is skipped, with the reason, where no Vulkan device exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from fuzz.targets import devices
from fuzz.targets.vulkan import prepare_for_vulkan



def _assert_consistent(answer: tuple[bool, str]) -> None:
    available, reason = answer
    if available:
        assert reason == ""
    else:
        assert reason.strip() and "\n" not in reason


@pytest.mark.engine
def test_local_task_is_available() -> None:
    assert devices.device_availability("local-task") == (True, "")


@pytest.mark.engine
@pytest.mark.parametrize("driver, label", [("cuda", "CUDA"), ("hip", "HIP")])
def test_gpu_drivers_answer_without_raising(driver: str, label: str) -> None:
    available, reason = devices.device_availability(driver)
    _assert_consistent((available, reason))
    if not available:
        assert reason.startswith(f"no {label} device")


@pytest.mark.engine
def test_unknown_driver_is_unavailable_with_reason() -> None:
    available, reason = devices.device_availability("bogus")
    assert not available
    assert "bogus" in reason and "local-task" in reason


@pytest.mark.engine
def test_answer_is_cached_per_driver() -> None:
    first = devices.device_availability("local-task")
    assert devices.device_availability("local-task") is first


@pytest.mark.engine
def test_hung_probe_is_unavailable_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "_PROBE", "import time; time.sleep(30)")
    monkeypatch.setattr(devices, "PROBE_TIMEOUT_S", 0.5)
    available, reason = devices.device_availability.__wrapped__("vulkan")
    assert not available
    assert "hung" in reason and "mesa-vulkan-drivers" in reason


@pytest.mark.engine
def test_crashing_probe_is_unavailable_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "_PROBE", "import os; os.abort()")
    available, reason = devices.device_availability.__wrapped__("cuda")
    assert not available
    assert "died" in reason and reason.startswith("no CUDA device")


def test_ensure_runtime_environment_sets_private_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    devices.ensure_runtime_environment()
    folder = os.environ["XDG_RUNTIME_DIR"]
    assert os.path.isdir(folder) and os.access(folder, os.W_OK)
    assert os.stat(folder).st_mode & 0o077 == 0
    devices.ensure_runtime_environment()  # already set: left alone
    assert os.environ["XDG_RUNTIME_DIR"] == folder


@dataclass
class Tiny:
    mlir: str
    inputs: list[list[np.ndarray]]
    expected: list[np.ndarray]


@pytest.fixture(scope="module")
def tiny() -> Iterator[Tiny]:
    """The tiny DLRM lowered once, two batches and their float64 eager answers."""
    from fuzz.workers.execute import execute
    from fuzz.targets.catalog import TARGETS
    from tests.helpers import linalg_of, tiny_config, tiny_sample

    sample = tiny_sample(tiny_config(), batches=2)
    mlir = linalg_of(sample.config, sample.seed, sample.batches[0])
    expected = execute(TARGETS["eager-f64"], sample).outputs
    assert all(out is not None for out in expected)
    yield Tiny(mlir, [batch.flat() for batch in sample.batches], expected)  # type: ignore[arg-type]


def _check_two_batches(tiny: Tiny, backend: str, flags: list[str], driver: str,
                       mlir: str | None = None) -> None:
    import iree.runtime as rt

    from fuzz.targets import pipeline

    vmfb = pipeline.compile_vmfb(mlir or tiny.mlir, backend, flags)
    context = rt.SystemContext(config=rt.Config(driver))
    context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb))
    for flat, expected in zip(tiny.inputs, tiny.expected):
        (got,) = devices.call_and_read_back(context, "main", flat, driver)
        assert isinstance(got, np.ndarray) and got.shape == expected.shape
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.pipeline
def test_vulkan_matches_eager(tiny: Tiny) -> None:
    available, reason = devices.device_availability("vulkan")
    if not available:
        pytest.skip(reason)
    devices.ensure_runtime_environment()
    # Compiled for a description of the device present (see fuzz/vulkan.py).
    mlir, flags = prepare_for_vulkan(tiny.mlir, ())
    _check_two_batches(tiny, "vulkan-spirv", list(flags), "vulkan", mlir)


@pytest.mark.pipeline
def test_local_task_matches_eager(tiny: Tiny) -> None:
    _check_two_batches(tiny, "llvm-cpu", [], "local-task")


@pytest.mark.engine
def test_the_runtime_folder_made_for_a_process_is_removed_when_it_exits(tmp_path: Path) -> None:
    """Without XDG_RUNTIME_DIR, the folder made for the Vulkan loader goes
    away with the process that made it (one used to stay in /tmp per process)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    code = ("import os; from fuzz.targets.devices import ensure_runtime_environment; "
            "ensure_runtime_environment(); print(os.environ['XDG_RUNTIME_DIR'])")
    made = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    assert made.startswith(str(tmp_path / "dlrm-fuzz-xdg-")), made
    assert not Path(made).exists()

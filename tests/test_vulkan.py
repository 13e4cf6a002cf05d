"""The Vulkan target compiles for the device it runs on. On lavapipe (8-wide
subgroups) a long reduction compiled for a 32-wide-subgroup GPU comes back
NaN: a false alarm this module exists to prevent. Skipped without Vulkan."""

from __future__ import annotations

import numpy as np
import pytest

from fuzz.targets import devices
from fuzz.targets.vulkan import LAVAPIPE_TARGET, prepare_for_vulkan, vulkan_device_name

pytestmark = pytest.mark.pipeline

ROW_SUM = """module {
  func.func @main(%arg0: tensor<64x4096xf32>) -> tensor<64xf32> {
    %zero = arith.constant 0.0 : f32
    %init = tensor.empty() : tensor<64xf32>
    %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<64xf32>) -> tensor<64xf32>
    %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                           iterator_types = ["parallel", "reduction"]}
        ins(%arg0 : tensor<64x4096xf32>) outs(%filled : tensor<64xf32>) {
      ^bb0(%in: f32, %acc: f32):
        %add = arith.addf %in, %acc : f32
        linalg.yield %add : f32
    } -> tensor<64xf32>
    return %sum : tensor<64xf32>
  }
}
"""


def test_device_targets_are_attached_to_the_module() -> None:
    prepared, flags = prepare_for_vulkan("module {\n}\n", ())
    name = vulkan_device_name().lower()
    if "llvmpipe" in name:
        assert LAVAPIPE_TARGET in prepared and "subgroup_size_choices = [8]" in prepared
        assert flags == ()
    untouched, kept = prepare_for_vulkan("module {\n}\n", ("--iree-vulkan-target=pascal",))
    assert untouched == "module {\n}\n" and kept == ("--iree-vulkan-target=pascal",)


def test_long_reduction_is_right_on_this_vulkan_device() -> None:
    available, reason = devices.device_availability("vulkan")
    if not available:
        pytest.skip(reason)
    import iree.runtime as rt

    from fuzz.targets import pipeline

    mlir, flags = prepare_for_vulkan(ROW_SUM, ())
    vmfb = pipeline.compile_vmfb(mlir, "vulkan-spirv", flags)
    devices.ensure_runtime_environment()
    context = rt.SystemContext(config=rt.Config("vulkan"))
    context.add_vm_module(rt.VmModule.copy_buffer(context.instance, vmfb))
    x = np.random.default_rng(0).random((64, 4096), dtype=np.float32)
    (got,) = devices.call_and_read_back(context, "main", [x], "vulkan")
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-5)

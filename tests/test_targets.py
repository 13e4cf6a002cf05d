"""Every target in the table, on the real toolchain: each available target
runs a small DLRM and either matches eager PyTorch or records the failure
class the pinned toolchain is known to produce; unavailable ones say why."""

from __future__ import annotations

import pytest

from fuzz.workers.execute import execute
from fuzz.targets.catalog import (ROAD_TARGETS, TARGETS, CompiledTarget, UnavailableTarget,
                                  UnknownTarget, available_targets, resolve_targets)
from oracles import Verdict, judge
from tests.helpers import tiny_config, varied_sample

# What torch 2.13.0 / torch-mlir 20261001 / IREE 3.13.0 do with a plain DLRM.
EXPECTED = {
    "iree-tosa": Verdict.LOWERING_UNSUPPORTED_OP,       # no TOSA lowering of embedding_bag
    "iree-tosa-dyn": Verdict.LOWERING_UNSUPPORTED_OP,
    "iree-stablehlo": Verdict.LOWERING_UNSUPPORTED_OP,  # no StableHLO lowering of embedding_bag
    "iree-stablehlo-dyn": Verdict.LOWERING_UNSUPPORTED_OP,
    # The third batch has a table with no indices: a zero-length buffer that
    # IREE's Vulkan HAL refuses to bind ("resolved to an empty buffer range").
    "iree-vulkan-dyn": Verdict.RUNTIME_ERROR,
    # IREE's default Vulkan target has no int64: its 64-bit integer emulation
    # leaves an i64 -> vector<2xi32> materialization unresolved on a 3-table DLRM.
    "iree-vulkan-default": Verdict.COMPILE_ERROR,
    "iree-vulkan-default-dyn": Verdict.COMPILE_ERROR,
}
COMPILED = [name for name, t in TARGETS.items() if isinstance(t, CompiledTarget)]
# The other roads into IREE have tests of their own (tests/test_roads.py).
CPU_TARGETS = [n for n in COMPILED if not n.startswith(("iree-cuda", "iree-hip"))
               and n not in ROAD_TARGETS]


def test_table_has_every_pipeline_in_static_and_dynamic_form() -> None:
    for name in ("iree-cpu", "iree-cpu-sync", "iree-vmvx", "iree-torch", "iree-tosa",
                 "iree-stablehlo", "refbackend", "iree-vulkan", "iree-vulkan-default", "iree-cuda", "iree-hip"):
        assert name in TARGETS and f"{name}-dyn" in TARGETS
        assert TARGETS[f"{name}-dyn"].any_shape and not TARGETS[name].any_shape
    assert TARGETS["eager"].any_shape and TARGETS["eager-f64"].any_shape


@pytest.mark.engine
def test_every_cpu_target_and_lavapipe_vulkan_is_available_here() -> None:
    """Every CPU target runs here; the Vulkan ones need a Vulkan device
    (lavapipe, which .ci/run installs): without one they are skipped, with
    the reason the target gives, never failed."""
    available = available_targets(TARGETS)
    missing = [(n, TARGETS[n].availability()[1]) for n in CPU_TARGETS if n not in available]
    if missing and all("vulkan" in name for name, _ in missing):
        pytest.skip(f"no Vulkan device here: {missing[0][1]}")
    assert not missing, missing


@pytest.mark.engine
@pytest.mark.parametrize("name", ["iree-cuda", "iree-hip"])
def test_gpu_targets_explain_themselves(name: str) -> None:
    ok, why = TARGETS[name].availability()
    if not ok:
        assert why and ("GPU" in why or "device" in why)
        with pytest.raises(UnavailableTarget, match=f"target='{name}': not available here"):
            resolve_targets([name], check_available=True)


def test_unknown_target_is_named() -> None:
    with pytest.raises(UnknownTarget, match="target='iree-nope': unknown; choose from"):
        resolve_targets(["iree-nope"])


@pytest.mark.pipeline
@pytest.mark.parametrize("name", CPU_TARGETS)
def test_target_runs_a_small_dlrm(name: str) -> None:
    sample = varied_sample()
    reference = execute(TARGETS["eager-f64"], sample)
    eager = execute(TARGETS["eager"], sample)
    result = execute(TARGETS[name], sample)
    outcome = judge(result, reference, eager)
    assert outcome.verdict is EXPECTED.get(name, Verdict.PASS), outcome
    if name == "iree-vulkan-dyn":
        assert "empty buffer range" in outcome.error
        assert result.outputs[0] is not None and result.outputs[2] is None  # failed on batch 3
    if name.startswith("iree-vulkan-default"):
        assert "materialization from ('i64') to ('vector<2xi32>')" in outcome.error
    if outcome.verdict is Verdict.PASS:
        assert result.compiles == 1
        checked = [out is not None for out in result.outputs]
        # Static: the two batches of the first shape; dynamic: all three.
        assert checked == ([True, True, True] if name.endswith("-dyn") else [True, True, False])


@pytest.mark.pipeline
def test_default_vulkan_target_emulates_int64_and_gets_its_own_bugs() -> None:
    """IREE's default Vulkan target (no native int64, as on mobile GPUs) runs
    a one-table DLRM right on this device, emulating its int64 indices with
    32-bit pairs; a QR table's int64 remainder is where the emulation stops
    (`arith.remsi` left illegal), while the device-described target, with
    native int64, computes the same QR sample right."""
    devices_ok, why = TARGETS["iree-vulkan-default"].availability()
    if not devices_ok:
        pytest.skip(why)
    one_table = varied_sample(tiny_config(ln_emb=(10,), ln_top=(5, 1)))
    qr = varied_sample(tiny_config(ln_emb=(10,), ln_top=(5, 1), qr_flag=True, qr_threshold=4,
                                   qr_collisions=3))
    for sample, name, verdict in ((one_table, "iree-vulkan-default", Verdict.PASS),
                                  (qr, "iree-vulkan-default", Verdict.COMPILE_ERROR),
                                  (qr, "iree-vulkan", Verdict.PASS)):
        outcome = judge(execute(TARGETS[name], sample), execute(TARGETS["eager-f64"], sample),
                        execute(TARGETS["eager"], sample))
        assert outcome.verdict is verdict, (name, outcome)
        if verdict is Verdict.COMPILE_ERROR:
            assert "failed to legalize operation 'arith.remsi'" in outcome.error


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["iree-cuda", "iree-cuda-dyn", "iree-hip", "iree-hip-dyn"])
def test_gpu_target_runs_a_small_dlrm(name: str) -> None:
    ok, why = TARGETS[name].availability()
    if not ok:
        pytest.skip(f"{name}: {why}")
    sample = varied_sample()
    outcome = judge(execute(TARGETS[name], sample), execute(TARGETS["eager-f64"], sample),
                    execute(TARGETS["eager"], sample))
    # A failure here is a finding, reported with its class; PASS is the healthy answer.
    assert outcome.verdict is Verdict.PASS, outcome


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["iree-cuda", "iree-hip"])
def test_gpu_target_runs_in_a_capped_worker(name: str) -> None:
    """A campaign runs every job in a worker under ``--memory-mb``'s cap
    (8192 MiB by default): the GPU driver must still create its device there.
    (Under an RLIMIT_AS cap, IREE's CUDA device creation failed with
    CUDA_ERROR_OUT_OF_MEMORY on an H200, and every CUDA job of a default
    campaign became a RUNTIME_ERROR; the in-process test above still passed.)"""
    ok, why = TARGETS[name].availability()
    if not ok:
        pytest.skip(f"{name}: {why}")
    from fuzz.workers.pool import ExecuteJob, WorkerPool

    sample = varied_sample()
    with WorkerPool(1, timeout_s=300) as pool:  # the campaign's default cap
        (result,) = pool.run([ExecuteJob(TARGETS[name], sample)])
    outcome = judge(result, execute(TARGETS["eager-f64"], sample), execute(TARGETS["eager"], sample))
    assert outcome.verdict is Verdict.PASS, outcome

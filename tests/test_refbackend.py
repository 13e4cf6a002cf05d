"""torch-mlir's reference backend (fuzz.targets.refbackend) on the real toolchain: the
tiny DLRM lowered to linalg-on-tensors, JIT-compiled by the ExecutionEngine
the torch-mlir wheel ships, judged against eager float64. No IREE is involved
except in the one test that compares the two backends' answers."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch

from fuzz.targets import pipeline
from fuzz.model.config import DLRMConfig
from fuzz.model.dlrm import build_reference, to_torch
from fuzz.targets.pipeline import StageFailure
from fuzz.targets.refbackend import RefBackendModule, refbackend_available
from fuzz.model.sample import Batch, Sample
from tests.helpers import linalg_of, tiny_config, tiny_sample

pytestmark = pytest.mark.pipeline

RTOL = 1e-4


def _lower(config: DLRMConfig, batch: Batch) -> str:
    """linalg-on-tensors MLIR of the model ``config`` builds, exported on ``batch``."""
    return linalg_of(config, tiny_sample(config).seed, batch)


@functools.lru_cache(maxsize=None)
def _linalg(config: DLRMConfig) -> str:
    """``_lower`` on the first batch of the tiny sample: lowering costs about a
    second, so each config is lowered once per test session."""
    return _lower(config, tiny_sample(config).batches[0])


def _eager_f64(config: DLRMConfig, seed: int, flat: list[np.ndarray], **model_patch: Any) -> np.ndarray:
    reference = build_reference(config, seed)
    for name, value in model_patch.items():
        setattr(reference, name, value)
    with torch.no_grad():
        return reference(*to_torch(flat, config.num_tables, torch.float64)).numpy()


def test_available_in_the_installed_wheel() -> None:
    ok, why = refbackend_available()
    assert ok, why
    assert why == ""


@pytest.mark.parametrize("config", [
    tiny_config(),
    tiny_config(arch_interaction_op="cat", ln_top=(16, 2)),
], ids=["dot", "cat"])
def test_tiny_dlrm_compiled_once_matches_eager_f64_on_every_batch(config: DLRMConfig) -> None:
    sample = tiny_sample(config, batches=2)
    module = RefBackendModule(_linalg(config))
    for batch in sample.batches:  # table 0 of each batch has an empty bag
        flat = batch.flat()
        got = module(flat)
        assert len(got) == 1 and got[0].dtype == np.float32
        np.testing.assert_allclose(got[0], _eager_f64(config, sample.seed, flat), rtol=RTOL, atol=0)


def test_a_float16_model_with_weights_as_inputs_runs_and_passes() -> None:
    """Its ``main`` takes float16 tables and MLPs as arguments: refbackend used
    to refuse f16 arguments, a COMPILE_ERROR filed under torch-mlir that was a
    gap of ours (the munged calling convention takes f16 like f32)."""
    from fuzz.workers.execute import execute
    from fuzz.targets.catalog import EAGER, REFERENCE, TARGETS, resolve_targets
    from oracles import Tolerance, Verdict, judge

    config = tiny_config(dtype="float16", weights="inputs")
    sample = tiny_sample(config)
    reference, eager = (execute(t, sample) for t in resolve_targets([REFERENCE, EAGER]))
    got = execute(TARGETS["refbackend"], sample)
    assert got.failure is None, got.failure
    tolerance = Tolerance().for_precision(config.dtype, sample.reduction_length())
    assert judge(got, reference, eager, tolerance).verdict is Verdict.PASS


def test_runtime_verification_build_gives_the_same_bits() -> None:
    """The opt-in checked build (a failed check aborts the process, so it is
    off by default) computes exactly what the default build does."""
    config = tiny_config()
    flat = tiny_sample(config).batches[0].flat()
    plain = RefBackendModule(_linalg(config))(flat)[0]
    checked = RefBackendModule(_linalg(config), runtime_verification=True)(flat)[0]
    np.testing.assert_array_equal(plain, checked)


def test_results_are_fresh_copies_not_engine_memory() -> None:
    config = tiny_config()
    sample = tiny_sample(config, batches=2)
    module = RefBackendModule(_linalg(config))
    first = module(sample.batches[0].flat())[0]
    kept = first.copy()
    second = module(sample.batches[1].flat())[0]
    assert first.flags.owndata and first.flags.writeable
    np.testing.assert_array_equal(first, kept)  # the second call did not overwrite it
    assert not np.array_equal(first, second)


def test_zero_length_indices_all_bags_empty() -> None:
    """A table with no indices at all: a tensor<0xi64> argument and every bag
    of that table summing to zero."""
    config = tiny_config()
    base = tiny_sample(config)
    old = base.batches[0]
    index_dtype = np.dtype(config.index_dtype)
    batch = Batch(old.dense,
                  (np.zeros(2, index_dtype), *old.offsets[1:]),
                  (np.zeros(0, index_dtype), *old.indices[1:]))
    mlir = _lower(config, batch)
    assert "tensor<0xi64>" in mlir
    got = RefBackendModule(mlir)(batch.flat())[0]
    np.testing.assert_allclose(got, _eager_f64(config, base.seed, batch.flat()), rtol=RTOL, atol=0)


def test_known_bug_weighted_pooling_same_wrong_answer_as_iree() -> None:
    """torch-mlir 20261001 lowers embedding_bag as if per_sample_weights were
    absent. refbackend gives IREE's answer to float32 rounding, and that answer
    is eager's with the pooling weights dropped: the wrong answer is in the
    linalg-on-tensors text, so the blame is torch-mlir's, not IREE's."""
    config = tiny_config(weighted_pooling="fixed")
    sample: Sample = tiny_sample(config, batches=2)
    mlir = _linalg(config)
    refback = RefBackendModule(mlir)
    iree = pipeline.LoadedModule(
        pipeline.compile_vmfb(mlir, "llvm-cpu", ["--iree-llvmcpu-target-cpu=host"]), "local-task")
    for batch in sample.batches:
        flat = batch.flat()
        got = refback(flat)[0]
        np.testing.assert_allclose(got, iree(flat)[0], rtol=1e-5, atol=1e-6)
        dropped = _eager_f64(config, sample.seed, flat, pooling_weights=lambda k: None)
        np.testing.assert_allclose(got, dropped, rtol=RTOL, atol=0)
        assert np.abs(got - _eager_f64(config, sample.seed, flat)).max() > 1e-3


_OPS = {"f16": "arith.addf", "f32": "arith.addf", "f64": "arith.addf", "i32": "arith.addi", "i64": "arith.addi",
        "i1": "arith.xori"}
_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "i1": np.bool_}


def _elementwise(element: str, shape: tuple[int, ...]) -> str:
    """``main(a, b) = a (+|xor) b`` as a linalg.generic on tensors of ``shape``."""
    tensor = "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"
    dims = ", ".join(f"d{i}" for i in range(len(shape)))
    identity = f"affine_map<({dims}) -> ({dims})>"
    iterators = ", ".join(['"parallel"'] * len(shape))
    return f"""
    func.func @main(%a: {tensor}, %b: {tensor}) -> {tensor} {{
      %e = tensor.empty() : {tensor}
      %r = linalg.generic {{indexing_maps = [{identity}, {identity}, {identity}],
                            iterator_types = [{iterators}]}}
          ins(%a, %b : {tensor}, {tensor}) outs(%e : {tensor}) {{
      ^bb0(%x: {element}, %y: {element}, %o: {element}):
        %s = {_OPS[element]} %x, %y : {element}
        linalg.yield %s : {element}
      }} -> {tensor}
      return %r : {tensor}
    }}"""


@pytest.mark.parametrize("element", list(_OPS))
def test_every_element_type_rank_0_to_4_and_zero_size(element: str, rng: np.random.Generator) -> None:
    for shape in [(), (3,), (2, 3), (2, 0), (1, 2, 3), (2, 3, 1, 2), (0, 2, 3, 4)]:
        if element == "i1":
            a, b = (rng.integers(0, 2, shape).astype(np.bool_) for _ in range(2))
            expected = a ^ b
        else:
            a, b = ((rng.standard_normal(shape) * 100).astype(_DTYPES[element]) for _ in range(2))
            expected = a + b
        (got,) = RefBackendModule(_elementwise(element, shape))([a, b])
        assert got.dtype == expected.dtype and got.shape == expected.shape, (element, shape)
        np.testing.assert_array_equal(got, expected)


def test_dynamic_dimension_takes_any_size() -> None:
    module = RefBackendModule("""
    func.func @main(%a: tensor<?x3xf32>) -> tensor<?x3xf32> {
      %c0 = arith.constant 0 : index
      %n = tensor.dim %a, %c0 : tensor<?x3xf32>
      %e = tensor.empty(%n) : tensor<?x3xf32>
      %r = linalg.copy ins(%a : tensor<?x3xf32>) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
      return %r : tensor<?x3xf32>
    }""")
    for rows in (4, 0, 1):
        a = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        np.testing.assert_array_equal(module([a])[0], a)


@pytest.mark.parametrize("text", [
    "this is not MLIR",
    "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { return %b : tensor<2xf32> }",
])
def test_invalid_mlir_is_a_compile_failure_with_its_diagnostic(text: str) -> None:
    with pytest.raises(StageFailure) as raised:
        RefBackendModule(text)
    assert raised.value.stage == "compile"
    assert "error:" in raised.value.message


def test_pass_failure_is_a_compile_failure_with_its_diagnostic() -> None:
    unbufferizable = """
    func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
      %s = "tensor.bitcast"(%a) : (tensor<2xf32>) -> tensor<2xi32>
      %t = "tensor.bitcast"(%s) : (tensor<2xi32>) -> tensor<2xf32>
      return %t : tensor<2xf32>
    }"""
    with pytest.raises(StageFailure) as raised:
        RefBackendModule(unbufferizable)
    assert raised.value.stage == "compile"
    assert "not bufferized" in raised.value.message


def test_wrong_arguments_are_refused_before_the_call() -> None:
    """A wrong dtype or shape would not fail in the JIT, it would read garbage:
    it is the caller's bug, so it raises as such, not as a StageFailure."""
    module = RefBackendModule(_elementwise("f32", (2, 3)))
    good = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError):
        module([good, good.astype(np.float64)])
    with pytest.raises(ValueError):
        module([good, np.zeros((3, 2), np.float32)])
    with pytest.raises(TypeError):
        module([good])

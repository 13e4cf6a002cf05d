"""Localization names the first divergent ATen op of a MISMATCH.

Engine tier: FAKE targets (named as such) that corrupt one known op must be
blamed on exactly that op (an integer op of the QR path too, not the
``embedding_bag`` that reads its wrong index), and a healthy program on none.
Pipeline tier (``-m pipeline``): torch-mlir's known wrong lowering of
``embedding_bag`` with ``per_sample_weights`` (torch 2.13 / torch-mlir 20261001
/ IREE 3.13) must get one culprit name from every config that reaches it,
vmvx's rounded QR quotient must be blamed on its cast, and a healthy config
(QR's integer index arithmetic included) on nothing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

import numpy as np
import pytest

from fuzz.targets.cache import ArtifactCache
from fuzz.model.config import DLRMConfig
from fuzz.workers.execute import execute
from fuzz.targets.opnames import culprit_name
from fuzz.triage.localize import InvalidLocalizeArgument, Localization, first_divergent_op
from fuzz.targets.pipeline import StageFailure, Timer
from fuzz.model.sample import Batch, Sample
from fuzz.targets.catalog import FAKE_TARGETS, TARGETS, FakeWrongOpTarget, Target
from oracles.judge import judge
from oracles.verdict import Verdict
from tests.helpers import tiny_config, tiny_sample, varied_sample

WEIGHTED_BUG = "aten.embedding_bag.padding_idx[per_sample_weights]"

# A sigmoid on top never clips, so a corrupted op always reaches the output
# (a final ReLU could zero the difference away).
FAKE_CONFIG = dict(sigmoid_top=0)
# Every table of tiny_config goes through QR (quotient cast, remainder).
QR = dict(qr_flag=True, qr_threshold=5)


def _laid_out(config: DLRMConfig, indices: Sequence[Sequence[int]] | None = None) -> Sample:
    """tiny_sample's batch in ``config``'s input layout, with ``indices`` per
    table when given (one bag of the first index, one of the rest)."""
    lists = tiny_sample(dataclasses.replace(config, input_layout="lists")).batches[0]
    dtype = np.dtype(config.index_dtype)
    offsets = lists.offsets if indices is None else tuple(np.array([0, 1], dtype) for _ in indices)
    rows = lists.indices if indices is None else tuple(np.array(i, dtype) for i in indices)
    return Sample(config, 7, (Batch.for_config(config, lists.dense, offsets, rows),))


def _verdict(target: Target, config: DLRMConfig) -> Verdict:
    sample = tiny_sample(config)
    reference, eager = (execute(TARGETS[name], sample) for name in ("eager-f64", "eager"))
    return judge(execute(target, sample), reference, eager).verdict


@pytest.mark.parametrize("name, culprit", [
    ("fake-wrong-bmm", "aten.bmm.default"),
    ("fake-wrong-relu", "aten.relu.default"),
    ("fake-wrong-embedding-bag", "aten.embedding_bag.padding_idx"),
])
def test_fake_wrong_op_is_a_mismatch_blamed_on_its_op(name: str, culprit: str) -> None:
    target = FAKE_TARGETS[name]
    assert "FAKE" in target.description
    config = tiny_config(**FAKE_CONFIG)
    assert _verdict(target, config) == Verdict.MISMATCH
    found = first_divergent_op(target, tiny_sample(config), 0)
    assert found.culprit == culprit, found
    assert found.method == "intermediates"
    assert found.details["max_abs_error"] == pytest.approx(0.5, abs=1e-5)


def test_fake_wrong_embedding_bag_names_the_weighted_variant() -> None:
    config = tiny_config(weighted_pooling="fixed", **FAKE_CONFIG)
    found = first_divergent_op(FAKE_TARGETS["fake-wrong-embedding-bag"], tiny_sample(config), 0)
    assert found.culprit == WEIGHTED_BUG


@pytest.mark.parametrize("name, culprit, index_dtype", [
    ("fake-wrong-remainder", "aten.remainder.Scalar", "int64"),
    ("fake-wrong-remainder", "aten.remainder.Scalar", "int32"),
    ("fake-wrong-int-cast", "aten.to.dtype", "int64"),  # the quotient's truncation
])
def test_wrong_integer_op_in_the_qr_path_is_blamed_on_it(name: str, culprit: str,
                                                          index_dtype: str) -> None:
    target = FAKE_TARGETS[name]
    assert "FAKE" in target.description
    config = tiny_config(index_dtype=index_dtype, **QR, **FAKE_CONFIG)
    assert _verdict(target, config) == Verdict.MISMATCH
    found = first_divergent_op(target, tiny_sample(config), 0)
    assert found.culprit == culprit, found  # not aten.embedding_bag, which reads the index
    assert found.method == "intermediates"
    assert "(exact)" in found.details["reason"]
    assert found.details["max_abs_error"] >= 1


@pytest.mark.parametrize("overrides", [
    dict(), dict(index_dtype="int32"), dict(dtype="bfloat16"), dict(input_layout="stacked"),
], ids=["float32", "int32-indices", "bfloat16", "stacked"])
def test_float64_twin_computes_the_same_integers_as_eager(overrides: dict[str, Any]) -> None:
    # A healthy fake (it corrupts no op) that compiles modules: every exposed
    # integer of the QR path must match, whatever the twin did to the floats.
    target = FakeWrongOpTarget("fake-healthy", "FAKE: corrupts nothing", op="none")
    found = first_divergent_op(target, _laid_out(tiny_config(**QR, **overrides)), 0)
    assert found.details["exact_intermediates"] >= 6, found
    assert found.culprit is None and "harmless_divergence" not in found.details, found


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_weights_as_inputs_are_fed_to_the_targets_own_program(dynamic: bool) -> None:
    # The program takes the seed's weights first (fuzz.model.recipe): fed
    # anything else, or evaluated in float64 on other weights, every
    # intermediate after the first layer would diverge, the healthy one too.
    config = tiny_config(weights="inputs", **FAKE_CONFIG)
    wrong = FakeWrongOpTarget("fake-wrong-relu", "FAKE: relu wrong", op="aten.relu.default",
                              dynamic=dynamic)
    assert _verdict(wrong, config) == Verdict.MISMATCH
    found = first_divergent_op(wrong, tiny_sample(config), 0)
    assert found.culprit == "aten.relu.default", found
    assert found.details["max_abs_error"] == pytest.approx(0.5, abs=1e-5)
    healthy = FakeWrongOpTarget("fake-healthy", "FAKE: corrupts nothing", op="none", dynamic=dynamic)
    found = first_divergent_op(healthy, tiny_sample(config), 0)
    assert found.culprit is None and "harmless_divergence" not in found.details, found
    assert "no mismatch" in found.note


def test_integers_are_judged_exactly_against_either_evaluation() -> None:
    from fuzz.triage.localize import _compare_exact

    # A float-to-int cast of float64's value may land one apart from float32's.
    ref64, eager32 = np.array([2, 3, 4]), np.array([2, 2, 4])
    assert _compare_exact(ref64, eager32, np.array([2, 3, 4])).ok
    assert _compare_exact(ref64, eager32, np.array([2, 2, 4], np.int32)).ok  # emulated int64
    off = _compare_exact(ref64, eager32, np.array([2, 3, 5]))
    assert not off.ok and off.numbers["first_bad_index"] == [2]
    assert off.numbers["first_bad_got"] == 5 and off.numbers["first_bad_expected"] == 4
    mask = np.array([True, False])
    assert _compare_exact(mask, mask, np.array([1, 0], np.int8)).ok  # a boolean returned as bytes
    assert not _compare_exact(mask, mask, np.array([0, 0], np.int8)).ok
    assert not _compare_exact(ref64, eager32, np.array([2, 3])).ok  # shape


def test_healthy_program_has_no_culprit() -> None:
    # bmm corrupted, but a "cat" interaction has no bmm: the fake is healthy.
    config = tiny_config(arch_interaction_op="cat", ln_top=(16, 1), **FAKE_CONFIG)
    target = FAKE_TARGETS["fake-wrong-bmm"]
    assert _verdict(target, config) == Verdict.PASS
    found = first_divergent_op(target, tiny_sample(config), 0)
    assert found.culprit is None and found.method == "none"
    assert "no mismatch" in found.note


def test_fake_ok_cannot_localize_and_says_so() -> None:
    found = first_divergent_op(FAKE_TARGETS["fake-ok"], tiny_sample(), 0)
    assert found.culprit is None and "cannot compile" in found.note


def test_mismatch_that_vanishes_under_observation_is_reported() -> None:
    target = FAKE_TARGETS["fake-shy-wrong-relu"]
    found = first_divergent_op(target, tiny_sample(tiny_config(**FAKE_CONFIG)), 0)
    assert found.culprit is None
    assert found.note == "mismatch vanished when intermediates were exposed"


class _BrokenTarget(FakeWrongOpTarget):
    """Its compiler fails on the instrumented program."""

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        raise StageFailure("compile", "FakeCompilerError", "error: too many results\nmore")


def test_toolchain_failure_is_a_note_not_an_exception() -> None:
    found = first_divergent_op(_BrokenTarget("fake-broken", "FAKE"), tiny_sample(), 0)
    assert found.culprit is None
    assert "compile failed" in found.note and "too many results" in found.note


def test_bad_batch_index_is_rejected() -> None:
    with pytest.raises(InvalidLocalizeArgument, match="batch=3"):
        first_divergent_op(FAKE_TARGETS["fake-wrong-relu"], tiny_sample(), 3)


def test_localization_round_trips_through_json() -> None:
    found = first_divergent_op(FAKE_TARGETS["fake-wrong-relu"], tiny_sample(tiny_config(**FAKE_CONFIG)), 0)
    assert Localization.from_dict(json.loads(json.dumps(found.to_dict()))) == found


def _names_of(fn: Any, *args: Any) -> list[str]:
    import torch

    class Wrap(torch.nn.Module):
        def forward(self, *xs: Any) -> Any:
            return fn(*xs)

    graph = torch.export.export(Wrap(), args).graph
    return [culprit_name(n) for n in graph.nodes if n.op == "call_function"]


def test_culprit_names_keep_switches_and_drop_data() -> None:
    import torch
    import torch.nn.functional as F

    weight, idx, off = torch.rand(10, 3), torch.tensor([1, 2, 9]), torch.tensor([0, 1])
    psw = torch.rand(3)

    def bag(**kw: Any) -> Any:
        return _names_of(lambda w, i, o: F.embedding_bag(i, w, o, **kw), weight, idx, off)[0]

    assert bag(mode="sum") == "aten.embedding_bag.padding_idx"
    assert bag(mode="mean") == "aten.embedding_bag.padding_idx[mode=1]"
    assert bag(mode="max") == "aten.embedding_bag.padding_idx[mode=2]"
    assert bag(mode="sum", include_last_offset=True) == \
        "aten.embedding_bag.padding_idx[include_last_offset]"
    assert bag(mode="sum", padding_idx=3) == "aten.embedding_bag.padding_idx[padding_idx]"
    assert bag(mode="sum", padding_idx=7) == bag(mode="sum", padding_idx=3)  # a row is data
    assert _names_of(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                     weight, idx, off, psw)[0] == WEIGHTED_BUG
    assert _names_of(lambda i: torch.div(i, 4, rounding_mode="floor"), idx) == \
        ["aten.div.Tensor_mode[rounding_mode=floor]"]
    lin = torch.nn.Linear(3, 2)
    assert _names_of(lambda x: lin(x), torch.rand(2, 3)) == ["aten.linear.default[bias]"]
    assert _names_of(lambda x: torch.cat([x, x], 1), torch.rand(2, 3)) == ["aten.cat.default"]


@pytest.mark.pipeline
@pytest.mark.parametrize("target", ["refbackend", "iree-cpu"])
@pytest.mark.parametrize("pooling", ["fixed", "learned"])
def test_weighted_pooling_bug_is_localized(target: str, pooling: str, tmp_path: Any) -> None:
    found = first_divergent_op(TARGETS[target], tiny_sample(tiny_config(weighted_pooling=pooling)), 0,
                               cache=ArtifactCache(tmp_path))
    assert found.culprit == WEIGHTED_BUG, found
    assert found.method == "intermediates"
    assert found.details["max_abs_error"] > 1e-2


@pytest.mark.pipeline
@pytest.mark.parametrize("overrides", [
    dict(qr_flag=True, qr_threshold=5),
    dict(md_flag=True, md_threshold=15),
    dict(arch_interaction_itself=True, ln_top=(14, 1)),
], ids=["qr", "md", "interaction-itself"])
def test_weighted_pooling_bug_has_one_name_across_configs(overrides: dict[str, Any]) -> None:
    config = tiny_config(weighted_pooling="fixed", **overrides)
    found = first_divergent_op(TARGETS["refbackend"], tiny_sample(config), 0)
    assert found.culprit == WEIGHTED_BUG, found


@pytest.mark.pipeline
def test_dynamic_target_localizes_on_any_batch_shape() -> None:
    sample = varied_sample(tiny_config(weighted_pooling="learned"))
    found = first_divergent_op(TARGETS["iree-cpu-dyn"], sample, 2)  # batch 5, new index counts
    assert found.culprit == WEIGHTED_BUG, found


@pytest.mark.pipeline
def test_healthy_config_has_no_culprit_on_a_real_target() -> None:
    found = first_divergent_op(TARGETS["refbackend"], tiny_sample(tiny_config()), 0)
    assert found.culprit is None
    assert found.note == "no mismatch to localize: the target's own program matches"


@pytest.mark.pipeline
@pytest.mark.parametrize("target", ["refbackend", "iree-cpu-dyn"])
def test_healthy_qr_model_has_no_integer_false_alarm(target: str) -> None:
    # QR's quotient (a float division truncated to int64) and remainder are
    # exposed and judged exactly: a correct compiler must pass them all.
    found = first_divergent_op(TARGETS[target], tiny_sample(tiny_config(**QR)), 0)
    assert found.details["exact_intermediates"] >= 6, found  # 3 tables: cast, remainder, cast
    assert found.culprit is None and "harmless_divergence" not in found.details, found
    assert found.note == "no mismatch to localize: the target's own program matches"


@pytest.mark.pipeline
def test_vmvx_rounding_the_qr_quotient_is_blamed_on_the_cast() -> None:
    # IREE 3.13's vmvx rounds the QR quotient's float-to-int cast instead of
    # truncating it: (19 / 4).long() is 5 there, not 4, so the bag reads the
    # wrong row. Floats-only localization blamed the embedding_bag reading it.
    # (With index 19 in a 20-row table, row 5 does not exist: a RUNTIME_ERROR.)
    config = tiny_config(qr_flag=True, qr_threshold=5, ln_emb=(100,), ln_top=(5, 1))
    found = first_divergent_op(TARGETS["iree-vmvx"], _laid_out(config, [[0, 19, 19]]), 0)
    assert found.culprit == "aten.to.dtype", found
    assert found.details["reason"].endswith("got 5, expected 4"), found


@pytest.mark.pipeline
def test_real_import_failure_is_a_note() -> None:
    # int32 indices: torch-mlir 20261001 fails to lower embedding_bag at all
    # ('arith.select' type mismatch), so there is no program to instrument.
    config = tiny_config(weighted_pooling="fixed", index_dtype="int32")
    found = first_divergent_op(TARGETS["refbackend"], tiny_sample(config), 0)
    assert found.culprit is None and found.details["stage"] == "import", found

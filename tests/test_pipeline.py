"""The real pipeline on the CPU: torch.export -> torch-mlir -> IREE llvm-cpu
-> local-task, judged against eager PyTorch. No mocks: these run the pinned
toolchain, so the bug tests below document what it gets wrong today (if an
upgrade fixes one, the test fails and says so: that is news, not noise)."""

from __future__ import annotations

import pytest

from fuzz.config import DLRMConfig
from fuzz.execute import TargetResult, execute
from fuzz.targets import TARGETS
from oracles import Outcome, Verdict, judge
from tests.helpers import tiny_config, tiny_sample

pytestmark = pytest.mark.pipeline


def _outcome(config: DLRMConfig, batches: int = 2) -> tuple[Outcome, TargetResult]:
    sample = tiny_sample(config, batches=batches)
    reference = execute(TARGETS["eager-f64"], sample)
    eager = execute(TARGETS["eager"], sample)
    got = execute(TARGETS["iree-cpu"], sample)
    return judge(got, reference, eager), got


def test_plain_dlrm_matches_eager_and_compiles_once() -> None:
    outcome, result = _outcome(tiny_config(sigmoid_top=0, arch_interaction_itself=True, ln_top=(14, 1)))
    assert outcome.verdict is Verdict.PASS, outcome
    assert result.compiles == 1  # two batches of one shape, one artifact
    assert set(result.timings) >= {"export", "import", "compile", "run"}
    assert "func.func @main" in result.texts["linalg-on-tensors.mlir"]


def test_cat_interaction_and_qr_add_match_eager() -> None:
    config = tiny_config(arch_interaction_op="cat", ln_top=(16, 2), qr_flag=True,
                         qr_operation="add", qr_collisions=3, qr_threshold=15)
    outcome, _ = _outcome(config)
    assert outcome.verdict is Verdict.PASS, outcome


def test_known_bug_weighted_pooling_weights_are_dropped() -> None:
    """torch-mlir 20261001 lowers embedding_bag with per_sample_weights as if
    the weights were absent: a silent wrong answer."""
    outcome, _ = _outcome(tiny_config(weighted_pooling="fixed"))
    assert outcome.verdict is Verdict.MISMATCH
    assert outcome.numbers["max_abs_error"] > 1e-3


def test_known_bug_int32_indices_produce_invalid_ir() -> None:
    outcome, result = _outcome(tiny_config(index_dtype="int32"))
    assert outcome.verdict is Verdict.LOWERING_INVALID_IR
    assert outcome.op == "arith.select"
    assert outcome.stage == "import"
    assert "torch.aten._embedding_bag" in result.texts["import-input.mlir"]


def test_known_gap_quantized_tables_have_no_lowering() -> None:
    outcome, result = _outcome(tiny_config(quantize_bits=8))
    assert outcome.verdict is Verdict.LOWERING_UNSUPPORTED_OP
    assert outcome.op == "torch.quantized.embedding_bag_byte_rowwise_offsets"
    assert "import-input.mlir" in result.texts  # the program it choked on, for the report

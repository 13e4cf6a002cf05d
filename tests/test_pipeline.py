"""The real pipeline on the CPU: torch.export -> torch-mlir -> IREE llvm-cpu
-> local-task, judged against eager PyTorch. No mocks: these run the pinned
toolchain, so the bug tests below document what it gets wrong today (if an
upgrade fixes one, the test fails and says so: that is news, not noise)."""

from __future__ import annotations

import pytest

from fuzz.model.config import DLRMConfig
from fuzz.workers.execute import TargetResult, execute
from fuzz.targets.catalog import TARGETS
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


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_one_import_lowered_per_output_type_is_what_export_and_import_gives(dynamic: bool) -> None:
    """``lower`` imports once to Torch Backend IR and runs only the backend
    pipeline per output type: the text, or the failure and its message, must
    be exactly upstream's one-call ``fx.export_and_import`` (whose errors
    become bucket keys)."""
    from torch_mlir import fx

    from fuzz.targets import pipeline
    from fuzz.model.dlrm import build, dynamic_shapes, to_torch, tracing_example

    config = tiny_config(index_dtype="int32")  # int32 indices: linalg fails to verify
    plain = tiny_config()
    for cfg in (config, plain):
        sample = tiny_sample(cfg)
        args = to_torch(tracing_example(cfg) if dynamic else sample.batches[0].flat(), cfg)
        exported = pipeline.export(build(cfg, 0), args, dynamic_shapes(cfg) if dynamic else None)
        torch_ir, raw = pipeline.import_to_torch(exported, keep_raw=True)
        assert raw is not None and "torch.aten" in raw
        for output_type in ("torch", "linalg-on-tensors", "tosa", "stablehlo"):
            try:
                expected: str | None = str(fx.export_and_import(exported, output_type=output_type,
                                                                func_name="main"))
                error = None
            except Exception as exc:  # noqa: BLE001  (upstream's own error, compared below)
                expected, error = None, str(exc)
            try:
                got: str | None = pipeline.lower_torch(torch_ir, output_type, raw)
                failure = None
            except pipeline.StageFailure as exc:
                got, failure = None, exc
            assert got == expected, (cfg.index_dtype, output_type)
            if error is not None:
                assert failure is not None and error in failure.message and failure.program == raw


def test_targets_of_one_shape_mode_share_one_export_and_import(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through the artifact cache, the first output type of a sample pays
    export and import; the others of that shape mode run only their backend
    pipeline, and an export failure is shared the same way."""
    from fuzz.targets.cache import ArtifactCache
    from fuzz.targets.pipeline import StageFailure, Timer
    from fuzz.targets.catalog import CompiledTarget

    cache = ArtifactCache(tmp_path)
    sample = tiny_sample(tiny_config(weights="inputs"))
    timers = []
    for name in ("iree-cpu", "iree-tosa", "iree-stablehlo", "iree-torch"):
        target = TARGETS[name]
        assert isinstance(target, CompiledTarget)
        timers.append(Timer())
        try:
            target.lowered(sample.config, sample.seed, sample.batches[0].flat(), timers[-1], cache)
        except StageFailure as failure:
            assert failure.stage == "import" and name in ("iree-tosa", "iree-stablehlo")
            assert failure.program is not None and "torch.aten" in failure.program  # the raw import
    assert "export" in timers[0].seconds
    assert not any("export" in t.seconds for t in timers[1:])

"""The oracle: the tolerance rule, failure classification (unsupported op
versus invalid IR), and failure signatures that bucket one bug once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oracles import (Failure, Observation, Outcome, Stage, TargetResult, Tolerance, Verdict,
                     blame, blamed_op, bucket_for, classify, compare, first_error_line, judge,
                     error_key, normalize_error, signature_key)

INVALID_IR = ("""loc(callsite("/venv/torch/nn/modules/sparse.py":461:0 at "/work/x.py":14:0)): error: 'arith.select' op failed to verify that all of {true_value, false_value, result} have same type
Lowering Torch Backend IR -> Linalg-on-Tensors Backend IR failed with the following diagnostics:


python exception: Failure while executing pass pipeline""")
UNSUPPORTED = ("""loc("/work/p2.py":9:0): error: failed to legalize operation 'torch.operator' that was explicitly marked illegal: %4 = "torch.operator"(%0, %arg0, %arg1) <{name = "torch.quantized.embedding_bag_byte_rowwise_offsets"}> : (!torch.vtensor<[10,12],ui8>, !torch.vtensor<[3],si64>) -> !torch.vtensor<[2,4],f32>
python exception: Failure while executing pass pipeline""")


def test_compare_accepts_float32_reassociation(rng: np.random.Generator) -> None:
    terms = rng.standard_normal((4, 64))
    ref = terms.sum(axis=1)
    eager = terms.astype(np.float32).sum(axis=1, dtype=np.float32)
    reordered = terms[:, ::-1].astype(np.float32).sum(axis=1, dtype=np.float32)
    assert compare(ref, eager, reordered).ok


def test_compare_rejects_a_dropped_term() -> None:
    ref = np.array([[0.5], [0.25]])
    got = np.array([[0.5], [0.2501 + 0.01]], dtype=np.float32)
    result = compare(ref, ref.astype(np.float32), got)
    assert not result.ok
    assert result.numbers["first_bad_index"] == [1, 0]
    assert result.numbers["bad_elements"] == 1
    assert "got 0.2601" in result.reason


def test_compare_reports_its_margin_to_the_bound() -> None:
    """worst_error_to_bound: the worst judged element's error over its bound,
    below 1 on a pass, above 1 on a failure, 0 for an exact answer."""
    ref = np.array([1.0, 2.0])
    rule = Tolerance(rtol=1e-3, atol=0.0, slack=0.0)
    exact = compare(ref, ref.astype(np.float32), ref.astype(np.float32), rule)
    near = compare(ref, ref.astype(np.float32), np.array([1.0005, 2.0]), rule)
    off = compare(ref, ref.astype(np.float32), np.array([1.0, 2.006]), rule)
    assert exact.ok and exact.numbers["worst_error_to_bound"] == 0.0
    assert near.ok and near.numbers["worst_error_to_bound"] == pytest.approx(0.5)
    assert not off.ok and off.numbers["worst_error_to_bound"] == pytest.approx(3.0)


def test_compare_widens_bound_where_eager_itself_is_imprecise() -> None:
    ref = np.array([1.0])
    eager = np.array([1.0 + 1e-3], dtype=np.float32)  # float32 lost 1e-3 here (cancellation)
    assert compare(ref, eager, np.array([1.0 + 5e-3], dtype=np.float32)).ok
    assert not compare(ref, eager, np.array([1.0 + 2e-2], dtype=np.float32)).ok


def test_compare_nan_and_shape() -> None:
    ref = np.array([1.0, np.nan])
    assert compare(ref, ref.astype(np.float32), ref.astype(np.float32)).ok
    assert not compare(np.array([1.0]), np.array([1.0], np.float32), np.array([np.nan], np.float32)).ok
    bad = compare(np.zeros((2, 1)), np.zeros((2, 1), np.float32), np.zeros((1, 2), np.float32))
    assert not bad.ok and "shape" in bad.reason


def test_tolerance_values_are_documented_defaults() -> None:
    assert Tolerance() == Tolerance(atol=1e-5, rtol=1e-4, slack=8.0)


def test_first_error_line_skips_boilerplate() -> None:
    assert first_error_line(INVALID_IR).startswith("error: 'arith.select' op failed to verify")
    assert first_error_line("python exception: Failure\nsomething else") == "something else"


@pytest.mark.parametrize("message, verdict, op", [
    (INVALID_IR, Verdict.LOWERING_INVALID_IR, "arith.select"),
    (UNSUPPORTED, Verdict.LOWERING_UNSUPPORTED_OP, "torch.quantized.embedding_bag_byte_rowwise_offsets"),
    ("error: something odd happened", Verdict.LOWERING_ERROR, None),
])
def test_classify_import_failures(message: str, verdict: Verdict, op: str | None) -> None:
    got, line, blamed = classify(Failure("import", "TorchMlirCompilerError", message))
    assert (got, blamed) == (verdict, op)
    assert line.startswith("error:")


def test_classify_other_stages_and_deaths() -> None:
    assert classify(Failure("export", "UserError", "x"))[0] is Verdict.EXPORT_ERROR
    assert classify(Failure("compile", "CompilerToolError", "error: boom"))[0] is Verdict.COMPILE_ERROR
    assert classify(Failure("run", "RuntimeError", "x"))[0] is Verdict.RUNTIME_ERROR
    assert classify(Failure("compile", "SIGSEGV", "died", signal=11))[0] is Verdict.CRASH
    assert classify(Failure("compile", "MemoryError", "cap"))[0] is Verdict.CRASH
    assert classify(Failure("run", "Timeout", "slow", timed_out=True))[0] is Verdict.TIMEOUT


def test_blamed_op_forms() -> None:
    assert blamed_op("error: failed to legalize operation 'torch.aten.foo' that was") == "torch.aten.foo"
    assert blamed_op("error: 'linalg.generic' op expected") == "linalg.generic"
    assert blamed_op("no op here") is None


def test_normalize_error_removes_sample_accidents() -> None:
    a = normalize_error("loc(\"/a/b.py\":3:4): error: %12 = tensor<3x4xf32> bad [3, 4] at 0x7ff")
    b = normalize_error("loc(\"/c/d.py\":9:1): error: %7 = tensor<5x1xf32> bad [5, 1] at 0x1ab")
    assert a == b


def _lowering_outcome(message: str, target: str = "iree-cpu") -> Outcome:
    verdict, line, op = classify(Failure(Stage.IMPORT, "E", message))
    return Outcome(target, verdict, Stage.IMPORT, line, "", op)


def test_signature_same_bug_across_configs_different_across_ops() -> None:
    owner = "torch-mlir:linalg-on-tensors"
    key = signature_key(_lowering_outcome(INVALID_IR), owner)
    assert key == signature_key(_lowering_outcome(INVALID_IR.replace("461:0", "12:3")), owner)
    assert key != signature_key(_lowering_outcome(UNSUPPORTED), owner)
    assert key != signature_key(_lowering_outcome(INVALID_IR), "torch-mlir:tosa")
    assert bucket_for(Verdict.LOWERING_INVALID_IR, key).startswith("lowering_invalid_ir-")


def test_signature_of_mismatch_keys_on_owner_and_culprit() -> None:
    mismatch = Outcome("iree-cpu", Verdict.MISMATCH, Stage.RUN, "off")
    culprit = "op:aten.embedding_bag.padding_idx[per_sample_weights]"
    assert signature_key(mismatch, "torch-mlir:linalg-on-tensors", culprit) == \
        "MISMATCH|torch-mlir:linalg-on-tensors|" + culprit
    assert signature_key(mismatch, "iree:llvm-cpu", culprit) != \
        signature_key(mismatch, "torch-mlir:linalg-on-tensors", culprit)
    with pytest.raises(ValueError, match="culprit"):
        signature_key(mismatch, "iree:llvm-cpu")


LINALG = "torch-mlir:linalg-on-tensors"


def _mismatch(target: str, owner: str, culprit: str, cluster: int = 0,
              lowering: str = LINALG) -> Observation:
    return Observation(Outcome(target, Verdict.MISMATCH, Stage.RUN, "off"), owner, lowering,
                       culprit, cluster)


def test_blame_wrong_answer_on_two_backends_is_the_lowerings() -> None:
    culprit = "op:aten.embedding_bag.padding_idx[per_sample_weights]"
    blamed = blame([_mismatch("refbackend", "torch-mlir:refbackend", culprit),
                    _mismatch("iree-cpu", "iree:llvm-cpu", culprit),
                    _mismatch("iree-cpu-dyn", "iree:llvm-cpu", culprit),
                    _mismatch("iree-torch", "iree:llvm-cpu(torch input)", culprit)])
    assert {b.owner for b in blamed} == {LINALG}
    assert len({b.bucket for b in blamed}) == 1


def test_blame_wrong_answer_on_one_backend_is_that_backends() -> None:
    blamed = blame([_mismatch("iree-vulkan", "iree:vulkan-spirv", "op:aten.bmm.default"),
                    _mismatch("iree-vulkan-dyn", "iree:vulkan-spirv", "op:aten.bmm.default")])
    assert {b.owner for b in blamed} == {"iree:vulkan-spirv"}
    assert len({b.bucket for b in blamed}) == 1


def test_blame_never_merges_different_bugs() -> None:
    pooled = "op:aten.embedding_bag.padding_idx[per_sample_weights]"
    blamed = blame([
        _mismatch("refbackend", "torch-mlir:refbackend", pooled, cluster=0),
        _mismatch("iree-cpu", "iree:llvm-cpu", pooled, cluster=0),
        # other wrong numbers on Vulkan: another bug, even with the same culprit op
        _mismatch("iree-vulkan", "iree:vulkan-spirv", pooled, cluster=1),
        _mismatch("iree-vmvx", "iree:vmvx", "op:aten.bmm.default", cluster=2),
    ])
    assert [b.owner for b in blamed] == [LINALG, LINALG, "iree:vulkan-spirv", "iree:vmvx"]
    assert len({b.bucket for b in blamed}) == 3


def test_blame_torch_input_failing_like_the_lowering_is_the_lowering() -> None:
    lowering = Observation(_lowering_outcome(INVALID_IR), LINALG, LINALG)
    compile_error = Outcome("iree-torch", Verdict.COMPILE_ERROR, Stage.COMPILE,
                            first_error_line(INVALID_IR), "", "arith.select")
    same = Observation(compile_error, "iree:llvm-cpu(torch input)", LINALG)
    tosa = Observation(_lowering_outcome(UNSUPPORTED, "iree-tosa"), "torch-mlir:tosa",
                       "torch-mlir:tosa")
    first, second, third = blame([lowering, same, tosa])
    assert first.bucket == second.bucket and second.verdict is Verdict.LOWERING_INVALID_IR
    assert third.bucket != first.bucket
    alone = blame([same])[0]  # without the linalg targets it is IREE's compile error
    assert alone.owner == "iree:llvm-cpu(torch input)" and alone.verdict is Verdict.COMPILE_ERROR


def test_judge_reports_first_bad_batch() -> None:
    ref = TargetResult("eager-f64", [np.array([[0.5]]), np.array([[0.7]])])
    eager = TargetResult("eager", [np.array([[0.5]], np.float32), np.array([[0.7]], np.float32)])
    got = TargetResult("iree-cpu", [np.array([[0.5]], np.float32), np.array([[0.9]], np.float32)],
                       timings={"compile": 1.0})
    outcome = judge(got, ref, eager)
    assert outcome.verdict is Verdict.MISMATCH
    assert outcome.numbers["batch"] == 1
    assert outcome.timings == {"compile": 1.0}
    same = TargetResult("iree-cpu", [np.array([[0.5]], np.float32), np.array([[0.7]], np.float32)])
    assert judge(same, ref, eager).verdict is Verdict.PASS


def test_a_pass_carries_its_worst_margin_over_the_batches() -> None:
    ref = TargetResult("eager-f64", [np.array([[1.0]]), np.array([[2.0]])])
    eager = TargetResult("eager", [np.array([[1.0]], np.float32), np.array([[2.0]], np.float32)])
    near = TargetResult("iree-cpu", [np.array([[1.0]]), np.array([[2.0004]])])
    rule = Tolerance(rtol=1e-3, atol=0.0, slack=0.0)
    outcome = judge(near, ref, eager, rule)
    assert outcome.verdict is Verdict.PASS
    assert outcome.numbers["worst_error_to_bound"] == pytest.approx(0.2)  # batch 1: 4e-4 / 2e-3


def test_blame_failure_of_the_shared_torch_prefix_is_one_bug() -> None:
    quantized = UNSUPPORTED
    on = [("iree-cpu", LINALG), ("iree-torch", "torch-mlir:torch"), ("iree-tosa", "torch-mlir:tosa")]
    blamed = blame([Observation(_lowering_outcome(quantized, name), owner, owner)
                    for name, owner in on])
    assert {b.owner for b in blamed} == {"torch-mlir:torch"} and len({b.bucket for b in blamed}) == 1
    # The same text on TOSA and StableHLO alone (the torch prefix passed): two components.
    missing = ("error: failed to legalize operation 'torch.aten.embedding_bag.padding_idx' "
               "that was explicitly marked illegal")
    apart = blame([Observation(_lowering_outcome(missing, name), owner, owner) for name, owner in
                   [("iree-tosa", "torch-mlir:tosa"), ("iree-stablehlo", "torch-mlir:stablehlo")]])
    assert apart[0].bucket != apart[1].bucket


def test_keys_stored_under_version_3_upgrade_to_todays_buckets() -> None:
    """``upgrade_key`` turns a stored key into today's recipe: the same bucket
    a fresh run files the same fault in (``dlrm-fuzz corpus --rekey``)."""
    from oracles.signature import KEY_VERSION, upgrade_key

    line = "error: failed to legalize operation 'arith.truncf' that was explicitly marked illegal"
    for owner in ("iree:vmvx", "iree:compiler", "iree:llvm-cpu(torch input)"):
        old = f"COMPILE_ERROR|{owner}|arith.truncf|{line}"
        assert upgrade_key(old) == error_key(Verdict.COMPILE_ERROR, owner, "arith.truncf", line)
        assert upgrade_key(old).startswith("COMPILE_ERROR|iree|")
    kept = ["MISMATCH|iree:vulkan-spirv|op:aten.to.dtype",
            "LOWERING_UNSUPPORTED_OP|torch-mlir:tosa|torch.aten.gather|error: x"]
    assert [upgrade_key(k) for k in kept] == kept
    assert KEY_VERSION == 4


@pytest.mark.engine
def test_oracles_import_no_engine_module() -> None:
    """oracles/ is pure: judging never needs torch, the compilers or the engine."""
    import subprocess
    import sys

    code = ("import sys, oracles; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'fuzz', 'torch', 'torch_mlir', 'iree', 'strategies'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_blame_the_same_iree_compiler_crash_on_several_backends_is_the_shared_compilers() -> None:
    """Real: IREE 3.8.0's iree-compile dies with SIGFPE in Flow's
    summarizeDispatchRegion on llvm-cpu, vmvx and the torch input path alike
    (tests/data/messages/iree-3.8-flow-crash--*.txt): one bug of the compiler
    front, not three. On one backend alone it stays that backend's."""
    messages = Path(__file__).parent / "data" / "messages"
    on = [("iree-cpu", "iree:llvm-cpu", LINALG), ("iree-vmvx", "iree:vmvx", LINALG),
          ("iree-torch", "iree:llvm-cpu(torch input)", "torch-mlir:torch")]
    observations = []
    for target, owner, lowering in on:
        text = (messages / f"iree-3.8-flow-crash--{target}.txt").read_text()
        line = first_error_line(text)
        assert "crashed (SIGFPE) in mlir::iree_compiler::IREE::Flow::summarizeDispatchRegion" \
            in line
        observations.append(Observation(Outcome(target, Verdict.COMPILE_ERROR, Stage.COMPILE,
                                                line), owner, lowering))
    blamed = blame(observations)
    assert {b.owner for b in blamed} == {"iree:compiler"} and len({b.bucket for b in blamed}) == 1
    alone = blame(observations[1:2])[0]
    assert alone.owner == "iree:vmvx"
    # Blame names the owner less precisely alone, but the bucket does not move
    # with the set of targets that ran (a CI job on a subset replays the corpus).
    assert alone.bucket == blamed[0].bucket
    assert {b.bucket for b in blame(observations[::2])} == {blamed[0].bucket}
    # A different fault on two backends never joins it.
    other = Observation(Outcome("iree-vulkan", Verdict.COMPILE_ERROR, Stage.COMPILE,
                                "error: failed to legalize operation 'arith.foo'"),
                        "iree:vulkan-spirv", LINALG)
    assert blame([*observations, other])[-1].owner == "iree:vulkan-spirv"


def test_blame_the_same_runtime_crash_on_two_backends_is_the_runtimes() -> None:
    crash = [Observation(Outcome(t, Verdict.CRASH, Stage.RUN, "worker died (SIGSEGV) in stage run"),
                         owner, LINALG) for t, owner in (("iree-cpu", "iree:llvm-cpu"),
                                                         ("iree-vmvx", "iree:vmvx"))]
    assert {b.owner for b in blame(crash)} == {"iree:runtime"}


def test_a_reference_out_of_memory_is_no_ones_bug_and_says_so() -> None:
    """A float64 reference (or eager float32) refused memory by the worker's
    cap raises ReferenceFailed marked ``out_of_memory`` (the campaign skips
    the sample); any other reference failure is a bug of ours."""
    from fuzz.targets.pipeline import StageFailure, memory_stage
    from oracles import ReferenceFailed, judge

    def refuse() -> None:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: "
                           "can't allocate memory: you tried to allocate 268435456 bytes.")

    with pytest.raises(StageFailure) as caught:
        memory_stage("run", refuse)
    assert (caught.value.stage, caught.value.error_type) == (Stage.RUN, "MemoryError")
    with pytest.raises(ValueError):  # not an allocation: stays a bug of ours
        memory_stage("run", lambda: int("x"))
    got = TargetResult("iree-cpu", [np.array([[0.5]], np.float32)])
    eager = TargetResult("eager", [np.array([[0.5]], np.float32)])
    for error_type, oom in (("MemoryError", True), ("RuntimeError", False)):
        ref = TargetResult("eager-f64", [], failure=Failure(Stage.RUN, error_type, "no"))
        with pytest.raises(ReferenceFailed) as failed:
            judge(got, ref, eager)
        assert failed.value.out_of_memory is oom and "eager-f64 failed in run" in str(failed.value)


def test_eager_float32_out_of_memory_skips_the_sample_but_its_other_failures_are_findings() -> None:
    from fuzz.triage.findings import Triage
    from oracles import ReferenceFailed

    triage = Triage(None, Tolerance())  # type: ignore[arg-type]  # outcomes() runs no job
    ref = TargetResult("eager-f64", [np.array([[0.5]])])
    got = {"iree-cpu": TargetResult("iree-cpu", [np.array([[0.5]], np.float32)])}
    starved = TargetResult("eager", [], failure=Failure(Stage.BUILD, "MemoryError", "no"))
    with pytest.raises(ReferenceFailed) as failed:
        triage.outcomes(got, ref, starved)
    assert failed.value.out_of_memory
    broken = TargetResult("eager", [], failure=Failure(Stage.RUN, "RuntimeError", "bad kernel"))
    outcomes = triage.outcomes(got, ref, broken)
    assert outcomes["iree-cpu"].verdict is Verdict.PASS
    assert outcomes["eager"].verdict is not Verdict.PASS

"""The tolerance rule for reduced precision (``Tolerance.for_precision``):
derived from the dtype's unit roundoff and the sample's reduction length, it
accepts what rounding in that dtype does and still rejects a lowering bug."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuzz.model.config import DLRMConfig
from fuzz.regress.matrix import feature_sample
from oracles.compare import (UNIT_ROUNDOFF, Tolerance, compare, gamma, probabilistic_gamma)


def test_unit_roundoffs() -> None:
    assert UNIT_ROUNDOFF["float32"] == 2.0 ** -24 == np.finfo(np.float32).eps / 2
    assert UNIT_ROUNDOFF["float16"] == 2.0 ** -11 == np.finfo(np.float16).eps / 2
    assert UNIT_ROUNDOFF["bfloat16"] == 2.0 ** -8


def test_gamma_worst_case_and_probabilistic() -> None:
    u = 2.0 ** -11
    assert gamma(10, u) == pytest.approx(10 * u / (1 - 10 * u))
    assert gamma(2**11, u) == math.inf
    # lam sqrt(n) u to first order, far below n u for long sums
    assert probabilistic_gamma(100, u) == pytest.approx(math.expm1(6 * 10 * u + 100 * u * u / (1 - u)))
    assert 6 * 10 * u < probabilistic_gamma(100, u) < 1.02 * 6 * 10 * u
    assert probabilistic_gamma(10_000, u) < gamma(10_000, u) / 10


def test_for_precision_scales_with_dtype_and_length() -> None:
    base = Tolerance()
    f32, f16, bf16 = (base.for_precision(d, 100) for d in ("float32", "float16", "bfloat16"))
    assert (f32.atol, f32.rtol, f32.slack, f32.spread) == (base.atol, base.rtol, base.slack, 8.0)
    assert f32.scale < 1e-5 < f16.scale < bf16.scale < 1.0
    assert base.for_precision("float16", 400).scale > f16.scale
    assert base.for_precision("bfloat16", 10**6).scale == 1.0  # capped: gross errors only
    with pytest.raises(ValueError, match="dtype='int8'"):
        base.for_precision("int8", 3)
    with pytest.raises(ValueError, match="reduction_length=0"):
        base.for_precision("float16", 0)


def _half_sums(terms: np.ndarray, order: slice) -> np.ndarray:
    """Float16 row sums, sequential in ``order``, every partial sum rounded."""
    got = np.zeros(terms.shape[0], np.float16)
    for j in range(terms.shape[1])[order]:
        got = (got + terms[:, j].astype(np.float16)).astype(np.float16)
    return got.astype(np.float32)


def test_float16_reassociation_passes_only_with_the_float16_rule(rng: np.random.Generator) -> None:
    terms = rng.standard_normal((64, 48)).astype(np.float16).astype(np.float64)
    exact = terms.sum(axis=1)
    eager, compiled = _half_sums(terms, slice(None)), _half_sums(terms, slice(None, None, -1))
    rule = Tolerance().for_precision("float16", 48)
    assert compare(exact, eager, compiled, rule).ok
    wrong = compiled.copy()
    wrong[3] += 0.5 * (abs(exact).max() + abs(exact[3]))  # a dropped or doubled bag row
    assert not compare(exact, eager, wrong, rule).ok


def test_equal_infinities_and_eager_overflow() -> None:
    ref = np.array([np.inf, 1e6, 2.0])
    eager = np.array([np.inf, np.nan, 2.0], np.float32)  # float16 eager overflowed, then inf - inf
    got = np.array([np.inf, np.inf, 2.0], np.float32)
    assert compare(ref, eager, got).ok
    assert not compare(ref, eager, np.array([np.inf, np.inf, 3.0], np.float32)).ok


def test_reduction_length_counts_the_longest_path() -> None:
    sample = feature_sample("plain", 0)  # ln_bot (3, 4), ln_top (7, 1), width 4, bags <= 2
    assert sample.reduction_length() == 3 + 2 + 1 + 4 + 4 + 7 + 2 * 2 + 4
    assert isinstance(sample.config, DLRMConfig)


def test_measured_rounding_spread_widens_the_bound() -> None:
    # -90 from terms of 10^4 (the dot interaction of a float16 model): where
    # the reference measured that rounding moves this output by up to 20, an
    # error of 107 is float16's; with only the output's own scale to go by it
    # would be blamed. Far beyond the spread it is still a bug.
    ref, eager = np.array([[-90.24]]), np.array([[-90.25]], np.float32)
    got = np.array([[-197.1]], np.float32)
    rule = Tolerance().for_precision("float16", 1134)
    assert not compare(ref, eager, got, rule).ok
    assert compare(ref, eager, got, rule, rounding=np.array([[20.0]])).ok
    assert not compare(ref, eager, np.array([[-400.0]], np.float32), rule,
                       rounding=np.array([[20.0]])).ok


def test_infinite_spread_means_unjudged() -> None:
    # the reference's magnitudes pass float16's range: an overflow (NaN) is the dtype's
    ref, eager = np.array([[0.35, 1.9]]), np.array([[0.35, 1.9]], np.float32)
    got = np.array([[np.nan, 1.9]], np.float32)
    rule = Tolerance().for_precision("float16", 100)
    assert not compare(ref, eager, got, rule, rounding=np.array([[0.01, 0.01]])).ok
    assert compare(ref, eager, got, rule, rounding=np.array([[np.inf, 0.01]])).ok


def test_judge_takes_the_spread_from_the_reference() -> None:
    from oracles import TargetResult, Verdict, judge

    rule = Tolerance().for_precision("float16", 1134)
    ref = TargetResult("eager-f64", [np.array([[-90.24]])], roundings=[np.array([[20.0]])])
    eager = TargetResult("eager", [np.array([[-90.25]], np.float32)])
    got = TargetResult("iree-cpu", [np.array([[-197.1]], np.float32)])
    assert judge(got, ref, eager, rule).verdict is Verdict.PASS
    ref.roundings.clear()
    assert judge(got, ref, eager, rule).verdict is Verdict.MISMATCH


def test_reduced_precision_floors_ulps_and_flushed_subnormals() -> None:
    f16 = Tolerance().for_precision("float16", 10)
    assert f16.rtol == 8 * 2.0 ** -11 and f16.atol == 2.0 ** -14
    f32 = Tolerance().for_precision("float32", 10)
    assert (f32.atol, f32.rtol) == (1e-5, 1e-4)
    ref, eager = np.array([5.5e-6, 0.480959]), np.array([5.48e-6, 0.480959], np.float32)
    got = np.array([0.0, 0.481201], np.float32)  # flushed subnormal; one float16 ulp at 0.48
    assert compare(ref, eager, got, f16, rounding=np.zeros(2)).ok
    assert not compare(ref, eager, got, Tolerance(), rounding=np.zeros(2)).ok

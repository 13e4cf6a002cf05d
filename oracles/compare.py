"""Numeric comparison of a compiled output against eager PyTorch.

The rule: an element of the compiled float32 output ``got`` passes when

    |got - ref64| <= atol + rtol * |ref64| + slack * |eager32 - ref64|

where ``ref64`` is the model evaluated in float64 and ``eager32`` the same
model evaluated by eager PyTorch in float32. Why: a compiler may legitimately
reorder float32 sums and fuse multiply-adds, so it cannot be held to eager's
bits; but it must land as close to the true (float64) value as float32
arithmetic can. The first two terms allow the rounding any float32 evaluation
of these small networks makes (sums over at most a few hundred terms of
magnitude ~1: well under 1e-5 relative); the last term widens the bound where
eager float32 itself is far from the truth (cancellation), so that a compiler
is never blamed for the precision float32 cannot deliver. A lowering bug
(a dropped weight, a wrong bag boundary) moves outputs by ~1e-2 or more, far
outside this bound.

Reduced precision (``Tolerance.for_precision``). A model served in float16 or
bfloat16 is compiled in that dtype; eager PyTorch in the same dtype is then
the ``eager32`` above (the slack term keeps its meaning: where the dtype
itself cannot deliver, the compiler is not blamed), and the float64 reference
is the same model, its weights and inputs rounded to the dtype, computed
exactly. What a correct compiler may add is rounding: with unit roundoff ``u``
(float32 2**-24, float16 2**-11, bfloat16 2**-8), a sum or dot product of
``n`` terms in any order, with or without fused multiply-adds, is within
``gamma_n |terms|`` of the truth, ``gamma_n = n u / (1 - n u)`` (Higham,
*Accuracy and Stability of Numerical Algorithms*, 3.1). Through a network the
errors of successive reductions add to first order, so the output is within
``gamma_N M`` where ``N`` sums the reduction lengths along the longest path
(bottom-MLP fan-ins, the longest bag, the interaction's dot length, an MD
projection, top-MLP fan-ins, plus one rounding per stored intermediate;
``fuzz.sample.Sample.reduction_length``) and ``M`` is the output the network
gives with every weight and input replaced by its magnitude (running error
analysis; the float64 reference target computes it alongside its output,
``fuzz.model.output_magnitude``, and a cancellation, such as the dot
interaction's ``T T^T`` summing terms of 10^4 to -90, makes it far larger than
``|ref64|``). Worst-case ``gamma_N`` is hopeless for bfloat16 (``N u`` passes 1
at N = 256) and far from what happens: rounding errors of round-to-nearest
behave like independent zero-mean variables, and then ``|error| <=
gamma~_N(lam) M`` with ``gamma~_N(lam) = exp(lam sqrt(N) u + N u**2 / (1 - u))
- 1`` except with probability ``2 exp(-lam**2 (1 - u)**2 / 2)`` (Higham & Mary,
SIAM J. Sci. Comput. 41(5), 2019); ``lam = 6`` makes that 3e-8 per reduction.
So, added to the float32 rule, per element:

    bound += min(1, gamma~_N(lam)) * max(M, |ref64|)

(where no ``M`` came with the reference, ``|ref64| + max|ref64|`` over the
batch stands in). float32 gets the same term (it matters only for long
reductions of the medium shape class); the float32 constants above are unchanged. Where eager in the
dtype itself overflowed (inf, or NaN from inf - inf) while the exact value is
finite, the bound is infinite: the dtype cannot represent the answer there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Tolerance", "Comparison", "compare", "summarize", "UNIT_ROUNDOFF", "gamma",
           "probabilistic_gamma"]

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "float64": 2.0 ** -53}
LAMBDA = 6.0


def gamma(n: int, u: float) -> float:
    """Worst-case relative error of an n-term sum in unit roundoff ``u``."""
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def probabilistic_gamma(n: int, u: float, lam: float = LAMBDA) -> float:
    """Higham & Mary's probabilistic bound: holds except with probability
    ``2 exp(-lam**2 (1 - u)**2 / 2)``."""
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


@dataclass(frozen=True)
class Tolerance:
    atol: float = 1e-5
    rtol: float = 1e-4
    slack: float = 8.0
    # Rounding the compiled program may add in its dtype (module doc): a
    # multiple of the measured spread, or a-priori, relative to the output's
    # scale where no spread was measured (0: the plain float32 rule).
    spread: float = 8.0
    scale: float = 0.0

    def for_precision(self, dtype: str, reduction_length: int) -> "Tolerance":
        """This rule widened for a model computed in ``dtype`` whose longest
        chain of reductions has ``reduction_length`` terms (module doc)."""
        if dtype not in UNIT_ROUNDOFF:
            raise ValueError(f"dtype={dtype!r}: must be one of {sorted(UNIT_ROUNDOFF)}")
        if reduction_length < 1:
            raise ValueError(f"reduction_length={reduction_length}: must be >= 1")
        rel = min(1.0, probabilistic_gamma(reduction_length, UNIT_ROUNDOFF[dtype]))
        return dataclasses.replace(self, scale=max(self.scale, rel))


@dataclass(frozen=True)
class Comparison:
    ok: bool
    reason: str
    numbers: dict[str, Any]


def summarize(array: np.ndarray) -> str:
    """Shape, dtype and range: what a report shows instead of raw tensors."""
    if array.size == 0:
        return f"{array.dtype}{list(array.shape)} (empty)"
    finite = array[np.isfinite(array)] if np.issubdtype(array.dtype, np.floating) else array
    rng = f"min={finite.min():.6g} max={finite.max():.6g}" if finite.size else "no finite values"
    nonfinite = array.size - finite.size
    return f"{array.dtype}{list(array.shape)} {rng}" + (f" non-finite={nonfinite}" if nonfinite else "")


def compare(ref64: np.ndarray, eager32: np.ndarray, got: np.ndarray,
            tolerance: Tolerance = Tolerance(), rounding: np.ndarray | None = None) -> Comparison:
    """Judge ``got``; ``rounding`` is the reference's measured rounding spread
    (module doc), shaped like ``ref64``; without it the a-priori term applies."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is judged, not warned
        return _compare(ref64, eager32, got, tolerance, rounding)


def _compare(ref64: np.ndarray, eager32: np.ndarray, got: np.ndarray,
             tolerance: Tolerance, rounding: np.ndarray | None) -> Comparison:
    if got.shape != ref64.shape:
        return Comparison(False, f"shape {list(got.shape)} != expected {list(ref64.shape)}",
                          {"got": summarize(got), "expected": summarize(ref64)})
    ref = ref64.astype(np.float64)
    out = got.astype(np.float64)
    err = np.abs(out - ref)
    bound = tolerance.atol + tolerance.rtol * np.abs(ref) \
        + tolerance.slack * np.abs(eager32.astype(np.float64) - ref)
    if rounding is not None and rounding.shape == ref.shape:
        bound = bound + tolerance.spread * rounding.astype(np.float64)
    elif tolerance.scale:
        finite = np.abs(ref[np.isfinite(ref)])
        bound = bound + tolerance.scale * (np.abs(ref) + (float(finite.max()) if finite.size else 0.0))
    # Where eager in the model's own dtype overflowed to NaN (inf - inf) though
    # the exact value is finite, that dtype cannot deliver anything there.
    bound = np.where(np.isnan(eager32.astype(np.float64)) & ~np.isnan(ref), np.inf, bound)
    both_nan = np.isnan(out) & np.isnan(ref)
    same = out == ref  # equal infinities pass too (their difference is NaN)
    unjudged = np.isposinf(bound)  # the dtype's own overflow may be there (module doc)
    bad = ~both_nan & ~same & ~unjudged & ~(err <= bound)  # NaN on one side only is bad
    numbers: dict[str, Any] = {
        "max_abs_error": float(np.nanmax(err)) if err.size and not np.all(np.isnan(err)) else 0.0,
        "max_rel_error": float(np.nanmax(err / np.maximum(np.abs(ref), 1e-30))) if err.size
        and not np.all(np.isnan(err)) else 0.0,
        "eager_max_abs_error": float(np.nanmax(np.abs(eager32 - ref))) if ref.size else 0.0,
        "bad_elements": int(bad.sum()),
        "elements": int(bad.size),
        "got": summarize(got),
        "expected": summarize(ref64),
    }
    if not bad.any():
        return Comparison(True, "", numbers)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    numbers["first_bad_index"] = list(where)
    numbers["first_bad_got"] = float(out[where])
    numbers["first_bad_expected"] = float(ref[where])
    return Comparison(False, f"{numbers['bad_elements']}/{bad.size} elements off, first at "
                             f"{list(where)}: got {out[where]:.6g}, expected {ref[where]:.6g}",
                      numbers)

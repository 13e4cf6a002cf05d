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

Reduced precision. A model served in float16 or bfloat16 is compiled in that
dtype; eager PyTorch in the same dtype is then the ``eager32`` above, and the
float64 reference is the same model, its weights and inputs rounded to the
dtype, computed exactly. What a correct compiler may add is rounding, and in
a low-precision dtype the slack term cannot stand for it: eager's CPU kernels
accumulate float16 in float32, a compiler may accumulate in float16 (legal:
the program does not say), so eager can be exact where a compiler is not.

How much rounding is legitimate follows from the dtype's unit roundoff ``u``
(float32 2**-24, float16 2**-11, bfloat16 2**-8) and the reduction lengths: a
sum or dot product of ``n`` terms in any order, with or without fused
multiply-adds, equals the exact sum of its terms perturbed by at most
``gamma_n = n u / (1 - n u)`` each (Higham, *Accuracy and Stability of
Numerical Algorithms*, 3.1), and with round-to-nearest's errors behaving as
independent and zero-mean, by about ``sqrt(n) u`` (Higham & Mary, SIAM J. Sci.
Comput. 41(5), 2019). Two ways to turn that into a bound on an output:

- a priori, ``gamma~_N M``, ``N`` the reduction lengths summed along the
  longest path (``Sample.reduction_length``), ``M`` the output of the network
  run on magnitudes (``fuzz.model.rounding.output_magnitude``). Sound, but through a
  few layers of random weights and the dot interaction ``M`` reaches 10^3
  times ``|ref64|``: measured on a medium float16 DLRM, such a bound let the
  per-sample weights torch-mlir drops pass unnoticed. Useless.
- measured (what is used): the float64 reference target runs the model a few
  more times with every quantity a compiler rounds perturbed by that backward
  error (weights of an n-input layer by ``sqrt(n) u``, table rows by
  ``sqrt(L) u``, the interaction's operands by ``sqrt(d) u``, stored outputs by
  ``u``) and returns, per output, the largest deviation seen
  (``fuzz.model.rounding.rounding_spread``, Monte Carlo arithmetic). That follows the
  network's real amplification and cancellation (the dot interaction summing
  terms of 10^4 to -90). The bound adds ``spread`` (8) times it, the same
  margin the slack term gives eager's own error.

Elementwise ops and the final output are not reductions: each result is
stored in the dtype (half an ulp, ``u``) and a compiler may evaluate a
sigmoid's exp in the dtype within a few ulps, so the relative term becomes at
least 4 ulps, ``8 u`` (float16: 3.9e-3; float32 keeps its 1e-4). Subnormals:
a compiler may flush them to zero (IREE on the CPU turned a float16 output of
5.5e-6 into 0 where eager kept it), so the absolute term is at least the
dtype's smallest normal (float16: 6.1e-5).

Overflow: where the magnitude network passes the dtype's largest finite value
at any stage, a compiler summing in another order (or in the dtype where eager
sums in float32) may overflow to inf and NaN, which is that dtype's
arithmetic: such outputs are not judged (an infinite spread). Where eager in
the dtype itself overflowed to NaN while the exact value is finite, likewise.
Without a measured spread (a localization probe, a repro script), the a-priori
rule with the output's own scale stands in: ``Tolerance.for_precision`` adds
``min(1, gamma~_N(6)) * (|ref64| + max|ref64|)``.
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
# The smallest normal numbers: below them a compiler may flush to zero.
SMALLEST_NORMAL = {"float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126,
                   "float64": 2.0 ** -1022}
LAMBDA = 6.0
ULPS = 8  # 4 ulps (8 u) of the dtype relative, for stored outputs and elementwise ops


def gamma(n: int, u: float) -> float:
    """Worst-case relative error of an n-term sum in unit roundoff ``u``."""
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def probabilistic_gamma(n: int, u: float, lam: float = LAMBDA) -> float:
    """Higham & Mary's probabilistic bound: holds except with probability
    ``2 exp(-lam**2 (1 - u)**2 / 2)``."""
    return math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))


@dataclass(frozen=True)
class Tolerance:
    """How far a target's output may stray from the float64 reference and still pass."""
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
        u = UNIT_ROUNDOFF[dtype]
        rel = min(1.0, probabilistic_gamma(reduction_length, u))
        # Every output is stored in the dtype, after elementwise ops that a
        # compiler may evaluate to within a few ulps (a sigmoid's exp): 4 u.
        return dataclasses.replace(self, atol=max(self.atol, SMALLEST_NORMAL[dtype]),
                                   rtol=max(self.rtol, ULPS * u), scale=max(self.scale, rel))


@dataclass(frozen=True)
class Comparison:
    """One output checked against the reference: pass or not, why, and the numbers shown."""
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
        # The margin: how close the worst judged element came to its bound
        # (a false-alarm sweep reads it; 1.0 would be a failure).
        "worst_error_to_bound": _worst_ratio(err, bound, ~both_nan & ~same & ~unjudged),
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


def _worst_ratio(err: np.ndarray, bound: np.ndarray, judged: np.ndarray) -> float:
    """max(err / bound) over the judged elements (inf where an error meets a zero bound)."""
    if not judged.any():
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err[judged] == 0, 0.0, err[judged] / bound[judged])
    ratio = np.where(np.isnan(ratio), np.inf, ratio)  # NaN on one side only
    return float(ratio.max())

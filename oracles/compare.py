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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Tolerance", "Comparison", "compare", "summarize"]


@dataclass(frozen=True)
class Tolerance:
    atol: float = 1e-5
    rtol: float = 1e-4
    slack: float = 8.0


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
            tolerance: Tolerance = Tolerance()) -> Comparison:
    if got.shape != ref64.shape:
        return Comparison(False, f"shape {list(got.shape)} != expected {list(ref64.shape)}",
                          {"got": summarize(got), "expected": summarize(ref64)})
    ref = ref64.astype(np.float64)
    out = got.astype(np.float64)
    err = np.abs(out - ref)
    bound = tolerance.atol + tolerance.rtol * np.abs(ref) \
        + tolerance.slack * np.abs(eager32.astype(np.float64) - ref)
    both_nan = np.isnan(out) & np.isnan(ref)
    bad = ~both_nan & ~(err <= bound)  # NaN in only one side counts as bad
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

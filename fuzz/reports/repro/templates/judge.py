#| Part of the model and road forms (markers: ../template.py): one batch's
#| answer judged against the float64 twin with the oracle's rule (the
#| eager float32 slack, and for low precision the scaled term); prints the
#| batch's count and returns 1 when any element is off. Sections: scaled /
#| unscaled.
from typing import Any  # @stub
import numpy as np  # @stub
import torch  # @stub
model: Any = None  # @stub
Model: Any = None  # @stub
LEAD: list[Any] = []  # @stub
def twin_mode(on: bool) -> None: '''The twin's float64 switch.'''  # @stub
# @if: scaled
SCALE = 0.0  # the low-precision tolerance term's scale (oracles.compare)  @value: scale
# @end: scaled
twin = Model().double().eval()
def judged(b, got, inputs):
    '''1 when batch b's answer is off tolerance around the float64 twin, else 0.'''
    with torch.no_grad():
        e32 = model(*map(torch.from_numpy, [*LEAD, *inputs])).numpy().astype(np.float64)
        twin_mode(True)
        ref = twin(*(torch.from_numpy(a).double() if a.dtype.kind == 'f' else torch.from_numpy(a) for a in [*LEAD, *inputs])).numpy()
        twin_mode(False)
    # @if: scaled
    off = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref) + SCALE * (np.abs(ref) + np.abs(ref).max())) if got.shape == ref.shape else np.ones(1, bool)
    # @end: scaled
    # @if: unscaled
    off = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref)) if got.shape == ref.shape else np.ones(1, bool)
    # @end: unscaled
    print(f'batch {b}: {off.sum()}/{off.size} elements off tolerance; '
          f'got {got.shape}, ref64 {ref.shape}')
    return int(off.any())

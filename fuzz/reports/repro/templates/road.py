#| The road form (markers: ../template.py), for the targets of the other roads
#| into IREE (README "Roads into IREE"): the shrunk DLRM as plain PyTorch (the
#| model form's part, model_program.py), then the road's own packages only
#| (road_stages.py: onnx_iree, onnxruntime or turbine). A failure exits 1 at
#| its stage, a wrong answer is judged per batch against a float64 twin.
#| Sections: supervised's (crash / hang); model_program's; road_stages'; judges,
#| stops_after_import, stops_after_compile, fails; scaled.
"""Repro: the shrunk DLRM on the road ${road_words}.
${signature}
Exit 1: bug present (prints the signature); 0: fixed; 2: cannot run."""
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
STAGE: str | None = None  # the stage that fails (None: a wrong answer)  @value: stage
FAULT: list[str] = []  # the fault's words, in order  @value: fault
from .supervised import *  # @include
from .model_program import *  # @include
# @if: static
spec = None
# @end: static
# @if: dynamic
spec = (*[None] * len(LEAD), *spec)
# @end: dynamic
from .road_stages import call  # @include
# @if: judges
from .judge import judged  # @include
bad: int = 0  # batches off tolerance
for b, inputs in enumerate(BATCHES):
    bad += judged(b, np.asarray(attempt('run', lambda: call(inputs))).astype(np.float64), inputs)
if bad:
    print('signature:', SIGNATURE)
# @end: judges
from .ending import *  # @include

#| The one-op road form (markers: ../template.py), for an error of a road into
#| IREE (README "Roads into IREE"): one op of the DLRM as the road exported it,
#| a module `Op` fed the arguments it got on batch 0, through the road's own
#| packages only (road_stages.py: onnx_iree, onnxruntime or turbine). Exit 1
#| while the stage fails with the fault, 0 once every stage passes. Sections:
#| the prelude's; static / dynamic (the target's shape mode); vulkan, read_back;
#| road_stages'; stops_after_import, stops_after_compile, fails_at_run, fails.
"""Repro: ${op_name} alone on the road ${road_words}, failing as the DLRM did.
${signature}
Exit 1: bug present (prints the signature); 0: fixed; 2: cannot run."""
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
STAGE: str | None = None  # the stage that fails  @value: stage
FAULT: list[str] = []  # the fault's words, in order  @value: fault
ARGS: list[np.ndarray] = []  # @code: data
# @if: vulkan
DEVICE_TARGETS = ''  # @value: device_targets
# @if: read_back

from .vulkan_host import host  # @include
# @end: read_back
# @end: vulkan

class Op(torch.nn.Module): '''The op, its float dtypes read through the float64 twin's _f.'''  # @code: op_class

from .attempt import attempt  # @include

model = Op()
LEAD: list[np.ndarray] = []  # the op takes its operands only
BATCHES = [ARGS]
example = tuple(torch.from_numpy(a) for a in ARGS)
# @if: static
spec = None
# @end: static
# @if: dynamic
spec = [{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS]
# @end: dynamic
from .road_stages import call  # @include
from .ending import *  # @include

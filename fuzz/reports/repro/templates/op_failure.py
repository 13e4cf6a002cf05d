#| The one-op failure forms (markers: ../template.py): the export form of an
#| EXPORT_ERROR (torch.export of one op fails with the stored key; torch and
#| numpy only), the lowering form of a torch-mlir lowering failure naming a
#| torch op (section lower: that op lowered to the target's output type; no
#| IREE) and the backend form of an IREE compile failure (sections lower and
#| iree: that op compiled with the target's backend and flags, for a Vulkan
#| device with its description). Exit 1 while the stage fails with the fault,
#| 0 once it passes. Sections: the prelude's, static / dynamic (the target's
#| shape mode), lower, iree, vulkan.
"""Repro: ${title} (${shapes} shapes, as ${target} exports).
${signature}
Exit 1: bug present (prints the signature); 0: fixed (${passed}); 2: cannot run."""
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
STAGE = ''  # the stage that fails  @value: stage
FAULT: list[str] = []  # the fault's words, in order  @value: fault
# @if: lower
OUTPUT_TYPE = ''  # torch-mlir's output, as the target lowers  @value: output_type
# @end: lower
# @if: iree
BACKEND = ''  # @value: backend
FLAGS: list[str] = []  # the target's compile flags  @value: flags
# @end: iree
# @if: vulkan
DEVICE_TARGETS = ''  # the Vulkan device's description, as compiled  @value: device_targets
# @end: vulkan
ARGS: list[np.ndarray] = []  # @code: data

class Op(torch.nn.Module): '''The op, its float dtypes read through the float64 twin's _f.'''  # @code: op_class

from .attempt import attempt  # @include

tensors = tuple(torch.from_numpy(a) for a in ARGS)
# @if: static
ep = attempt('export', lambda: torch.export.export(Op(), tensors))
# @end: static
# @if: dynamic
ep = attempt('export', lambda: torch.export.export(Op(), tensors, dynamic_shapes=[{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS]))
# @end: dynamic
# @if: lower
mlir = attempt('import', lambda: str(fx.export_and_import(ep, output_type=OUTPUT_TYPE, func_name='main')))
# @end: lower
# @if: vulkan
from .vulkan_device import *  # @include
# @end: vulkan
# @if: iree
attempt('compile', lambda: ireec.compile_str(mlir, target_backends=[BACKEND], extra_args=FLAGS))
# @end: iree
print('${passed}: fixed')
sys.exit(0)

#| The model form (markers: ../template.py): the shrunk DLRM written out as
#| plain PyTorch from its exported ATen graph (weights in params.npz,
#| program-input weights in weights.npz), exported, lowered, compiled and run
#| with the target's own flags; a failure exits 1 at its stage, a wrong answer
#| is judged per batch against a float64 twin. Sections: the prelude's;
#| supervised's crash / hang (a child runs the stages); weights_inputs /
#| weights_inline; plain_batches / laid_out (the inputs' layout); vulkan,
#| read_back (a result comes back from the device), to_host (another IREE
#| device); static / dynamic_lists / dynamic_general with stacked / fixed /
#| lists (how the target exported); compiles, runs, fails_at_run, judges (how
#| far the script goes), stops_after_import, stops_after_compile, fails (its end);
#| bf16 (state stored as float32), scaled (a low-precision tolerance term).
"""Repro: the shrunk DLRM as plain PyTorch (torch.export -> torch-mlir ${output_type}${backend_words}).
${signature}
Exit 1: bug present (prints the signature); 0: fixed; 2: cannot run."""
from typing import Any  # @stub
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
STAGE: str | None = None  # the stage that fails (None: a wrong answer)  @value: stage
FAULT: list[str] = []  # the fault's words, in order  @value: fault
OUTPUT_TYPE = ''  # torch-mlir's output, as the target lowers  @value: output_type
# @if: iree
BACKEND = ''  # @value: backend
FLAGS: list[str] = []  # the target's compile flags  @value: flags
DRIVER = ''  # @value: driver
# @end: iree
from .supervised import *  # @include
from .model_program import *  # @include
# @if: static
ep = attempt('export', lambda: torch.export.export(model, example))
# @end: static
# @if: dynamic
spec = (*[None] * len(LEAD), *spec)
ep = attempt('export', lambda: torch.export.export(model, example, dynamic_shapes=spec))
# @end: dynamic
mlir = attempt('import', lambda: str(fx.export_and_import(ep, output_type=OUTPUT_TYPE, func_name='main')))
# @if: compiles
# @if: refbackend
ctx = attempt('compile', lambda: RefBackendModule(mlir))  # compiling builds the callable: nothing to load
# @end: refbackend
# @if: vulkan
from .vulkan_device import *  # @include
# @end: vulkan
# @if: iree
vmfb = attempt('compile', lambda: ireec.compile_str(mlir, target_backends=[BACKEND], extra_args=FLAGS))
# @end: iree
# @if: runs
# @if: iree
from .iree_load import ctx  # @include
# @end: iree
# @if: static
BATCHES = [b for b in BATCHES if [a.shape for a in b] == [a.shape for a in BATCHES[0]]]
# @end: static
# @if: fails_at_run
for inputs in BATCHES:
    # @if: iree
    attempt('run', lambda: ctx.modules.module['main'](*LEAD, *inputs))
    # @end: iree
    # @if: refbackend
    attempt('run', lambda: ctx([*LEAD, *inputs])[0])
    # @end: refbackend
# @end: fails_at_run
# @if: judges
from .judge import judged  # @include
bad: int = 0  # batches off tolerance
for b, inputs in enumerate(BATCHES):
    # @if: to_host
    got = np.asarray(attempt('run', lambda: ctx.modules.module['main'](*LEAD, *inputs)).to_host()).astype(np.float64)
    # @end: to_host
    # @if: vulkan
    got = host(attempt('run', lambda: ctx.modules.module['main'](*LEAD, *inputs))).astype(np.float64)
    # @end: vulkan
    # @if: refbackend
    got = np.asarray(attempt('run', lambda: ctx([*LEAD, *inputs])[0])).astype(np.float64)
    # @end: refbackend
    bad += judged(b, got, inputs)
if bad:
    print('signature:', SIGNATURE)
# @end: judges
# @end: runs
# @end: compiles
from .ending import *  # @include

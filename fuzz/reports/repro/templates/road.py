#| The road form (markers: ../template.py), for the targets of the other roads
#| into IREE (README "Roads into IREE"): the shrunk DLRM as plain PyTorch (the
#| model form's part, model_program.py), then the road's own packages only:
#| onnx_iree (torch.onnx.export -> model.onnx -> iree-import-onnx ->
#| iree-compile -> IREE runtime), onnxruntime (the same model.onnx on
#| onnxruntime) or turbine (iree.turbine.aot.export -> iree-compile). A failure
#| exits 1 at its stage, a wrong answer is judged per batch against a float64
#| twin. iree-compile runs torch-mlir's ONNX conversions: an onnx.* op it
#| cannot convert is the fuzzer's import failure (COMPILE_STAGE names it so).
#| Sections: supervised's (crash / hang); model_program's; onnx_iree / onnxruntime / turbine; compiles, runs,
#| fails_at_run, judges, stops_after_import, stops_after_compile, fails; scaled.
"""Repro: the shrunk DLRM on the road ${road_words}.
${signature}
Exit 1: bug present (prints the signature); 0: fixed; 2: cannot run."""
from typing import Any  # @stub
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
STAGE: str | None = None  # the stage that fails (None: a wrong answer)  @value: stage
FAULT: list[str] = []  # the fault's words, in order  @value: fault
# @if: iree
BACKEND = ''  # @value: backend
FLAGS: list[str] = []  # the target's compile flags  @value: flags
DRIVER = ''  # @value: driver
COMPILE_STAGE = 'compile'  # the stage iree-compile's failure is filed under  @value: compile_stage
# @end: iree
from .supervised import *  # @include
from .model_program import *  # @include
# @if: static
spec = None
# @end: static
# @if: dynamic
spec = (*[None] * len(LEAD), *spec)
# @end: dynamic
# @if: onnx
# torch.onnx.export(..., dynamo=True), as the fuzzer exported: model.onnx.
# The commands beside this script (commands.sh) run the same file through
# iree-import-onnx, iree-compile and iree-run-module.
program = attempt('export', lambda: torch.onnx.export(model, example, dynamo=True, dynamic_shapes=spec, verbose=False))
program.save('model.onnx')
# @end: onnx
# @if: onnx_iree
from iree.compiler.tools.import_onnx.__main__ import main as import_onnx, parse_arguments
attempt('import', lambda: import_onnx(parse_arguments(['model.onnx', '-o', 'model.mlir'])))
with open('model.mlir') as f:
    mlir = f.read()
ENTRY = 'main_graph'  # the exporter names the graph, so the function
# @end: onnx_iree
# @if: turbine
from iree.turbine import aot
IMPORT_STAGE = 'import'  # turbine's torch.export call fails as export, the rest as import  @value: import_stage
mlir = attempt(IMPORT_STAGE, lambda: str(aot.export(model, args=example, dynamic_shapes=spec).mlir_module))
ENTRY = 'main'
# @end: turbine
# @if: compiles
# @if: vulkan
if DEVICE_TARGETS:  # compile for this Vulkan device's description
    head = 'module attributes {' + DEVICE_TARGETS
    mlir = mlir.replace('module attributes {', head + ', ', 1) if 'module attributes {' in mlir else mlir.replace('module {', head + '} {', 1)
# @end: vulkan
# @if: iree
vmfb = attempt(COMPILE_STAGE, lambda: ireec.compile_str(mlir, target_backends=[BACKEND], extra_args=FLAGS))
# @end: iree
# @if: onnxruntime
import onnxruntime as ort
session = attempt('compile', lambda: ort.InferenceSession('model.onnx', providers=['CPUExecutionProvider']))
NAMES = [i.name for i in session.get_inputs()]
# @end: onnxruntime
# @if: runs
# @if: iree
from .iree_load import ctx  # @include
# @end: iree
def call(inputs):
    '''The compiled program (or onnxruntime's session) on one batch.'''
    # @if: to_host
    return np.asarray(ctx.modules.module[ENTRY](*LEAD, *inputs).to_host())
    # @end: to_host
    # @if: vulkan
    return host(ctx.modules.module[ENTRY](*LEAD, *inputs))
    # @end: vulkan
    # @if: onnxruntime
    return session.run(None, dict(zip(NAMES, [*LEAD, *inputs])))[0]
    # @end: onnxruntime
# @if: static
BATCHES = [b for b in BATCHES if [a.shape for a in b] == [a.shape for a in BATCHES[0]]]
# @end: static
# @if: fails_at_run
for inputs in BATCHES:
    attempt('run', lambda: call(inputs))
# @end: fails_at_run
# @if: judges
from .judge import judged  # @include
bad: int = 0  # batches off tolerance
for b, inputs in enumerate(BATCHES):
    bad += judged(b, np.asarray(attempt('run', lambda: call(inputs))).astype(np.float64), inputs)
if bad:
    print('signature:', SIGNATURE)
# @end: judges
# @end: runs
# @end: compiles
from .ending import *  # @include

#| Part of the road forms (road.py, road_op.py; markers: ../template.py): the
#| road's own packages on `model`, `example` and `spec`: onnx_iree
#| (torch.onnx.export -> model.onnx -> iree-import-onnx -> iree-compile -> IREE
#| runtime), onnxruntime (the same model.onnx on onnxruntime) or turbine
#| (iree.turbine.aot.export -> iree-compile), then `call` on a batch; with
#| fails_at_run every batch runs. iree-compile runs torch-mlir's ONNX
#| conversions: an onnx.* op it cannot convert is the fuzzer's import failure,
#| and a file onnxruntime refuses as invalid the exporter's (COMPILE_STAGE
#| names the stage either is filed under). Sections: onnx, onnx_iree,
#| onnxruntime, turbine; iree, vulkan, to_host, static; compiles, runs,
#| fails_at_run.
from typing import Any  # @stub
import numpy as np  # @stub
import torch  # @stub
import iree.compiler as ireec  # @stub
model: Any = None  # @stub
example: Any = None  # @stub
spec: Any = None  # @stub
LEAD: list[Any] = []  # @stub
BATCHES: list[Any] = []  # @stub
DEVICE_TARGETS = ''  # @stub
def attempt(stage: str, fn: Any) -> Any: '''The stage boundary.'''  # @stub
def host(value: Any) -> Any: '''A Vulkan result read back.'''  # @stub
# @if: iree
BACKEND = ''  # @value: backend
FLAGS: list[str] = []  # the target's compile flags  @value: flags
DRIVER = ''  # @value: driver
# @end: iree
COMPILE_STAGE = 'compile'  # the stage the compile's failure is filed under  @value: compile_stage
# @if: onnx
# torch.onnx.export(..., dynamo=True), as the fuzzer exported: model.onnx.
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
with open('model.onnx', 'rb') as saved:  # from its bytes, as the fuzzer loads it (the error text names no file)
    onnx_bytes = saved.read()
session = attempt(COMPILE_STAGE, lambda: ort.InferenceSession(onnx_bytes, providers=['CPUExecutionProvider']))
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
# @end: runs
# @end: compiles

#| Part of the model and road forms (markers: ../template.py): the shrunk DLRM
#| as plain PyTorch from its exported ATen graph (weights in params.npz,
#| program-input weights in weights.npz), its batches laid out as the model
#| takes them, and the example and dynamic-shape spec it is exported with.
#| Sections: the model form's (weights_inputs / weights_inline, plain_batches /
#| laid_out, vulkan / read_back, bf16, static / dynamic_lists / dynamic_general
#| with stacked / fixed / lists).
from typing import Any  # @stub
import numpy as np  # @stub
import torch  # @stub
STAGE: str | None = None  # @stub
SIGNATURE = ''  # @stub
FAULT: list[str] = []  # @stub
P = np.load('params.npz', allow_pickle=False)
X = np.load('inputs.npz', allow_pickle=False)
W: Any  # @stub
# @if: weights_inputs
W = np.load('weights.npz', allow_pickle=False)
LEAD = [W[f'w{i}'] for i in range(len(W.files))]  # the weights are program inputs
# @end: weights_inputs
# @if: weights_inline
LEAD = []  # the weights are constants inside the program
# @end: weights_inline
T = 0  # tables  @value: tables
# @if: plain_batches
BATCHES = [[X[f'b{b}_dense'], *(X[f'b{b}_offsets{k}'] for k in range(T)), *(X[f'b{b}_indices{k}'] for k in range(T))] for b in range(len(X.files) // (1 + 2 * T))]
# @end: plain_batches
# @if: laid_out
W = False  # per-sample weights  @value: bag_weights
LAST = False  # offsets end with the index count  @value: last_offset
LAYOUT = ''  # @value: layout
def laid_out(b):
    '''Batch b of inputs.npz (per-table arrays) laid out as the model takes it.'''
    d = X[f'b{b}_dense']
    idx = [X[f'b{b}_indices{k}'] for k in range(T)]
    off = [np.append(X[f'b{b}_offsets{k}'], len(i)).astype(i.dtype) if LAST else X[f'b{b}_offsets{k}'] for k, i in enumerate(idx)]
    w = [X[f'b{b}_weights{k}'] for k in range(T)] if W else []
    if LAYOUT == 'stacked':
        return [d, np.stack(off), np.stack(idx), *([np.stack(w)] if W else [])]
    if LAYOUT == 'fixed':
        return [d, *(i.reshape(len(d), -1) for i in idx), *(x.reshape(len(d), -1) for x in w)]
    return [d, *off, *idx, *w]
BATCHES = [laid_out(b) for b in range(len(X.files) // (1 + (3 if W else 2) * T))]
# @end: laid_out
# @if: vulkan
DEVICE_TARGETS = ''  # @value: device_targets
# @if: read_back

from .vulkan_host import host  # @include
# @end: read_back
# @end: vulkan
# @if: bf16
BF16: list[str] = []  # state stored as float32, bfloat16 in the model  @value: bf16_names
# @end: bf16

def dlrm(*args: Any) -> Any: '''The exported graph, its float dtypes read through the twin's _f.'''  # @code: graph
def twin_mode(on: bool) -> None: '''The twin's float64, named dtypes and default alike.'''  # @stub

class Model(torch.nn.Module):
    '''The graph with its state as parameters and buffers.'''
    def __init__(self):
        super().__init__()
        for name in P.files:  # parameters stay parameters: torch-mlir imports them otherwise
            tensor = torch.from_numpy(P[name])
            # @if: bf16
            tensor = tensor.to(torch.bfloat16) if name in BF16 else tensor
            # @end: bf16
            if name.startswith('p_'):
                self.register_parameter(name, torch.nn.Parameter(tensor))
            else:
                self.register_buffer(name, tensor)

    def forward(self, *inputs): '''The graph on the state, then the inputs.'''  # @code: forward

from .attempt import attempt  # @include

model = Model().eval()
example: Any  # @stub
spec: Any  # @stub
# @if: static
example = tuple(map(torch.from_numpy, BATCHES[0]))
# @end: static
# @if: dynamic_lists
IDX = ''  # @value: index_dtype
DENSE = 0  # dense features  @value: num_dense
example = (torch.zeros(2, DENSE), *[torch.from_numpy(np.array([0, 1], IDX))] * T, *[torch.from_numpy(np.zeros(2, IDX))] * T)
batch = torch.export.Dim('batch', min=1, max=2**20)
spec = ({0: batch}, *[{0: batch}] * T, *({0: torch.export.Dim(f'indices_{k}', min=0, max=2**24)} for k in range(T)))
# @end: dynamic_lists
# @if: dynamic_general
TRACE: list[np.ndarray] = []  # @code: trace
example = tuple(map(torch.from_numpy, TRACE))
Dim = torch.export.Dim
batch = Dim('batch', min=1, max=2**20)
OFF = batch + 1 if LAST else batch
# @if: stacked
count = Dim('indices', min=0, max=2**24)
spec = ({0: batch}, {1: OFF}, {1: count}, *([{1: count}] if W else []))
# @end: stacked
# @if: fixed
lengths = [Dim(f'bag_{k}', min=1, max=2**16) for k in range(T)]
spec = ({0: batch}, *({0: batch, 1: n} for n in lengths), *(({0: batch, 1: n} for n in lengths) if W else ()))
# @end: fixed
# @if: lists
counts = [Dim(f'indices_{k}', min=0, max=2**24) for k in range(T)]
spec = ({0: batch}, *({0: OFF} for _ in counts), *({0: c} for c in counts), *(({0: c} for c in counts) if W else ()))
# @end: lists
# @end: dynamic_general
example = (*map(torch.from_numpy, LEAD), *example)

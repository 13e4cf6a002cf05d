#| The model form (markers: ../template.py): the shrunk DLRM written out as
#| plain PyTorch from its exported ATen graph (weights in params.npz,
#| program-input weights in weights.npz), exported, lowered, compiled and run
#| with the target's own flags; a failure exits 1 at its stage, a wrong answer
#| is judged per batch against a float64 twin. Sections: the prelude's;
#| crash / hang (a child runs the stages, supervised); weights_inputs /
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
# @if: crash
CRASH = 0  # the signal the toolchain dies of  @value: crash_signal
# @end: crash
# @if: hang
HANG = 0.0  # seconds the fuzzer waited before calling it a hang  @value: hang_s
# @end: hang
# @if: supervised
if os.environ.get('REPRO_CHILD') != '1':  # the stages run in a child: the bug takes it down
    import subprocess
    # @if: crash
    child = subprocess.run([sys.executable, *sys.orig_argv[1:]], env={**os.environ, 'REPRO_CHILD': '1'})
    if child.returncode == -CRASH:
        print(f'{STAGE} crashed: signal {CRASH}')
        print('signature:', SIGNATURE)
        sys.exit(1)
    # @end: crash
    # @if: hang
    try:
        child = subprocess.run([sys.executable, *sys.orig_argv[1:]], env={**os.environ, 'REPRO_CHILD': '1'}, timeout=HANG)
    except subprocess.TimeoutExpired:
        print(f'{STAGE} hung: no answer within {HANG:g} s')
        print('signature:', SIGNATURE)
        sys.exit(1)
    # @end: hang
    sys.exit(child.returncode if child.returncode in (0, 2) else 2)
# @end: supervised
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
if DEVICE_TARGETS:  # compile for this Vulkan device's description
    head = 'module attributes {' + DEVICE_TARGETS
    mlir = mlir.replace('module attributes {', head + ', ', 1) if 'module attributes {' in mlir else mlir.replace('module {', head + '} {', 1)
# @end: vulkan
# @if: iree
vmfb = attempt('compile', lambda: ireec.compile_str(mlir, target_backends=[BACKEND], extra_args=FLAGS))
# @end: iree
# @if: runs
# @if: iree
try:
    ctx = rt.SystemContext(config=rt.Config(DRIVER))
except Exception as exc:
    print(f'cannot run: no usable {DRIVER} device: {exc}')
    sys.exit(2)
attempt('run', lambda: ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb)))
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
# @if: scaled
SCALE = 0.0  # the low-precision tolerance term's scale (oracles.compare)  @value: scale
# @end: scaled
twin, bad = Model().double().eval(), 0
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
    bad += int(off.any())
if bad:
    print('signature:', SIGNATURE)
# @end: judges
# @end: runs
# @end: compiles
#| The end: a wrong answer's verdict, or the stage a failure form stopped
#| after, passed. (The exits come last: mypy reads no further than an exit.)
# @if: stops_after_import
print(f'{STAGE} passed: fixed')
# @end: stops_after_import
# @if: stops_after_compile
print('compile passed: fixed')
# @end: stops_after_compile
# @if: fails_at_run
print('run passed: fixed')
# @end: fails_at_run
# @if: judges
sys.exit(int(bad > 0))
# @end: judges
# @if: fails
sys.exit(0)
# @end: fails

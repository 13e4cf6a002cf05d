#| The single-op form of a wrong answer localized to an op (markers:
#| ../template.py): the op alone, fed the inputs it got on batch 0, compiled
#| and run the way the target did, judged against the same op in float64.
#| Sections: the prelude's, static / dynamic (the target's shape mode), vulkan
#| (IREE with a Vulkan device: its description, results read back via
#| staging), to_host (any other IREE device).
"""Repro: ${op_name} on ${target} vs the same op in float64 (exit 1: bug, 0: fixed, 2: cannot run).
${signature}"""
from .prelude import *  # @include
SIGNATURE = ''  # @value: signature
OUTPUT_TYPE = ''  # torch-mlir's output, as the target lowers  @value: output_type
# @if: iree
BACKEND = ''  # @value: backend
FLAGS: list[str] = []  # the target's compile flags  @value: flags
DRIVER = ''  # @value: driver
# @end: iree
ARGS: list[np.ndarray] = []  # @code: data
# @if: vulkan
DEVICE_TARGETS = ''  # @value: device_targets

from .vulkan_host import host  # @include
# @end: vulkan

class Op(torch.nn.Module): '''The op, its float dtypes read through the float64 twin's _f.'''  # @code: op_class
def twin_mode(on: bool) -> None: '''The twin's float64, named dtypes and default alike.'''  # @stub

def tensors(f64=False):
    '''The operands as tensors: float ones in float64 for the twin.'''
    return tuple(torch.from_numpy(a).double() if f64 and a.dtype.kind == 'f' else torch.from_numpy(a) for a in ARGS)

try:
    # @if: static
    ep = torch.export.export(Op(), tensors())
    # @end: static
    # @if: dynamic
    ep = torch.export.export(Op(), tensors(), dynamic_shapes=[{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS])
    # @end: dynamic
    mlir = str(fx.export_and_import(ep, output_type=OUTPUT_TYPE, func_name='main'))
    # @if: vulkan
    from .vulkan_device import *  # @include
    # @end: vulkan
    # @if: iree
    vmfb = ireec.compile_str(mlir, target_backends=[BACKEND], extra_args=FLAGS)
    ctx = rt.SystemContext(config=rt.Config(DRIVER))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    # @end: iree
    # @if: to_host
    got = np.asarray(ctx.modules.module['main'](*ARGS).to_host()).astype(np.float64)
    # @end: to_host
    # @if: vulkan
    got = host(ctx.modules.module['main'](*ARGS)).astype(np.float64)
    # @end: vulkan
    # @if: refbackend
    ctx = RefBackendModule(mlir)
    got = np.asarray(ctx([*ARGS])[0]).astype(np.float64)
    # @end: refbackend
except Exception as exc:  # not the bug this repro is about
    print(f'cannot run: {type(exc).__name__}: {exc}')
    sys.exit(2)
with torch.no_grad():
    twin_mode(True)
    ref = Op()(*tensors(True)).numpy()
    twin_mode(False)
    e32 = Op()(*tensors()).numpy().astype(np.float64)
bad = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref)) if got.shape == ref.shape else np.ones(1, bool)
print(f'{bad.sum()}/{bad.size} elements off tolerance; got {got.shape}, ref64 {ref.shape}')
if bad.any():
    print('signature:', SIGNATURE)
sys.exit(int(bad.any()))

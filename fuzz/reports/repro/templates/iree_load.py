#| Part of the model and road forms (markers: ../template.py): the IREE
#| runtime on DRIVER with the compiled module loaded; no such device here
#| means the script cannot run (exit 2), not that the bug is gone.
from typing import Any  # @stub
import sys  # @stub
import iree.runtime as rt  # @stub
DRIVER = ''  # @stub
vmfb: Any = None  # @stub
def attempt(stage: str, fn: Any) -> Any: '''The stage boundary.'''  # @stub
try:
    ctx = rt.SystemContext(config=rt.Config(DRIVER))
except Exception as exc:
    print(f'cannot run: no usable {DRIVER} device: {exc}')
    sys.exit(2)
attempt('run', lambda: ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb)))

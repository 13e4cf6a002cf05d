#| Part of the forms that read results back from a Vulkan device (single_op.py,
#| model.py): lavapipe cannot import a numpy array's memory for to_host(), so
#| results come back through a staging buffer (markers: ../template.py).
from typing import Any  # @stub
import numpy as np  # @stub
import iree.runtime as rt  # @stub
ctx: Any = None  # @stub
def host(value):
    '''A device result on the host: lavapipe cannot import host memory for to_host(), so copy via staging.'''
    view, device = value._buffer_view, ctx.config.device
    shape = [int(d) for d in view.shape]
    dtype = np.dtype(rt.HalElementType.map_to_dtype(view.element_type))
    source, size = view.get_buffer(), int(view.get_buffer().byte_length())
    if size == 0:
        return np.zeros(shape, dtype)
    staging = device.allocator.allocate_buffer(
        memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
        allowed_usage=rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED,
        allocation_size=size)
    semaphore = device.create_semaphore(0)
    device.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(semaphore, 0),
                      signal_semaphores=rt.HalFence.create_at(semaphore, 1))
    rt.HalFence.create_at(semaphore, 1).wait()
    return np.array(staging.map().asarray(shape, dtype), copy=True)

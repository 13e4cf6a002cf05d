#| Part of every form that compiles for a Vulkan device (markers:
#| ../template.py): the device's description, as dlrm-fuzz compiled for it,
#| attached to the program before iree-compile sees it (empty: the target
#| uses flags instead). Included where the program is in ``mlir``.
DEVICE_TARGETS = ''  # @stub
mlir = ''  # @stub
if DEVICE_TARGETS:  # compile for this Vulkan device's description
    head = 'module attributes {' + DEVICE_TARGETS
    mlir = mlir.replace('module attributes {', head + ', ', 1) if 'module attributes {' in mlir else mlir.replace('module {', head + '} {', 1)

"""Run linalg-on-tensors MLIR on torch-mlir's own reference backend, with no IREE
involved: lower it with torch-mlir's ``refback-*`` passes and upstream MLIR
passes to the LLVM dialect, JIT it with the MLIR ExecutionEngine that the
torch-mlir wheel ships, and call ``main`` on numpy arrays. It exists to split
the blame of a wrong answer: the program both backends receive is the same
linalg-on-tensors text, so a wrong answer on both IREE and refbackend points at
torch-mlir (the lowering that produced the text), and a wrong answer on IREE
alone points at IREE.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.targets.pipeline import StageFailure, run_stage

__all__ = ["RefBackendModule", "refbackend_available", "lowering_pipeline"]

CONSUME_RETURN_PREFIX = "refbackend_consume_func_return_"
ENTRY = "main"

# Element types ``main`` may take or return, as MLIR spells them. The munged
# calling convention accepts more (f16, i8, i16, complex), but these are what a
# DLRM program carries, and each one is tested.
_NUMPY_OF_MLIR: dict[str, np.dtype[Any]] = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "i1": np.dtype(np.bool_),
}

# Scalars returned by value (a ``main`` returning a bare scalar). Upstream maps
# i64 to ``c_int``, which truncates; the widths here are the real ones.
_CTYPE_OF_SCALAR: dict[str, Any] = {
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "i1": ctypes.c_bool,
}


def lowering_pipeline(runtime_verification: bool = False) -> str:
    """The pass pipeline from linalg-on-tensors to the LLVM dialect.

    It is upstream torch-mlir's refbackend pipeline (torch_mlir_e2e_test,
    ``lowering_pipeline``) minus its sparse-tensor mini-pipeline (a DLRM has no
    sparse tensors, and those passes cost compile time), with the buffer
    deallocation done by ``buffer-deallocation-pipeline`` as upstream does since
    the old ``buffer-deallocation`` pass left MLIR. Runtime verification is off
    by default: a failed check calls ``abort()``, which would take the worker
    down instead of reporting an answer.
    """
    passes = [
        "func.func(linalg-generalize-named-ops)",
        "func.func(linalg-fuse-elementwise-ops)",
        "convert-shape-to-std",
        # Buffer deallocation does not know how to handle realloc.
        "func.func(expand-realloc)",
        "func.func(refback-generalize-tensor-pad)",
        "func.func(refback-generalize-tensor-concat)",
        "func.func(tm-tensor-bufferize)",
        "one-shot-bufferize{copy-before-write bufferize-function-boundaries"
        " function-boundary-type-conversion=identity-layout-map}",
        "refback-mlprogram-bufferize",
        "func.func(buffer-deallocation-pipeline)",
        "inline",
        # Arguments become unranked memrefs and every return becomes a call of
        # ``refbackend_consume_func_return_<types>``, which RefBackendModule
        # supplies as a ctypes callback: the entry point itself returns void.
        "refback-munge-calling-conventions",
        "func.func(tm-tensor-to-loops)",
        "func.func(refback-munge-memref-copy)",
        "func.func(convert-linalg-to-loops)",
        "func.func(lower-affine)",
        "convert-scf-to-cf",
    ]
    if runtime_verification:
        passes.append("generate-runtime-verification")
    passes += [
        "func.func(refback-expand-ops-for-llvm)",
        "func.func(arith-expand)",
        "func.func(convert-math-to-llvm)",
        "convert-math-to-libm",
        "expand-strided-metadata",
        "finalize-memref-to-llvm",
        "lower-affine",
        "convert-scf-to-cf",
        "convert-bufferization-to-memref",
        "finalize-memref-to-llvm",
        "func.func(convert-arith-to-llvm)",
        "convert-vector-to-llvm",
        "convert-func-to-llvm",
        "convert-cf-to-llvm",
        "convert-complex-to-llvm",
        "reconcile-unrealized-casts",
    ]
    return "builtin.module(" + ",".join(passes) + ")"


def _register_torch_mlir_passes() -> None:
    """The ``refback-*`` and ``tm-tensor-*`` passes are registered by loading
    torch-mlir's own extension, which ``torch_mlir.ir`` alone does not do."""
    import torch_mlir._mlir_libs._torchMlir  # noqa: F401  (registers passes on import)


@dataclass(frozen=True)
class _ArgSpec:
    """What ``main`` expects of one argument; checked before every call because
    a wrong dtype or shape would not fail, it would read garbage."""

    dtype: np.dtype[Any]
    shape: tuple[int | None, ...]  # None: a dynamic dimension

    def check(self, position: int, array: np.ndarray) -> None:
        if array.dtype != self.dtype:
            raise TypeError(f"argument {position}: main expects {self.dtype}, got {array.dtype}")
        if array.ndim != len(self.shape) or any(
                want is not None and want != got for want, got in zip(self.shape, array.shape)):
            raise ValueError(f"argument {position}: main expects shape "
                             f"{tuple('?' if d is None else d for d in self.shape)}, got {array.shape}")


def _entry_signature(module: Any) -> list[_ArgSpec]:
    """The argument types of ``main``, read from the linalg-on-tensors module
    before it is lowered (afterwards every argument is an opaque pointer)."""
    from torch_mlir.ir import FunctionType, RankedTensorType, ShapedType, StringAttr, TypeAttr

    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue
        if StringAttr(op.attributes["sym_name"]).value != ENTRY:
            continue
        function_type = FunctionType(TypeAttr(op.attributes["function_type"]).value)
        specs = []
        for position, arg in enumerate(function_type.inputs):
            try:
                tensor = RankedTensorType(arg)
            except ValueError:
                raise TypeError(f"argument {position} of main is {arg}, not a ranked tensor") from None
            element = str(tensor.element_type)
            if element not in _NUMPY_OF_MLIR:
                raise TypeError(f"argument {position} of main has element type {element}, "
                                f"supported: {', '.join(_NUMPY_OF_MLIR)}")
            dynamic = ShapedType.get_dynamic_size()
            shape = tuple(None if d == dynamic else d for d in tensor.shape)
            specs.append(_ArgSpec(_NUMPY_OF_MLIR[element], shape))
        return specs
    raise ValueError(f"the module has no func.func @{ENTRY}")


class _UnrankedMemRef(ctypes.Structure):
    """MLIR's unranked memref descriptor: the rank and a pointer to the ranked one."""

    _fields_ = [("rank", ctypes.c_int64), ("descriptor", ctypes.c_void_p)]


@functools.lru_cache(maxsize=None)
def _ranked_descriptor_type(rank: int) -> type[ctypes.Structure]:
    """MLIR's ranked memref descriptor with untyped pointers: reading a result
    only needs the addresses, and untyped pointers never need dereferencing
    (a zero-size result may carry a null one)."""

    class Ranked(ctypes.Structure):
        _fields_ = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
            ("sizes", ctypes.c_int64 * rank),
            ("strides", ctypes.c_int64 * rank),
        ]

    return Ranked


def _memref_to_numpy(unranked: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """Copy a result memref out of engine memory into a fresh numpy array.

    Not ``torch_mlir.runtime.unranked_memref_to_numpy``: that returns a view
    into memory the engine allocated, and it dereferences the data pointer,
    which fails for a zero-size result.
    """
    described = unranked[0]
    rank = int(described.rank)
    ranked = ctypes.cast(described.descriptor, ctypes.POINTER(_ranked_descriptor_type(rank)))[0]
    shape = tuple(int(s) for s in ranked.sizes)
    if 0 in shape:
        return np.empty(shape, dtype)
    strides = [int(s) for s in ranked.strides]
    # The elements addressed are aligned + offset + sum(i_k * stride_k); take
    # the span from the lowest to the highest and let numpy stride over it.
    low = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0)
    storage = np.dtype(np.uint8) if dtype == np.bool_ else dtype  # i1 is stored a byte each
    base = int(ranked.aligned or 0) + (int(ranked.offset) + low) * storage.itemsize
    span = (ctypes.c_byte * ((high - low + 1) * storage.itemsize)).from_address(base)
    flat = np.frombuffer(memoryview(span), dtype=storage)
    view = np.lib.stride_tricks.as_strided(
        flat[-low:], shape=shape, strides=[s * storage.itemsize for s in strides], writeable=False)
    copied = np.array(view, dtype=storage, copy=True)
    return copied != 0 if dtype == np.bool_ else copied


def _allocated_pointer(unranked: Any) -> int:
    """The base address of a result memref's buffer: what ``malloc`` returned."""
    described = unranked[0]
    ranked = ctypes.cast(described.descriptor,
                         ctypes.POINTER(_ranked_descriptor_type(int(described.rank))))[0]
    return int(ranked.allocated or 0)


_GLOBAL_MARKER = 0xDEADBEEF  # finalize-memref-to-llvm's "allocated" of a memref.get_global


@functools.lru_cache(maxsize=1)
def _libc_free() -> Any:
    """The process's ``free``: the JIT resolves ``malloc`` to the process's too."""
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return free


def _free_results(allocated: list[int], arguments: set[int]) -> None:
    """Free each distinct result buffer once, never an argument's or a global's."""
    free = _libc_free()
    for address in set(allocated) - arguments - {0, _GLOBAL_MARKER}:
        free(address)


def _argument_descriptor(array: np.ndarray) -> tuple[Any, ...]:
    """The pointer-to-pointer-to-unranked-memref the munged ``main`` takes for
    one argument, with the descriptors it points to (to keep them alive for the
    call, as the caller must keep ``array``).

    Not ``torch_mlir.runtime.get_unranked_memref_descriptor``: it defines a new
    ctypes class per call, and ctypes caches a pointer type per class forever,
    which leaked about 45 KB a call (9 GB over 200k calls of the tiny DLRM).
    """
    ranked = _ranked_descriptor_type(array.ndim)()
    ranked.allocated = ranked.aligned = array.ctypes.data
    ranked.offset = 0
    for k, (size, stride) in enumerate(zip(array.shape, array.strides)):
        ranked.sizes[k] = size
        ranked.strides[k] = stride // array.itemsize  # numpy counts bytes, MLIR elements
    unranked = _UnrankedMemRef(array.ndim, ctypes.addressof(ranked))
    return ctypes.pointer(ctypes.pointer(unranked)), unranked, ranked


class RefBackendModule:
    """Compiled with the refback pipeline; call with numpy inputs.

    Compiles once (lowering and JIT code generation both happen in the
    constructor, so their cost and their failures belong to the ``compile``
    stage) and can then be called once per batch. Calls are serialised by a
    lock: results come back through a callback into this object.

    Result buffers are copied out and then freed: the deallocation pipeline
    hands every returned buffer to the caller as a fresh ``malloc`` (it clones
    a returned argument or constant), so not freeing them leaked ~50 bytes per
    call of the tiny DLRM. A buffer that is an argument's or a constant
    global's (``0xdeadbeef``) is never freed, in case that ever changes.
    """

    def __init__(self, linalg_mlir: str, *, runtime_verification: bool = False) -> None:
        self._lock = threading.Lock()
        self._results: list[list[np.ndarray]] = []
        self._callback_errors: list[BaseException] = []
        self._allocated: list[int] = []  # result buffers to free after a call
        # ctypes callbacks must outlive the engine that calls them.
        self._callbacks: list[Any] = []
        self.llvm_mlir: str = ""  # the lowered module, kept for reports
        self._engine: Any = None
        self._signature: list[_ArgSpec] = []
        run_stage("compile", lambda: self._compile(linalg_mlir, runtime_verification))

    def _compile(self, linalg_mlir: str, runtime_verification: bool) -> None:
        _register_torch_mlir_passes()
        from torch_mlir.execution_engine import ExecutionEngine
        from torch_mlir.ir import Context, Module, StringAttr
        from torch_mlir.passmanager import PassManager

        # Parse and pass failures raise MLIRError carrying their diagnostics;
        # anything else MLIR or the JIT reports goes to stderr, which ``_stage``
        # captures into the StageFailure's message.
        with Context():
            module = Module.parse(linalg_mlir)
            self._signature = _entry_signature(module)
            PassManager.parse(lowering_pipeline(runtime_verification)).run(module.operation)
            self.llvm_mlir = str(module)
            consumers = [StringAttr(op.attributes["sym_name"]).value
                         for op in module.body.operations
                         if "sym_name" in op.attributes
                         and StringAttr(op.attributes["sym_name"]).value.startswith(CONSUME_RETURN_PREFIX)]
            engine = ExecutionEngine(module, opt_level=2)
            for name in consumers:
                callback = self._consumer(name)
                self._callbacks.append(callback)
                engine.register_runtime(name, callback)
            # Force code generation now: ExecutionEngine generates code
            # lazily, on the first lookup.
            if not engine.raw_lookup("_mlir_ciface_" + ENTRY):
                raise RuntimeError(f"the JIT has no symbol _mlir_ciface_{ENTRY}")
            self._engine = engine

    def _consumer(self, name: str) -> Any:
        """The ctypes callback standing in for ``refbackend_consume_func_return_*``:
        its name spells the result types (``mrf32`` a memref of f32, ``i64`` a
        scalar), which is all there is to know to read them back."""
        tokens = name[len(CONSUME_RETURN_PREFIX):].split("_")
        readers: list[Callable[[Any], np.ndarray]] = []
        is_memref: list[bool] = []
        argtypes: list[Any] = []
        for token in tokens:
            if token.startswith("mr") and token[2:] in _NUMPY_OF_MLIR:
                dtype = _NUMPY_OF_MLIR[token[2:]]
                argtypes.append(ctypes.POINTER(_UnrankedMemRef))
                readers.append(functools.partial(_memref_to_numpy, dtype=dtype))
                is_memref.append(True)
            elif token in _CTYPE_OF_SCALAR:
                dtype = _NUMPY_OF_MLIR[token]
                argtypes.append(_CTYPE_OF_SCALAR[token])
                readers.append(functools.partial(np.array, dtype=dtype))
                is_memref.append(False)
            else:
                raise TypeError(f"main returns a {token}, which refbackend cannot read back")

        def consume(*args: Any) -> None:
            # An exception escaping a ctypes callback is printed and dropped,
            # so it is kept here and raised by the caller.
            try:
                self._allocated += [_allocated_pointer(arg) for arg, memref in zip(args, is_memref) if memref]
                self._results.append([read(arg) for read, arg in zip(readers, args)])
            except BaseException as exc:
                self._callback_errors.append(exc)

        return ctypes.CFUNCTYPE(None, *argtypes)(consume)

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        arrays = [np.asarray(x, order="C") for x in inputs]  # not ascontiguousarray: it makes 0-d 1-d
        if len(arrays) != len(self._signature):
            raise TypeError(f"main takes {len(self._signature)} arguments, got {len(arrays)}")
        for position, (spec, array) in enumerate(zip(self._signature, arrays)):
            spec.check(position, array)
        with self._lock:
            return run_stage("run", lambda: self._invoke(arrays), capture_stderr=False)

    def _invoke(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        self._results.clear()
        self._callback_errors.clear()
        self._allocated.clear()
        descriptors = [_argument_descriptor(a) for a in arrays]
        try:
            self._engine.invoke(ENTRY, *(d[0] for d in descriptors))
        finally:
            _free_results(self._allocated, {a.ctypes.data for a in arrays})
        if self._callback_errors:
            raise self._callback_errors[0]
        if len(self._results) != 1:
            raise RuntimeError(f"main handed back {len(self._results)} results, expected one return")
        return self._results.pop()


@functools.lru_cache(maxsize=1)
def refbackend_available() -> tuple[bool, str]:
    """Whether this wheel can run refbackend: torch-mlir wheels are built with or
    without the RefBackend passes and the ExecutionEngine, so a campaign asks
    before it relies on them. Checked by running a one-op program end to end."""
    try:
        import torch_mlir.execution_engine  # noqa: F401
        import torch_mlir.passmanager  # noqa: F401
        _register_torch_mlir_passes()
    except ImportError as exc:
        return False, (f"torch-mlir's Python bindings are incomplete ({exc}); "
                       "install a torch-mlir wheel that ships the MLIR ExecutionEngine")
    probe = """
    func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
      %e = tensor.empty() : tensor<2xf32>
      %r = linalg.add ins(%a, %b : tensor<2xf32>, tensor<2xf32>) outs(%e : tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    }"""
    try:
        got = RefBackendModule(probe)([np.array([1, 2], np.float32), np.array([3, 4], np.float32)])
    except StageFailure as failure:
        first = failure.message.strip().splitlines()[-1] if failure.message.strip() else ""
        return False, (f"refbackend cannot {failure.stage} a one-op program ({failure.error_type}: "
                       f"{first}); install a torch-mlir wheel built with TORCH_MLIR_ENABLE_REFBACKEND")
    if not np.array_equal(got[0], np.array([4, 6], np.float32)):
        return False, f"refbackend computed 1+3, 2+4 as {got[0].tolist()}; the torch-mlir wheel is broken"
    return True, ""

"""The text every ``repro.py`` shares: its first lines (an unexpected exception
exits 2, never a traceback's 1), the one stage boundary ``attempt`` that
decides exit 1 versus 2, the imports, IREE compile-and-load and device
lines, the refbackend runtime written beside a refbackend repro, the crash
and hang supervisor, and the float64 twin's dtype switch."""

from __future__ import annotations

import re

from fuzz.reports.repro.core import hang_limit_s
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget, IreeTarget, RefBackendTarget, VulkanTarget
from oracles.verdict import Verdict

__all__ = ["RUNTIME_FILE"]


# Every form's first lines: an exception the script did not expect (a bug of
# the script, a changed API, a dtype it cannot judge in) means it cannot run,
# exit 2, never a traceback's exit 1, which a fix-checking script would read
# as "bug present". The traceback still goes to stderr.
_UNEXPECTED = [
    "import os",
    "import sys",
    "def unexpected(kind, exc, tb):  # not the bug: exit 2, never a traceback's exit 1",
    "    sys.__excepthook__(kind, exc, tb)  # the traceback, on stderr (line-buffered)",
    "    print('cannot run: unexpected', ' '.join(f'{kind.__name__}: {exc}'.split())[:500], flush=True)",
    "    os._exit(2)",
    "sys.excepthook = unexpected",
]


_IMPORTS_RUNTIME = [*_UNEXPECTED, "import numpy as np", "import torch", "from torch_mlir import fx",
                    "import iree.compiler as ireec", "import iree.runtime as rt"]


def _device_lines(target: CompiledTarget, read_back: bool = True) -> list[str]:
    """The Vulkan device description, and how results come back to the host:
    plain ``to_host``, except on Vulkan (lavapipe cannot import a numpy
    array's memory, so copy via staging)."""
    if not isinstance(target, VulkanTarget):
        return []
    described = ["DEVICE_TARGETS = " + repr(_vulkan_device_targets(target))]
    if not read_back:
        return described
    return [
        *described,
        "",
        "def host(value):  # lavapipe cannot import host memory for to_host(): copy via staging",
        "    view, device = value._buffer_view, ctx.config.device",
        "    shape = [int(d) for d in view.shape]",
        "    dtype = np.dtype(rt.HalElementType.map_to_dtype(view.element_type))",
        "    source, size = view.get_buffer(), int(view.get_buffer().byte_length())",
        "    if size == 0:",
        "        return np.zeros(shape, dtype)",
        "    staging = device.allocator.allocate_buffer(",
        "        memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,",
        "        allowed_usage=rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED,",
        "        allocation_size=size)",
        "    semaphore = device.create_semaphore(0)",
        "    device.queue_copy(source, staging, wait_semaphores=rt.HalFence.create_at(semaphore, 0),",
        "                      signal_semaphores=rt.HalFence.create_at(semaphore, 1))",
        "    rt.HalFence.create_at(semaphore, 1).wait()",
        "    return np.array(staging.map().asarray(shape, dtype), copy=True)",
    ]


def _host(target: CompiledTarget, call: str) -> str:
    if isinstance(target, RefBackendTarget):
        return f"np.asarray({call})"
    return f"host({call})" if isinstance(target, VulkanTarget) else f"np.asarray({call}.to_host())"


def _invoke(target: CompiledTarget, args: str) -> str:
    """The call of the compiled ``main`` on ``args`` (Python argument text)."""
    if isinstance(target, RefBackendTarget):
        return f"ctx([{args}])[0]"
    return f"ctx.modules.module['main']({args})"


def _imports(target: CompiledTarget, needs_backend: bool = True) -> list[str]:
    """The script's imports; for refbackend, its runtime from the file beside
    it (see ``_refbackend_runtime``)."""
    if not needs_backend:
        return _IMPORTS_RUNTIME[:-2]
    if not isinstance(target, RefBackendTarget):
        return _IMPORTS_RUNTIME
    return [*_IMPORTS_RUNTIME[:-2], "import runpy",
            f"RefBackendModule = runpy.run_path({RUNTIME_FILE!r})['RefBackendModule']  "
            "# torch-mlir's refback passes + MLIR ExecutionEngine, driven as dlrm-fuzz drives them"]


# Beside a refbackend repro: torch-mlir ships the refback passes and the MLIR
# ExecutionEngine but no Python driver for them.
RUNTIME_FILE = "refbackend_runtime.py"


def _refbackend_runtime() -> str:
    """The driver dlrm-fuzz runs refbackend with (fuzz/targets/refbackend.py:
    standard library, numpy and torch-mlir only), verbatim but for its one
    import of dlrm-fuzz, the stage wrapper, whose job the script's own
    ``attempt`` does."""
    import inspect

    import fuzz.targets.refbackend

    source = inspect.getsource(fuzz.targets.refbackend)
    ours = "from fuzz.targets.pipeline import StageFailure, run_stage\n"
    assert ours in source, ("fuzz/targets/refbackend.py's imports changed: update "
                            "fuzz.reports.repro.script._refbackend_runtime")
    return source.replace(ours, "\n\nclass StageFailure(Exception):  # dlrm-fuzz's; only the probe raises it\n"
                                "    pass\n\n\ndef run_stage(stage, fn, capture_stderr=True):\n"
                                "    return fn()  # the repro's attempt() is its stage boundary\n")


def _vulkan_device_targets(target: IreeTarget) -> str:
    """The ``hal.device.targets`` attribute the target attaches (empty when it
    uses flags instead), as compiled here: the device description is part of
    the program IREE compiled."""
    source, _ = target.prepare("module {\n}")
    found = re.match(r"module attributes \{(.*)\} \{", source)
    return found.group(1) if found else ""


def _flags(target: IreeTarget) -> list[str]:
    return list(target.prepare("module {\n}")[1])


def _backend_words(target: CompiledTarget) -> str:
    if isinstance(target, IreeTarget):
        return f"IREE {target.backend} -> {target.driver}"
    return "torch-mlir refbackend (refback passes, MLIR ExecutionEngine)"


def _compile_and_load(target: CompiledTarget, indent: str) -> list[str]:
    if not isinstance(target, IreeTarget):
        return [f"{indent}ctx = RefBackendModule(mlir)"]
    lines = []
    if isinstance(target, VulkanTarget):
        lines += ["if DEVICE_TARGETS:  # compile for this Vulkan device's description",
                  "    head = 'module attributes {' + DEVICE_TARGETS",
                  "    mlir = mlir.replace('module attributes {', head + ', ', 1) "
                  "if 'module attributes {' in mlir else mlir.replace('module {', head + '} {', 1)"]
    lines += [f"vmfb = ireec.compile_str(mlir, target_backends=[{target.backend!r}], "
              f"extra_args={_flags(target)!r})",
              f"ctx = rt.SystemContext(config=rt.Config({target.driver!r}))",
              "ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))"]
    return [indent + line for line in "\n".join(lines).splitlines()]


def _twin_dtypes(code: list[str]) -> list[str]:
    """``code`` with every float dtype it names read through ``_f``, and ``_f``
    defined before it. A low-precision program names its float dtypes (the
    casts at its edges, torch.export's _assert_tensor_metadata checks of
    them, an op's dtype argument): through _f, the float64 twin the judge
    runs (with ``TWIN`` set) computes them in float64 instead of failing
    "Tensor dtype mismatch! Expected: Float, Got: double"."""
    twin = ["TWIN = False  # True while the float64 twin runs: its float dtypes are float64",
            "def _f(dtype):", "    return torch.float64 if TWIN else dtype",
            "def twin_mode(on):  # and so are those it does not name (int / int takes the default dtype)",
            "    global TWIN; TWIN = on; torch.set_default_dtype(torch.float64 if on else torch.float32)"]
    return [*twin, *(_FLOAT_DTYPE.sub(r"_f(torch.\1)", line) for line in code)]


_FLOAT_DTYPE = re.compile(r"\btorch\.(float16|bfloat16|float32|float64|half|float)\b(?!\w|\()")


def _judge_lines(target: CompiledTarget, scale: float = 0.0) -> list[str]:
    """A mismatch: every batch the artifact accepts, against float64 eager
    under the tolerance rule of ``oracles.compare``."""
    return [
        "twin, bad = Model().double().eval(), 0",
        "for b, inputs in enumerate(BATCHES):",
        "    got = " + _host(target, f"attempt('run', lambda: {_invoke(target, '*LEAD, *inputs')})")
        + ".astype(np.float64)",
        "    with torch.no_grad():",
        "        e32 = model(*map(torch.from_numpy, [*LEAD, *inputs])).numpy().astype(np.float64)",
        "        twin_mode(True)",
        "        ref = twin(*(torch.from_numpy(a).double() if a.dtype.kind == 'f' else torch.from_numpy(a) "
        "for a in [*LEAD, *inputs])).numpy()",
        "        twin_mode(False)",
        "    off = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref)"
        + (f" + {scale!r} * (np.abs(ref) + np.abs(ref).max())" if scale else "") + ") "
        "if got.shape == ref.shape else np.ones(1, bool)",
        "    print(f'batch {b}: {off.sum()}/{off.size} elements off tolerance; '",
        "          f'got {got.shape}, ref64 {ref.shape}')",
        "    bad += int(off.any())",
        "if bad:",
        "    print('signature:', SIGNATURE)",
        "sys.exit(int(bad > 0))",
    ]


# The script's one stage boundary: MLIR prints its diagnostics on fd 2, not
# into the exception, so fd 2 is captured around each stage.
_ATTEMPT = [
    "def attempt(stage, fn):",
    "    '''Run one stage; on failure: exit 1 if it is the fault, else 2.'''",
    "    sys.stderr.flush()",
    "    saved, error = os.dup(2), None",
    "    with tempfile.TemporaryFile() as sink:",
    "        os.dup2(sink.fileno(), 2)",
    "        try:",
    "            value = fn()",
    "        except Exception as exc:",
    "            error = f'{type(exc).__name__}: {exc}'",
    "        sys.stderr.flush()",
    "        os.dup2(saved, 2)",
    "        os.close(saved)",
    "        sink.seek(0)",
    "        printed = sink.read().decode('utf-8', 'replace')",
    "    if error is None:",
    "        return value",
    "    text, at = ' '.join(f'{printed}\\n{error}'.split()), 0",
    "    for part in FAULT:  # the fault's words, in order (numbers, names, shapes vary)",
    "        at = -1 if at < 0 else text.find(part, at)",
    "        at = at if at < 0 else at + len(part)",
    "    if stage == STAGE and at >= 0:",
    "        print(f'{stage} failed:', next((l for l in f'{printed}\\n{error}'.splitlines() "
    "if all(p in l for p in FAULT[:1])), error)[:500])",
    "        print('signature:', SIGNATURE)",
    "        sys.exit(1)",
    "    print(f'cannot run: {stage} failed with another error:', f'{printed}\\n{error}'.strip()[-3000:])",
    "    sys.exit(2)",
]


def _crash_supervisor(entry: CorpusEntry) -> list[str]:
    """For a CRASH or TIMEOUT bucket: the script re-runs itself in a child
    process and exits 1 when the child dies of the bucket's signal, or is still
    busy after the time the fuzzer gave it (a process can report neither its
    own segfault nor its own hang)."""
    number = entry.numbers.get("signal") if isinstance(entry.numbers, dict) else None
    crash = entry.verdict is Verdict.CRASH and isinstance(number, int)
    limit = hang_limit_s(entry)
    if not crash and limit is None:
        return []
    run_child = "subprocess.run([sys.executable, *sys.orig_argv[1:]], env={**os.environ, 'REPRO_CHILD': '1'}"
    lines = ["if os.environ.get('REPRO_CHILD') != '1':  # the stages run in a child: the bug takes it down",
             "    import subprocess"]
    if crash:
        lines[:0] = [f"CRASH = {number}  # the signal the toolchain dies of"]
        lines += [f"    child = {run_child})",
                  "    if child.returncode == -CRASH:",
                  "        print(f'{STAGE} crashed: signal {CRASH}')",
                  "        print('signature:', SIGNATURE)",
                  "        sys.exit(1)"]
    else:
        lines[:0] = [f"HANG = {limit:g}  # seconds the fuzzer waited before calling it a hang"]
        lines += ["    try:",
                  f"        child = {run_child}, timeout=HANG)",
                  "    except subprocess.TimeoutExpired:",
                  "        print(f'{STAGE} hung: no answer within {HANG:g} s')",
                  "        print('signature:', SIGNATURE)",
                  "        sys.exit(1)"]
    return lines + ["    sys.exit(child.returncode if child.returncode in (0, 2) else 2)"]

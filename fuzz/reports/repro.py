"""Standalone reproducers: a ``repro.py`` a torch-mlir or IREE maintainer can run
without dlrm-fuzz.

For one corpus entry this module writes ``repro.py`` (plus the data it loads)
into the entry's folder and checks it by running it in a fresh isolated
interpreter. The script imports only torch, torch_mlir, iree.compiler,
iree.runtime and numpy (and the standard library), runs the same stages with
the exact flags and device description the target used, prints
``signature: <signature>`` only when it observes the fault, and exits 1 while
the bug is present, 0 once it is fixed, 2 when it cannot run (no device, a
different error, or any exception it did not expect: never a traceback's
exit 1, which a script checking a fix by exit status would read as the bug).
It takes the smallest honest form: for a MISMATCH localized to one op, a
single-op module fed that op's real inputs (captured from the eager run of
the stored sample) and judged against the same op in float64 (a float64
twin that computes the dtypes the op names in float64; bfloat16 operands
enter as float32 and are cast inside); for an EXPORT_ERROR, the one op of
the model whose own ``torch.export`` fails with the same bucket key (torch
and numpy only); otherwise, or when that form does not reproduce, the shrunk
DLRM written out as plain PyTorch, generated from the exported ATen graph,
with its weights in ``params.npz``. Compile and run go through IREE, or,
for a bug of torch-mlir's refbackend or one no IREE target showed, through
refbackend itself (its runtime in ``refbackend_runtime.py`` beside the
script). A repro that does not fail is never passed off as one: the returned
``Repro.status`` says so, for the case to record. It runs in a worker
process (torch available); failures of the toolchain never raise, only bugs
of ours do.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import TARGETS, CompiledTarget, IreeTarget, RefBackendTarget, Target, VulkanTarget
from oracles.results import Stage
from oracles.verdict import Verdict

__all__ = ["Repro", "repro_target", "write_repro", "SINGLE_OP_FORMS", "has_single_op_form", "run_repro", "fault_parts", "RUNTIME_FILE",
           "ALLOWED_IMPORTS", "INLINE_MAX_ELEMENTS"]

# What a repro may import: the toolchain under test, numpy, and the standard
# library modules the templates below use.
ALLOWED_IMPORTS = frozenset({"torch", "torch_mlir", "iree.compiler", "iree.runtime", "numpy",
                             "sys", "os", "re", "tempfile", "subprocess", "runpy",
                             # the refbackend runtime beside a refbackend repro
                             "__future__", "torch_mlir.execution_engine", "torch_mlir.ir",
                             "torch_mlir.passmanager", "torch_mlir._mlir_libs._torchMlir", "ctypes",
                             "functools", "threading", "dataclasses", "typing"})
# Arrays up to this size are written into the script; larger ones beside it.
INLINE_MAX_ELEMENTS = 64
# IREE targets to reproduce a refbackend finding on, most familiar first.
_PREFERRED = ("iree-cpu", "iree-cpu-sync", "iree-vmvx")
_OUTPUT_CHARS = 4000
# Placeholders oracles.normalize puts in an error key, and the spot where it
# dropped an op dump (": name = "): the text between them is the fault's own.
_PLACEHOLDER = re.compile(r"\bN\b|%v|<src>|<file>|\[\.\.\.\]|tensor<\.\.\.>|0x\.\.\.|"
                          r"loc\(\.\.\.\)|: name = ")


@dataclass(frozen=True)
class Repro:
    """What was written and whether it reproduces (``status`` starts with
    "reproduces", "does not reproduce: " or "cannot run: ")."""

    kind: str  # "single-op" | "export" | "model"
    target: str
    lines: int
    status: str
    exit_code: int | None
    output: str

    def to_dict(self) -> dict[str, Any]:
        """The repro's outcome as JSON, stored with the case under ``repro``."""
        return dataclasses.asdict(self)


# -- which target -----------------------------------------------------------

def repro_target(entry: CorpusEntry, table: dict[str, Target] | None = None) -> CompiledTarget:
    """The target the repro runs: the entry's own when it is an IREE target;
    torch-mlir's refbackend when the bug is refbackend's (blamed on it, or
    seen on no IREE target: an IREE repro would pass or fail another way);
    else the IREE target it was also seen on that lowers the same way (output
    type, shape mode), most familiar first; else any IREE target of that
    output type. A maintainer of IREE or torch-mlir runs IREE where it shows
    the bug."""
    table = TARGETS if table is None else table
    own = table.get(entry.target)
    if isinstance(own, IreeTarget):
        return own
    seen = [n for n in entry.seen_on if isinstance(table.get(n), IreeTarget)]
    if isinstance(own, RefBackendTarget) and (entry.owner.startswith(own.backend_owner) or not seen):
        return own
    output_type = own.output_type if isinstance(own, CompiledTarget) else "linalg-on-tensors"
    dynamic = bool(getattr(own, "dynamic", False)) or entry.target.endswith("-dyn")

    def rank(name: str) -> tuple[int, int, int, str]:
        target = table[name]
        assert isinstance(target, IreeTarget)
        base = name[:-4] if name.endswith("-dyn") else name
        familiar = _PREFERRED.index(base) if base in _PREFERRED else len(_PREFERRED)
        return (target.output_type != output_type, target.dynamic != dynamic, familiar, name)

    same = [n for n, t in table.items() if isinstance(t, IreeTarget) and t.output_type == output_type]
    if not seen and not same:
        raise ValueError(f"target={entry.target!r}: no IREE target in the table lowers "
                         f"{output_type!r}; pass a table with one (see fuzz.targets.catalog.TARGETS)")
    chosen = table[min(seen or same, key=rank)]
    assert isinstance(chosen, IreeTarget)
    return chosen


# -- running a repro ----------------------------------------------------------

def run_repro(folder: Path, timeout_s: float = 600, python: str = sys.executable) -> tuple[int, str]:
    """Run ``python -I repro.py`` in ``folder``: isolated, so neither the folder
    nor PYTHONPATH can lend it dlrm-fuzz. Returns (exit code, output tail);
    124 when it ran past ``timeout_s``."""
    from fuzz.targets.devices import ensure_runtime_environment

    ensure_runtime_environment()  # Vulkan's loader wants XDG_RUNTIME_DIR
    try:
        done = subprocess.run([python, "-I", "repro.py"], cwd=folder, capture_output=True,
                              text=True, timeout=timeout_s, env=dict(os.environ))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout
        return 124, f"{out or ''}\ntimed out after {timeout_s:.0f} s"[-_OUTPUT_CHARS:]
    return done.returncode, (done.stdout + done.stderr)[-_OUTPUT_CHARS:]


def _status(entry: CorpusEntry, code: int, output: str) -> str:
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    if code == 1 and f"signature: {entry.signature}" in output:
        return "reproduces"
    if code == 2:
        cannot = next((line for line in output.splitlines() if line.startswith("cannot run")), last)
        return f"cannot run: {cannot.removeprefix('cannot run: ')[:300]}"
    return f"does not reproduce: exit {code}: {last[:300]}"


# -- writing ------------------------------------------------------------------

# Repro forms that hold one op: a bucket reproducing in one is minimal.
SINGLE_OP_FORMS = ("single-op", "export", "lowering")

# torch-mlir lowering failures: the error names the torch op it could not lower.
_LOWERING_VERDICTS = (Verdict.LOWERING_UNSUPPORTED_OP, Verdict.LOWERING_INVALID_IR,
                      Verdict.LOWERING_ERROR)


def has_single_op_form(entry: CorpusEntry) -> bool:
    """Whether ``write_repro`` tries a one-op form first: an export failure
    (the op whose own torch.export fails), a lowering failure naming the
    torch op torch-mlir could not lower, or a wrong answer localized to an op."""
    return entry.verdict is Verdict.EXPORT_ERROR or _lowers_one_op(entry) or \
        (entry.verdict is Verdict.MISMATCH and (entry.culprit or "").startswith("op:"))


def _lowers_one_op(entry: CorpusEntry) -> bool:
    """A lowering failure blamed on a named torch op (``torch.aten.gather``,
    ``torch.quantized.*``): that op alone may fail the same way."""
    return entry.verdict in _LOWERING_VERDICTS and (entry.op or "").startswith("torch.") \
        and entry.op != "torch.operator"


def write_repro(folder: Path, entry: CorpusEntry, table: dict[str, Target] | None = None,
                check: bool = True, timeout_s: float = 600) -> Repro:
    """Write ``folder/repro.py`` (and what it loads) and, with ``check``, run it:
    the single-op form when the culprit op is known and it reproduces, else
    the model form, whose status says whether it reproduces."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder={str(folder)!r}: not a folder; pass the entry's corpus folder")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s}: must be > 0")
    target = repro_target(entry, table)
    tried = ""
    if entry.verdict is Verdict.EXPORT_ERROR:
        export = _attempt(folder, entry, target, "export", check, timeout_s)
        if export is not None:
            return export
        tried = " (no single op of the model fails torch.export the same way)"
    one_op = "single-op" if entry.verdict is Verdict.MISMATCH and has_single_op_form(entry) \
        else "lowering" if _lowers_one_op(entry) else None
    if one_op is not None:
        single = _attempt(folder, entry, target, one_op, check, timeout_s)
        if single is not None and (not check or single.status == "reproduces"):
            return single
        _remove(folder, "arg*.npy")
        _remove(folder, "const*.npy")
        alone = single.status if single else f"no {entry.culprit or entry.op} alone fails so"
        tried = f" ({one_op} form: {alone})"
    model = _attempt(folder, entry, target, "model", check, timeout_s)
    assert model is not None
    if tried and model.status != "reproduces":
        return dataclasses.replace(model, status=model.status + tried)
    return model


def _attempt(folder: Path, entry: CorpusEntry, target: CompiledTarget, kind: str, check: bool,
             timeout_s: float) -> Repro | None:
    try:
        files = {"single-op": _single_op_files, "export": _export_error_files,
                 "lowering": _lowering_error_files, "model": _model_files}[kind](entry, target)
    except _ToolchainFailed as failed:
        return Repro(kind, target.name, 0, f"cannot run: {failed}", None, "")
    if files is None:
        return None
    if RUNTIME_FILE in str(files["repro.py"]):
        files[RUNTIME_FILE] = _refbackend_runtime()
    for name, data in files.items():
        _write_atomic(folder / name, data)
    lines = len(str(files["repro.py"]).splitlines())
    if not check:
        return Repro(kind, target.name, lines, "not checked", None, "")
    code, output = run_repro(folder, timeout_s)
    return Repro(kind, target.name, lines, _status(entry, code, output), code, output)


def _write_atomic(path: Path, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _remove(folder: Path, pattern: str) -> None:
    for path in folder.glob(pattern):
        path.unlink(missing_ok=True)


class _ToolchainFailed(Exception):
    """The toolchain could not give us the program to write out (export failed)."""


# -- the exported graph ---------------------------------------------------------

def _export_form(entry: CorpusEntry, target: CompiledTarget,
                 dynamic: bool | None = None) -> tuple[Any, tuple[Any, ...], Any]:
    """(module, args, dynamic-shape spec) exactly as the target exports the
    model (``fuzz.model.recipe``); ``dynamic=False``: on the first batch's
    own arrays whatever the target's shape mode (to trace real values)."""
    from fuzz.model.recipe import recipe

    sample = entry.sample
    return recipe(sample.config, sample.seed, target.dynamic if dynamic is None else dynamic,
                  sample.batches[0].flat())


def _export(entry: CorpusEntry, target: CompiledTarget) -> Any:
    """torch.export of the model exactly as the target exports it."""
    import torch

    module, args, spec = _export_form(entry, target)
    try:
        return torch.export.export(module, args, dynamic_shapes=spec)
    except Exception as exc:
        raise _ToolchainFailed(f"torch.export failed: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}"[:300]) from exc


def _state(exported: Any) -> dict[str, Any]:
    """Placeholder name -> tensor, for every parameter, buffer and lifted constant."""
    values = {}
    for spec in exported.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            source = exported.state_dict if spec.target in exported.state_dict else exported.constants
            values[spec.arg.name] = source[spec.target]
    return values


def _user_inputs(exported: Any) -> list[str]:
    return [s.arg.name for s in exported.graph_signature.input_specs if s.kind.name == "USER_INPUT"]


# -- single-op form -------------------------------------------------------------

def _single_op_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """The culprit op alone, fed the inputs it got in the eager run of batch 0."""
    exported = _export(entry, target)
    found = _find_op(exported.graph_module, str(entry.culprit).removeprefix("op:"))
    if found is None:
        return None
    node, index = found
    op = _op_module(node, index, *_captured(exported, entry, target, [node])[0][1])
    assert op is not None  # an exported graph holds no TorchScript objects
    return {**op.files, "repro.py": _single_op_script(entry, target, op)}


@dataclass(frozen=True)
class _OpModule:
    """One op as a module ``Op``: ``ARGS`` its operands (the module's
    inputs), ``CONSTS`` the arrays its TorchScript objects (packed weights,
    the module's attributes) are rebuilt from."""

    op: str
    data_lines: list[str]  # ARGS = [...] (and CONSTS = [...])
    class_lines: list[str]  # the float64 twin's _f, then class Op
    files: dict[str, str | bytes]
    operands: list[np.ndarray]
    consts: list[np.ndarray]


def _op_module(node: Any, index: int | None, args: Sequence[Any],
               kwargs: dict[str, Any]) -> _OpModule | None:
    """``node``'s op called on its captured arguments, as a module; None when
    an argument is a TorchScript object we cannot rebuild from arrays."""
    tensors: list[Any] = []
    objects: list[Any] = []
    call = _render_call(node.target, args, kwargs, tensors, objects)
    result = node.meta.get("val")
    if index is not None or isinstance(result, (tuple, list)):
        call += f"[{index or 0}]"
        result = result[index or 0] if isinstance(result, (tuple, list)) else result
    consts: list[Any] = []
    inits = [_object_init(o, consts) for o in objects]
    if None in inits:
        return None
    files, data = _operand_files(tensors)
    const_files, const_data = _operand_files(consts, "const")
    # bfloat16 operands enter as float32 (numpy and the runtimes have no
    # bfloat16 arrays) and are cast inside, exactly; a bfloat16 result leaves
    # as float32. Every float dtype the op names goes through the twin's _f.
    bf16 = [i for i, t in enumerate(tensors) if str(t.dtype) == "torch.bfloat16"]
    out = ".to(torch.float32)" if str(getattr(result, "dtype", "")) == "torch.bfloat16" else ""
    names = ", ".join(f"a{i}" for i in range(len(tensors)))
    init = ["    def __init__(self):", "        super().__init__()",
            *(f"        self.c{i} = {text}" for i, text in enumerate(inits))] if inits else []
    cls = ["class Op(torch.nn.Module):", *init, f"    def forward(self, {names}):",
           *(f"        a{i} = a{i}.to(torch.bfloat16)" for i in bf16), f"        return {call}{out}"]
    lines = ["ARGS = [", *(f"    {d}," for d in data), "]"]
    if consts:
        lines += ["CONSTS = [  # the packed weights' own arrays", *(f"    {d}," for d in const_data), "]"]
    return _OpModule(str(node.target), lines, _twin_dtypes(cls), {**files, **const_files},
                     [_array(t) for t in tensors], [_array(t) for t in consts])


def _array(tensor: Any) -> np.ndarray:
    """A tensor as the script holds it (bfloat16 as float32, exactly)."""
    tensor = tensor.detach()
    return (tensor.float() if str(tensor.dtype) == "torch.bfloat16" else tensor).contiguous().numpy()


def _object_init(obj: Any, consts: list[Any]) -> str | None:
    """Python that rebuilds a TorchScript object from plain arrays (appended
    to ``consts``): the packed weights of a dynamically quantized linear
    (qint8, per tensor, or float16), the only kind a DLRM carries; None for
    any other."""
    import torch

    try:
        weight, bias = torch.ops.quantized.linear_unpack(obj)
    except Exception:  # not a packed linear
        return None

    def const(tensor: Any) -> str:
        consts.append(tensor)
        return f"torch.from_numpy(CONSTS[{len(consts) - 1}])"

    if not weight.is_quantized:
        packed = const(weight)
        return f"torch.ops.quantized.linear_prepack_fp16({packed}, {'None' if bias is None else const(bias)})"
    if weight.qscheme() != torch.per_tensor_affine:
        return None
    quantized = (f"torch._make_per_tensor_quantized_tensor({const(weight.int_repr())}, "
                 f"{weight.q_scale()!r}, {weight.q_zero_point()!r})")
    return f"torch.ops.quantized.linear_prepack({quantized}, {'None' if bias is None else const(bias)})"


def _operand_files(tensors: Sequence[Any], prefix: str = "arg") -> tuple[dict[str, str | bytes], list[str]]:
    """Each operand as a numpy expression: a literal when small, else an
    ``<prefix><i>.npy`` beside the script. numpy has no bfloat16: such
    operands are written as float32 (exact) and the script casts them back."""
    files: dict[str, str | bytes] = {}
    data = []
    for i, tensor in enumerate(tensors):
        array = _array(tensor)
        if array.size <= INLINE_MAX_ELEMENTS:
            data.append(_literal(array))
        else:
            files[f"{prefix}{i}.npy"] = _npy(array)
            data.append(f'np.load("{prefix}{i}.npy", allow_pickle=False)')
    return files, data


def _find_op(graph_module: Any, culprit: str) -> tuple[Any, int | None] | None:
    """The first op node the culprit names (and which of its outputs, when
    the name came from a ``getitem``), as ``fuzz.triage.localize`` names them."""
    from fuzz.targets.opnames import culprit_name

    for node in graph_module.graph.nodes:
        if node.op != "call_function" or culprit_name(node) != culprit:
            continue
        if node.target is operator.getitem:
            return node.args[0], int(node.args[1])
        return node, None
    return None


def _captured(exported: Any, entry: CorpusEntry, target: CompiledTarget,
              nodes: Sequence[Any]) -> list[tuple[Any, tuple[tuple[Any, ...], dict[str, Any]]]]:
    """The real arguments each of ``nodes`` received in an eager run of batch
    0 (after the seed's weights, where they are program inputs)."""
    import torch

    from fuzz.targets.pipeline import Timer

    state = _state(exported)
    lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
    flat = [torch.from_numpy(np.ascontiguousarray(a))
            for a in [*lead, *entry.sample.batches[0].flat()]]
    inputs = [state[s.arg.name] if s.kind.name != "USER_INPUT" else flat.pop(0)
              for s in exported.graph_signature.input_specs]
    return _recorded(exported.graph_module, inputs, nodes)


def _recorded(graph_module: Any, inputs: Sequence[Any],
              nodes: Sequence[Any]) -> list[tuple[Any, tuple[tuple[Any, ...], dict[str, Any]]]]:
    """(node, (args, kwargs)) for each of ``nodes``, in their order: the real
    arguments each received when ``graph_module`` ran on ``inputs``."""
    import torch
    import torch.fx

    wanted = set(nodes)
    captured: dict[Any, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            if n in wanted:
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                captured[n] = (tuple(args), dict(kwargs))
            return super().run_node(n)

    with torch.no_grad():
        Recorder(graph_module).run(*inputs)
    return [(n, captured[n]) for n in nodes if n in captured]


def _render_call(op: Any, args: Sequence[Any], kwargs: dict[str, Any], tensors: list[Any],
                 objects: list[Any] | None = None) -> str:
    """``torch.ops.aten.x.y(a0, 0, False, ...)``: tensors become module
    inputs; TorchScript objects (packed weights), where ``objects`` collects
    them, become the module's attributes ``self.c<i>``."""
    parts = [_render(a, tensors, objects) for a in args]
    parts += [f"{k}={_render(v, tensors, objects)}" for k, v in kwargs.items()]
    return f"torch.ops.{op}({', '.join(parts)})"


def _render(value: Any, tensors: list[Any], objects: list[Any] | None = None) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return f"a{len(tensors) - 1}"
    if isinstance(value, torch.ScriptObject) and objects is not None:
        objects.append(value)
        return f"self.c{len(objects) - 1}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_render(v, tensors, objects) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, float) and not np.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return repr(value)


def _literal(array: np.ndarray) -> str:
    text = f"np.array({array.tolist()!r}, np.{array.dtype.name})"
    return text if array.ndim == 1 else f"{text}.reshape({tuple(array.shape)!r})"


def _npy(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _single_op_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    spec = ", dynamic_shapes=[{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS]" \
        if target.dynamic else ""
    lines = [
        f'"""Repro: {op.op} on {target.name} vs the same op in float64 (exit 1: bug, 0: fixed, 2: cannot run).',
        f'{entry.signature}"""',
        *_imports(target),
        f"SIGNATURE = {entry.signature!r}",
        *op.data_lines,
        *_device_lines(target),
        "",
        *op.class_lines,
        "",
        "def tensors(f64=False):",
        "    return tuple(torch.from_numpy(a).double() if f64 and a.dtype.kind == 'f' "
        "else torch.from_numpy(a) for a in ARGS)",
        "",
        "try:",
        f"    ep = torch.export.export(Op(), tensors(){spec})",
        f"    mlir = str(fx.export_and_import(ep, output_type={target.output_type!r}, func_name='main'))",
        *_compile_and_load(target, indent="    "),
        "    got = " + _host(target, _invoke(target, "*ARGS")) + ".astype(np.float64)",
        "except Exception as exc:  # not the bug this repro is about",
        "    print(f'cannot run: {type(exc).__name__}: {exc}')",
        "    sys.exit(2)",
        "with torch.no_grad():",
        "    TWIN = True",
        "    ref = Op()(*tensors(True)).numpy()",
        "    TWIN = False",
        "    e32 = Op()(*tensors()).numpy().astype(np.float64)",
        "bad = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref)) "
        "if got.shape == ref.shape else np.ones(1, bool)",
        "print(f'{bad.sum()}/{bad.size} elements off tolerance; got {got.shape}, ref64 {ref.shape}')",
        "if bad.any():",
        "    print('signature:', SIGNATURE)",
        "sys.exit(int(bad.any()))",
    ]
    return "\n".join(lines) + "\n"


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
    """The driver dlrm-fuzz runs refbackend with (fuzz/refbackend.py:
    standard library, numpy and torch-mlir only), verbatim but for its one
    import of dlrm-fuzz, the stage wrapper, whose job the script's own
    ``attempt`` does."""
    import inspect

    import fuzz.targets.refbackend

    source = inspect.getsource(fuzz.targets.refbackend)
    ours = "from fuzz.targets.pipeline import StageFailure, run_stage\n"
    assert ours in source, "fuzz/refbackend.py's imports changed: update repro._refbackend_runtime"
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


# -- export-error form ----------------------------------------------------------

def _export_error_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """For an EXPORT_ERROR: the first op of the model whose own torch.export,
    made as the target made the model's (static, or every dimension
    dynamic), fails with the stored bucket key (``oracles.classify`` and
    ``oracles.signature``, as bucketing keys it); None when no op does. The
    model is traced to ATen ops by ``make_fx``, which needs no export, on
    batch 0; ops outside ATen (quantized kernels) and ops taking packed
    weights are tried first: that is where export breaks."""
    graph, inputs = _traced(entry, target)
    candidates = [n for n in graph.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    candidates.sort(key=lambda n: not str(n.target).startswith("quantized.")
                    and not any(a.op == "get_attr" for a in n.all_input_nodes))
    for node, (args, kwargs) in _recorded(graph, inputs, candidates[:_MAX_EXPORT_CANDIDATES]):
        op = _op_module(node, None, args, kwargs)
        if op is not None and _export_fails_as_stored(entry, op, target.dynamic):
            return {**op.files, "repro.py": _export_error_script(entry, target, op)}
    return None


# Single-op exports tried per EXPORT_ERROR bucket (~0.05 s each).
_MAX_EXPORT_CANDIDATES = 60


def _traced(entry: CorpusEntry, target: CompiledTarget) -> tuple[Any, list[Any]]:
    """The model (in the target's weight form) traced to ATen by ``make_fx`` on
    batch 0, and its flat inputs; ``_ToolchainFailed`` when tracing fails."""
    import torch
    import torch.utils._pytree as pytree
    from torch.fx.experimental.proxy_tensor import make_fx

    from fuzz.model.weights import weights_as_inputs
    from fuzz.targets.pipeline import Timer

    module, args, _ = _export_form(entry, target, dynamic=False)
    if weights_as_inputs(entry.sample.config):  # traced on the seed's weights, as the target ran
        lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
        args = ([torch.from_numpy(np.ascontiguousarray(a)) for a in lead], *args[1:])
    flat, tree = pytree.tree_flatten(args)

    def call(*tensors: Any) -> Any:
        return module(*pytree.tree_unflatten(list(tensors), tree))

    try:
        with torch.no_grad():
            return make_fx(call)(*flat), flat
    except Exception as exc:
        raise _ToolchainFailed(f"torch.export failed, and so did tracing the model to find the op: "
                               f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]) \
            from exc


def _export_fails_as_stored(entry: CorpusEntry, op: _OpModule, dynamic: bool) -> bool:
    """Whether torch.export of ``op``'s module (built from the very lines the
    script holds) fails with the entry's bucket key."""
    import torch

    from fuzz.targets.pipeline import StageFailure, export

    module = _op_instance(op)
    if module is None:
        return False
    try:
        export(module, tuple(torch.from_numpy(a) for a in op.operands), _op_shapes(op, dynamic))
    except StageFailure as failed:
        return _stored_key(entry, failed.failure)
    return False


def _export_error_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    spec = ", dynamic_shapes=[{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS]" \
        if target.dynamic else ""
    lines = [
        f'"""Repro: torch.export of {op.op} alone fails as the DLRM\'s export did '
        f'({"dynamic" if target.dynamic else "static"} shapes, as {target.name} exports).',
        f"{entry.signature}",
        'Exit 1: bug present (prints the signature); 0: fixed (export passes); 2: cannot run."""',
        *_IMPORTS_RUNTIME[:-3],  # torch and numpy only
        "import tempfile",
        f"SIGNATURE = {entry.signature!r}",
        f"STAGE, FAULT = {Stage.EXPORT.value!r}, {fault_parts(entry)!r}",
        *op.data_lines,
        "",
        *op.class_lines,
        "",
        *_ATTEMPT,
        "",
        "tensors = tuple(torch.from_numpy(a) for a in ARGS)",
        f"ep = attempt('export', lambda: torch.export.export(Op(), tensors{spec}))",
        "print('export passed: fixed')",
        "sys.exit(0)",
    ]
    return "\n".join(lines) + "\n"


# -- lowering-error form --------------------------------------------------------

def _lowering_error_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes] | None:
    """For a torch-mlir lowering failure naming a torch op: the first node of
    that op in the program the target exported (with the arguments it really
    got on batch 0) whose own module, exported as the target exports (static, or every
    dimension dynamic) and lowered to the target's output type, fails with
    the stored bucket key; None when none does (an op that fails only in
    the context of the model: the model form shows it)."""
    exported = _export(entry, target)
    named = [n for n in exported.graph_module.graph.nodes
             if n.op == "call_function" and _torch_op_name(n.target) == entry.op]
    for node, (args, kwargs) in _captured(exported, entry, target, named[:_MAX_LOWERING_CANDIDATES]):
        op = _op_module(node, None, args, kwargs)
        if op is not None and _lowering_fails_as_stored(entry, op, target):
            return {**op.files, "repro.py": _lowering_error_script(entry, target, op)}
    return None


# Nodes of the named op tried per lowering bucket (~0.1-0.3 s each: export + lowering).
_MAX_LOWERING_CANDIDATES = 12


def _torch_op_name(op: Any) -> str:
    """An ATen overload as torch-mlir's dialect names it: ``aten.gather.default``
    is ``torch.aten.gather``, ``aten.to.dtype`` is ``torch.aten.to.dtype``."""
    return "torch." + str(op).removesuffix(".default")


def _op_instance(op: _OpModule) -> Any:
    """``op``'s module built from the very lines the script holds; None when
    its packed weights do not rebuild (then it cannot be the repro)."""
    import torch

    space: dict[str, Any] = {"torch": torch, "np": np, "CONSTS": op.consts}
    exec("\n".join(op.class_lines), space)  # noqa: S102  (our own generated code)
    try:
        return space["Op"]()
    except Exception:
        return None


def _op_shapes(op: _OpModule, dynamic: bool) -> Any:
    """The single op's dynamic-shape spec: every dimension, as a dynamic target exports."""
    import torch

    return [{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in op.operands] if dynamic else None


def _stored_key(entry: CorpusEntry, failure: Any) -> bool:
    """Whether a stage failure keys to the entry's bucket, as bucketing keys it."""
    from oracles.classify import classify
    from oracles.signature import error_key

    verdict, line, blamed = classify(failure)
    return error_key(verdict, entry.owner, blamed, line) == entry.signature


def _lowering_fails_as_stored(entry: CorpusEntry, op: _OpModule, target: CompiledTarget) -> bool:
    """Whether ``op``'s module exports and then fails torch-mlir's lowering to
    the target's output type with the entry's bucket key."""
    import torch

    from fuzz.targets.pipeline import StageFailure, export, lower

    module = _op_instance(op)
    if module is None:
        return False
    try:
        exported = export(module, tuple(torch.from_numpy(a) for a in op.operands),
                          _op_shapes(op, target.dynamic))
        lower(exported, target.output_type)
    except StageFailure as failed:
        return failed.stage is Stage.IMPORT and _stored_key(entry, failed.failure)
    return False


def _lowering_error_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule) -> str:
    spec = ", dynamic_shapes=[{d: torch.export.Dim.AUTO for d in range(a.ndim)} for a in ARGS]" \
        if target.dynamic else ""
    lines = [
        f'"""Repro: torch-mlir lowers {op.op} alone to {target.output_type} and fails as the '
        f'DLRM did ({"dynamic" if target.dynamic else "static"} shapes, as {target.name} exports).',
        f"{entry.signature}",
        'Exit 1: bug present (prints the signature); 0: fixed (lowering passes); 2: cannot run."""',
        *_IMPORTS_RUNTIME[:-2],  # torch, numpy and torch-mlir's FX importer only
        "import tempfile",
        f"SIGNATURE = {entry.signature!r}",
        f"STAGE, FAULT = {Stage.IMPORT.value!r}, {fault_parts(entry)!r}",
        *op.data_lines,
        "",
        *op.class_lines,
        "",
        *_ATTEMPT,
        "",
        "tensors = tuple(torch.from_numpy(a) for a in ARGS)",
        f"ep = attempt('export', lambda: torch.export.export(Op(), tensors{spec}))",
        f"mlir = attempt('import', lambda: str(fx.export_and_import(ep, output_type={target.output_type!r}, "
        "func_name='main')))",
        "print('lowering passed: fixed')",
        "sys.exit(0)",
    ]
    return "\n".join(lines) + "\n"


# -- model form -----------------------------------------------------------------

def _model_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes]:
    """The exported ATen graph as a plain function, its state in params.npz."""
    import io

    exported = _export(entry, target)
    state = _state(exported)
    buffer = io.BytesIO()
    # numpy has no bfloat16: such state is stored as float32 (exact) and the
    # script converts it back.
    bf16 = sorted(k for k, v in state.items() if str(v.dtype) == "torch.bfloat16")
    np.savez(buffer, **{k: (v.float() if k in bf16 else v).detach().contiguous().numpy()
                        for k, v in state.items()})
    files: dict[str, str | bytes] = {"params.npz": buffer.getvalue(),
                                     "inputs.npz": entry.sample.npz_bytes()}
    from fuzz.targets.pipeline import Timer

    lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
    if lead:  # the weights are program inputs: the program takes them before each batch
        weights = io.BytesIO()
        arrays: dict[str, Any] = {f"w{i}": a for i, a in enumerate(lead)}
        np.savez(weights, **arrays)
        files["weights.npz"] = weights.getvalue()
    files["repro.py"] = _model_script(entry, target, _graph_code(exported), _user_inputs(exported),
                                      bf16)
    return files


def _graph_code(exported: Any) -> list[str]:
    """``forward``'s body as a function ``dlrm`` of state then inputs, without
    fx's ``x = None`` clean-ups."""
    code = exported.graph_module.code.strip().splitlines()
    header = code[0].replace("def forward(self, ", "def dlrm(")
    text = "\n".join(code)
    names = [line for word, line in (("device", "from torch import device"), ("inf", "inf = float('inf')"),
                                     ("nan", "nan = float('nan')"))
             if re.search(rf"\b{word}\b", text)]
    body = [re.sub(r";\s+[\w\s=]+= None$", "", line.rstrip()) for line in code[1:]]
    return [*names, *_twin_dtypes([header, *(line for line in body if line.strip())])]


def _twin_dtypes(code: list[str]) -> list[str]:
    """``code`` with every float dtype it names read through ``_f``, and ``_f``
    defined before it. A low-precision program names its float dtypes (the
    casts at its edges, torch.export's _assert_tensor_metadata checks of
    them, an op's dtype argument): through _f, the float64 twin the judge
    runs (with ``TWIN`` set) computes them in float64 instead of failing
    "Tensor dtype mismatch! Expected: Float, Got: double"."""
    twin = ["TWIN = False  # True while the float64 twin runs: its float dtypes are float64",
            "def _f(dtype):", "    return torch.float64 if TWIN else dtype"]
    return [*twin, *(_FLOAT_DTYPE.sub(r"_f(torch.\1)", line) for line in code)]


_FLOAT_DTYPE = re.compile(r"\btorch\.(float16|bfloat16|float32|float64|half|float)\b(?!\w|\()")


def _model_script(entry: CorpusEntry, target: CompiledTarget, graph: list[str], inputs: list[str],
                  bf16: Sequence[str] = ()) -> str:
    config = entry.sample.config
    stage = Stage.parse(str(entry.stage))
    error = entry.verdict is not Verdict.MISMATCH
    needs_iree = not error or stage in (Stage.COMPILE, Stage.RUN)
    lines = [
        f'"""Repro: the shrunk DLRM as plain PyTorch (torch.export -> torch-mlir {target.output_type}'
        + (f" -> {_backend_words(target)}" if needs_iree else "") + ").",
        f"{entry.signature}",
        'Exit 1: bug present (prints the signature); 0: fixed; 2: cannot run."""',
        *_imports(target, needs_iree),
        "import tempfile",
        f"SIGNATURE = {entry.signature!r}",
        f"STAGE, FAULT = {(stage.value if error else None)!r}, {fault_parts(entry) if error else []!r}",
        *_crash_supervisor(entry),
        "P = np.load('params.npz', allow_pickle=False)",
        "X = np.load('inputs.npz', allow_pickle=False)",
        *_lead_lines(config),
        f"T = {config.num_tables}",
        *_batches_lines(config),
        *(_device_lines(target, read_back=not error) if needs_iree else []),
        "",
        *graph,
        "",
        "class Model(torch.nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        "        for name in P.files:  # parameters stay parameters: torch-mlir imports them otherwise",
        "            tensor = torch.from_numpy(P[name])",
        *([f"            tensor = tensor.to(torch.bfloat16) if name in {list(bf16)!r} else tensor"]
          if bf16 else []),
        "            if name.startswith('p_'):",
        "                self.register_parameter(name, torch.nn.Parameter(tensor))",
        "            else:",
        "                self.register_buffer(name, tensor)",
        "",
        f"    def forward(self, {', '.join(inputs)}):",
        f"        return dlrm(*(getattr(self, name) for name in P.files), {', '.join(inputs)})[0]",
        "",
        *_ATTEMPT,
        "",
        "model = Model().eval()",
        *_with_lead(_export_lines(entry, target), target.dynamic),
        f"mlir = attempt('import', lambda: str(fx.export_and_import(ep, output_type={target.output_type!r}, "
        "func_name='main')))",
    ]
    if error and stage in (Stage.EXPORT, Stage.IMPORT):
        lines += ["print(f'{STAGE} passed: fixed')", "sys.exit(0)"]
        return "\n".join(lines) + "\n"
    if isinstance(target, RefBackendTarget):  # compiling builds the callable: nothing to load
        lines += ["ctx = attempt('compile', lambda: RefBackendModule(mlir))"]
    else:
        compile_lines = _compile_and_load(target, indent="")
        compile_call = compile_lines[-3].replace("ireec.compile_str(", "attempt('compile', lambda: ireec.compile_str(")
        lines += [*compile_lines[:-3], compile_call + ")"]
    if error and stage is Stage.COMPILE:
        lines += ["print('compile passed: fixed')", "sys.exit(0)"]
        return "\n".join(lines) + "\n"
    if isinstance(target, IreeTarget):
        lines += [
            "try:",
            "    " + compile_lines[-2],
            "except Exception as exc:",
            f"    print(f'cannot run: no usable {target.driver} device: {{exc}}')",
            "    sys.exit(2)",
            compile_lines[-1].replace("ctx.add_vm_module(", "attempt('run', lambda: ctx.add_vm_module(") + ")",
        ]
    if not target.dynamic:
        lines += ["BATCHES = [b for b in BATCHES if [a.shape for a in b] == [a.shape for a in BATCHES[0]]]"]
    if error:
        lines += ["for inputs in BATCHES:",
                  f"    attempt('run', lambda: {_invoke(target, '*LEAD, *inputs')})",
                  "print('run passed: fixed')", "sys.exit(0)"]
        return "\n".join(lines) + "\n"
    from oracles.compare import Tolerance

    scale = Tolerance().for_precision(config.dtype, entry.sample.reduction_length()).scale
    return "\n".join(lines + _judge_lines(target, scale)) + "\n"


def _batches_lines(config: Any) -> list[str]:
    """``BATCHES``: each batch of inputs.npz (canonical per-table arrays) laid
    out as the model takes it (``fuzz.model.sample.Batch.flat``), in plain numpy."""
    if config.input_layout == "lists" and not config.include_last_offset \
            and not config.per_sample_weights:
        return ["BATCHES = [[X[f'b{b}_dense'], *(X[f'b{b}_offsets{k}'] for k in range(T)), "
                "*(X[f'b{b}_indices{k}'] for k in range(T))] for b in range(len(X.files) // (1 + 2 * T))]"]
    per_batch = 3 if config.per_sample_weights else 2
    lines = [
        f"W, LAST, LAYOUT = {config.per_sample_weights!r}, {config.include_last_offset!r}, "
        f"{config.input_layout!r}",
        "def laid_out(b):",
        "    d = X[f'b{b}_dense']",
        "    idx = [X[f'b{b}_indices{k}'] for k in range(T)]",
        "    off = [np.append(X[f'b{b}_offsets{k}'], len(i)).astype(i.dtype) if LAST "
        "else X[f'b{b}_offsets{k}'] for k, i in enumerate(idx)]",
        "    w = [X[f'b{b}_weights{k}'] for k in range(T)] if W else []",
        "    if LAYOUT == 'stacked':",
        "        return [d, np.stack(off), np.stack(idx), *([np.stack(w)] if W else [])]",
        "    if LAYOUT == 'fixed':",
        "        return [d, *(i.reshape(len(d), -1) for i in idx), *(x.reshape(len(d), -1) for x in w)]",
        "    return [d, *off, *idx, *w]",
        f"BATCHES = [laid_out(b) for b in range(len(X.files) // (1 + {per_batch} * T))]",
    ]
    return lines


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
        "        TWIN = True",
        "        ref = twin(*(torch.from_numpy(a).double() if a.dtype.kind == 'f' else torch.from_numpy(a) "
        "for a in [*LEAD, *inputs])).numpy()",
        "        TWIN = False",
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


def _export_lines(entry: CorpusEntry, target: CompiledTarget) -> list[str]:
    """torch.export the way the target did: static on batch 0, or dynamic
    (one batch dim, an index count per table) from a size-2 tracing example."""
    if not target.dynamic:
        return ["example = tuple(map(torch.from_numpy, BATCHES[0]))",
                "ep = attempt('export', lambda: torch.export.export(model, example))"]
    config = entry.sample.config
    if config.input_layout != "lists" or config.include_last_offset or config.per_sample_weights:
        return _general_export_lines(config)
    return [
        f"IDX = np.{np.dtype(config.index_dtype).name}",
        f"example = (torch.zeros(2, {config.num_dense}), *[torch.from_numpy(np.array([0, 1], IDX))] * T, "
        "*[torch.from_numpy(np.zeros(2, IDX))] * T)",
        "batch = torch.export.Dim('batch', min=1, max=2**20)",
        "spec = ({0: batch}, *[{0: batch}] * T, "
        "*({0: torch.export.Dim(f'indices_{k}', min=0, max=2**24)} for k in range(T)))",
        "ep = attempt('export', lambda: torch.export.export(model, example, dynamic_shapes=spec))",
    ]


def _lead_lines(config: Any) -> list[str]:
    """``LEAD``: the arrays the program takes before each batch (the weights,
    when the case exported them as inputs; see fuzz/weights.py)."""
    from fuzz.model.weights import weights_as_inputs

    if not weights_as_inputs(config):
        return ["LEAD = []  # the weights are constants inside the program"]
    return ["W = np.load('weights.npz', allow_pickle=False)",
            "LEAD = [W[f'w{i}'] for i in range(len(W.files))]  # the weights are program inputs"]


def _with_lead(lines: list[str], dynamic: bool) -> list[str]:
    """The export lines with ``LEAD`` prepended to the example (static in
    every dimension) just before ``torch.export`` is called."""
    extra = ["example = (*map(torch.from_numpy, LEAD), *example)"]
    if dynamic:
        extra.append("spec = (*[None] * len(LEAD), *spec)")
    return [*lines[:-1], *extra, lines[-1]]


def _general_export_lines(config: Any) -> list[str]:
    """The dynamic export of ``fuzz.model.dlrm.dynamic_shapes`` for the layouts,
    B+1 offsets and per-sample weights, flattened to the script's flat inputs."""
    from fuzz.model.dlrm import tracing_example

    lines = ["TRACE = [", *(f"    {_literal(a)}," for a in tracing_example(config)), "]",
             "example = tuple(map(torch.from_numpy, TRACE))",
             "Dim = torch.export.Dim",
             "batch = Dim('batch', min=1, max=2**20)",
             f"OFF = batch + 1 if {config.include_last_offset!r} else batch",
             f"W = {config.per_sample_weights!r}"]
    if config.input_layout == "stacked":
        lines += ["count = Dim('indices', min=0, max=2**24)",
                  "spec = ({0: batch}, {1: OFF}, {1: count}, *([{1: count}] if W else []))"]
    elif config.input_layout == "fixed":
        lines += ["lengths = [Dim(f'bag_{k}', min=1, max=2**16) for k in range(T)]",
                  "spec = ({0: batch}, *({0: batch, 1: n} for n in lengths), "
                  "*(({0: batch, 1: n} for n in lengths) if W else ()))"]
    else:
        lines += ["counts = [Dim(f'indices_{k}', min=0, max=2**24) for k in range(T)]",
                  "spec = ({0: batch}, *({0: OFF} for _ in counts), *({0: c} for c in counts), "
                  "*(({0: c} for c in counts) if W else ()))"]
    return lines + ["ep = attempt('export', lambda: torch.export.export(model, example, "
                    "dynamic_shapes=spec))"]


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


def hang_limit_s(entry: CorpusEntry) -> float | None:
    """The seconds a TIMEOUT entry's stage got before the fuzzer killed it
    (the worker pool's "no answer within Ns" message), else None."""
    if entry.verdict is not Verdict.TIMEOUT:
        return None
    found = re.search(r"no answer within ([0-9.]+)s", entry.error or "")
    return float(found.group(1)) if found else 120.0


def fault_parts(entry: CorpusEntry) -> list[str]:
    """The literal words of the entry's normalized first error line (from its
    signature), in order, with the placeholders the normalizer put in cut out:
    the fault is present when the toolchain's text contains them all in order."""
    what = entry.signature.split("|", 2)[-1]
    if entry.op and what.startswith(f"{entry.op}|"):
        what = what[len(entry.op) + 1:]
    crashed = _COMPILER_CRASH.fullmatch(what)
    if crashed:  # the key's words are ours; the tool's own text has these
        name, function, source, assertion = crashed.groups()
        code = f"Error code: -{signal.Signals[name].value}" if name in signal.Signals.__members__ \
            else None
        return [part for part in (code, "Stack dump:" if function else None, function, source,
                                  assertion) if part]
    return [part.strip() for part in _PLACEHOLDER.split(what) if part.strip()]


# oracles.classify.compiler_crash_line's form, read back into the words the
# compiler printed ("Error code: -8", the frame's function and source file).
_COMPILER_CRASH = re.compile(r"iree-compile crashed \((SIG\w+|[^)]*)\)"
                             r"(?: in ([\w:]+)(?: \(([\w.]+)\))?)?(?:: assertion `(.*)' failed)?")

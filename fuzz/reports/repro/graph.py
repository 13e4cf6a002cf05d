"""The program a repro is cut from: the model exported exactly as the target
exports it (``fuzz.model.recipe``), its state, the real arguments each op got
on batch 0, and one op of it rendered as a module ``Op`` whose operands are
plain arrays (packed quantized weights rebuilt from theirs). Every one-op
form (single-op, export, lowering) is built from these pieces."""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from fuzz.reports.repro.core import _ToolchainFailed, fault_parts
from fuzz.reports.repro.script import _target_slots, _twin_dtypes
from fuzz.reports.repro.template import fill
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget
from oracles.results import Stage
from fuzz.targets.opnames import culprit_name
from fuzz.targets.pipeline import StageFailure, Timer
from oracles.classify import classify
from oracles.signature import error_key

# Arrays up to this size are written into the script; larger ones beside it.
INLINE_MAX_ELEMENTS = 64


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

    from fuzz.model.recipe import call_args

    state = _state(exported)
    lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
    flat = [torch.from_numpy(np.ascontiguousarray(a))
            for a in call_args(lead, entry.sample.batches[0].flat())]
    inputs = [state[s.arg.name] if s.kind.name != "USER_INPUT" else flat.pop(0)
              for s in exported.graph_signature.input_specs]
    return _recorded(exported.graph_module, inputs, nodes)


def _recorded(graph_module: Any, inputs: Sequence[Any],
              nodes: Sequence[Any]) -> list[tuple[Any, tuple[tuple[Any, ...], dict[str, Any]]]]:
    """(node, (args, kwargs)) for each of ``nodes``, in their order: the real
    arguments each received when ``graph_module`` ran on ``inputs``;
    ``_ToolchainFailed`` when that run fails (the exported program of a
    road, its dimensions made automatic, may not run on its own input)."""
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

    try:
        with torch.no_grad():
            Recorder(graph_module).run(*inputs)
    except Exception as exc:  # the exported program fails on the input it was exported on
        raise _ToolchainFailed(f"the exported program does not run on batch 0: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}"[:300]) from exc
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


def _traced(entry: CorpusEntry, target: CompiledTarget) -> tuple[Any, list[Any]]:
    """The model (in the target's weight form) traced to ATen by ``make_fx`` on
    batch 0, and its flat inputs; ``_ToolchainFailed`` when tracing fails."""
    import torch
    import torch.utils._pytree as pytree
    from torch.fx.experimental.proxy_tensor import make_fx

    from fuzz.model.recipe import eager_args

    module, _, _ = _export_form(entry, target, dynamic=False)
    sample = entry.sample  # traced on the seed's weights, as the target ran
    flat, tree = pytree.tree_flatten(eager_args(sample.config, sample.seed, sample.batches[0].flat()))

    def call(*tensors: Any) -> Any:
        return module(*pytree.tree_unflatten(list(tensors), tree))

    try:
        with torch.no_grad():
            return make_fx(call)(*flat), flat
    except Exception as exc:
        raise _ToolchainFailed(f"torch.export failed, and so did tracing the model to find the op: "
                               f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]) \
            from exc


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


def _op_fails_as_stored(entry: CorpusEntry, op: _OpModule, stage: Stage | None,
                        attempt: Callable[[Any, tuple[Any, ...]], object]) -> bool:
    """Whether ``attempt(module, operands)`` on ``op``'s module (built from
    the very lines the script holds) and its operands as tensors fails at
    ``stage`` (any, with None) with the entry's bucket key: the test every
    one-op form puts its op to."""
    import torch

    module = _op_instance(op)
    if module is None:
        return False
    try:
        attempt(module, tuple(torch.from_numpy(a) for a in op.operands))
    except StageFailure as failed:
        return (stage is None or failed.stage is stage) and _stored_key(entry, failed.failure)
    return False


# Ops with no computation of their own (checks, views, symbolic sizes): never
# the one op a one-op form is looking for.
_INERT = ("aten._assert", "aten._functional_assert", "aten.sym_", "aten.lift_fresh_copy",
          "aten.detach", "aten.alias", "aten.view", "aten.clone")


def _op_kinds(graph_module: Any) -> list[Any]:
    """One node per op kind (op and operand dtypes) of ``graph_module``, in
    graph order: dispatcher ops only (a dynamic graph's symbolic arithmetic,
    ``operator.mul`` of sizes, is no op a module can call), taking a tensor
    and returning one, inert ones left out; the candidates the backend and
    road one-op forms order their own way."""
    import torch

    seen: set[tuple[str, tuple[str, ...]]] = set()
    kinds = []
    for node in graph_module.graph.nodes:
        name = str(node.target)
        if node.op != "call_function" or not hasattr(node.target, "_schema") or name.startswith(_INERT):
            continue
        types = tuple(str(getattr(a.meta.get("val"), "dtype", "")).removeprefix("torch.")
                      for a in node.all_input_nodes)
        result = node.meta.get("val")
        first = result[0] if isinstance(result, (tuple, list)) and result else result
        # A module of the op alone takes tensors and returns one.
        if not isinstance(first, torch.Tensor) or not any(types):
            continue
        if (name, types) not in seen:
            seen.add((name, types))
            kinds.append(node)
    return kinds


def _first_failing(pairs: Iterable[tuple[Any, tuple[Sequence[Any], dict[str, Any]]]],
                   fails: Callable[[_OpModule], bool], seconds: float | None = None) -> _OpModule | None:
    """The first node of ``pairs`` (node, its recorded arguments) whose own
    module ``fails`` as stored, within ``seconds`` (None: no cap): the search
    every one-op form makes."""
    ends = float("inf") if seconds is None else time.monotonic() + seconds
    for node, (args, kwargs) in pairs:
        if time.monotonic() > ends:
            return None
        op = _op_module(node, None, args, kwargs)
        if op is not None and fails(op):
            return op
    return None


def _stored_key(entry: CorpusEntry, failure: Any) -> bool:
    """Whether a stage failure keys to the entry's bucket, as bucketing keys it."""

    verdict, line, blamed = classify(failure)
    return error_key(verdict, entry.owner, blamed, line) == entry.signature


def _op_failure_script(entry: CorpusEntry, target: CompiledTarget, op: _OpModule, *, title: str,
                       stage: Stage, lower: bool, passed: str, backend: bool = False) -> str:
    """A one-op script (``templates/op_failure.py``) that exits 1 while
    ``stage`` fails on ``op``'s module with the entry's fault, 0 once it
    passes: the export form, with ``lower`` the lowering form, with
    ``backend`` too the backend form (IREE compiles it; ``title`` says what
    fails, ``passed`` what passing means)."""
    return fill("op_failure", {
        **_target_slots(target, backend=backend), "fx": lower, "stages": True, "lower": lower,
        "title": title, "shapes": "dynamic" if target.dynamic else "static", "passed": passed,
        "signature": entry.signature, "stage": stage.value, "fault": fault_parts(entry),
        "data": op.data_lines, "op_class": op.class_lines})

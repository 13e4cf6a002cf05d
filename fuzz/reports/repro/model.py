"""The model form, for every other case and whenever a one-op form does not
reproduce: the shrunk DLRM written out as plain PyTorch from its exported
ATen graph (weights in ``params.npz``, program-input weights in
``weights.npz``), exported, lowered, compiled and run with the target's own
flags, judged per batch against a float64 twin."""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from fuzz.reports.repro.core import fault_parts
from fuzz.reports.repro.graph import _export, _literal, _state, _user_inputs
from fuzz.reports.repro.script import (
    _ATTEMPT,
    _backend_words,
    _compile_and_load,
    _crash_supervisor,
    _device_lines,
    _imports,
    _invoke,
    _judge_lines,
    _twin_dtypes,
)
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget, IreeTarget, RefBackendTarget
from oracles.results import Stage
from oracles.verdict import Verdict


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

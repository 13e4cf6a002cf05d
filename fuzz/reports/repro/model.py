"""The model form, for every other case and whenever a one-op form does not
reproduce: the shrunk DLRM written out as plain PyTorch from its exported
ATen graph (weights in ``params.npz``, program-input weights in
``weights.npz``), exported, lowered, compiled and run with the target's own
flags, judged per batch against a float64 twin (``templates/model.py``,
its sections picked here)."""

from __future__ import annotations

import re
from typing import Any, Sequence, get_args

import numpy as np

from fuzz.model.config import InputLayout, weights_as_inputs
from fuzz.reports.repro.core import fault_parts, hang_limit_s
from fuzz.reports.repro.graph import _export, _literal, _state, _user_inputs
from fuzz.reports.repro.script import _backend_words, _target_slots, _twin_dtypes
from fuzz.reports.repro.template import fill
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget
from oracles.compare import Tolerance
from oracles.results import Stage
from oracles.verdict import Verdict
from fuzz.targets.pipeline import Timer


def _model_files(entry: CorpusEntry, target: CompiledTarget) -> dict[str, str | bytes]:
    """The exported ATen graph as a plain function, its state in params.npz."""
    exported = _export(entry, target)
    files = _program_files(entry, target, exported)
    bf16 = _bf16_state(exported)
    files["repro.py"] = _model_script(entry, target, _graph_code(exported), _user_inputs(exported),
                                      bf16)
    return files


def _bf16_state(exported: Any) -> list[str]:
    """The state stored as float32 in params.npz that the model holds in bfloat16."""
    return sorted(k for k, v in _state(exported).items() if str(v.dtype) == "torch.bfloat16")


def _program_files(entry: CorpusEntry, target: CompiledTarget,
                   exported: Any) -> dict[str, str | bytes]:
    """What ``model_program.py`` loads: params.npz, inputs.npz, weights.npz."""
    import io

    state = _state(exported)
    buffer = io.BytesIO()
    # numpy has no bfloat16: such state is stored as float32 (exact) and the
    # script converts it back.
    bf16 = _bf16_state(exported)
    np.savez(buffer, **{k: (v.float() if k in bf16 else v).detach().contiguous().numpy()
                        for k, v in state.items()})
    files: dict[str, str | bytes] = {"params.npz": buffer.getvalue(),
                                     "inputs.npz": entry.sample.npz_bytes()}

    lead = target.leading_inputs(entry.sample.config, entry.sample.seed, Timer())
    if lead:  # the weights are program inputs: the program takes them before each batch
        weights = io.BytesIO()
        arrays: dict[str, Any] = {f"w{i}": a for i, a in enumerate(lead)}
        np.savez(weights, **arrays)
        files["weights.npz"] = weights.getvalue()
    return files


def _model_script(entry: CorpusEntry, target: CompiledTarget, graph: list[str], inputs: list[str],
                  bf16: Sequence[str] = ()) -> str:
    """``templates/model.py`` filled: the stages the verdict needs, on the
    target's backend, with the case's layout, weights and shape mode."""
    return fill("model", _model_slots(entry, target, graph, inputs, bf16))


def _model_slots(entry: CorpusEntry, target: CompiledTarget, graph: list[str], inputs: list[str],
                 bf16: Sequence[str] = ()) -> dict[str, object]:
    """The model form's slots (``templates/model.py`` and its part
    ``model_program.py``, which the road form shares)."""
    config = entry.sample.config
    stage = Stage.parse(str(entry.stage))
    error = entry.verdict is not Verdict.MISMATCH
    lowering = error and stage in (Stage.EXPORT, Stage.IMPORT)  # fails before a backend is needed
    at_compile = error and stage is Stage.COMPILE
    plain = config.input_layout == "lists" and not config.include_last_offset and not config.per_sample_weights
    names = ", ".join(inputs)
    slots: dict[str, object] = {
        **_target_slots(target, not lowering), **_supervisor_slots(entry), "stages": True,
        "backend_words": "" if lowering else f" -> {_backend_words(target)}",
        "signature": entry.signature, "stage": stage.value if error else None,
        "fault": fault_parts(entry) if error else [], "read_back": not error,
        "weights_inputs": weights_as_inputs(config), "weights_inline": not weights_as_inputs(config),
        "tables": config.num_tables, "plain_batches": plain, "laid_out": not plain,
        "bag_weights": config.per_sample_weights, "last_offset": config.include_last_offset,
        "layout": config.input_layout, "bf16": bool(bf16), "bf16_names": list(bf16), "graph": graph,
        "forward": [f"def forward(self, {names}):",
                    f"    return dlrm(*(getattr(self, name) for name in P.files), {names})[0]"],
        "dynamic_lists": target.dynamic and plain, "dynamic_general": target.dynamic and not plain,
        "compiles": not lowering, "runs": not lowering and not at_compile, "judges": not error,
        "fails_at_run": error and not lowering and not at_compile, "fails": error,
        "stops_after_import": lowering, "stops_after_compile": at_compile}
    if target.dynamic and plain:
        slots.update(index_dtype=np.dtype(config.index_dtype).name, num_dense=config.num_dense)
    if target.dynamic and not plain:
        from fuzz.model.dlrm import tracing_example

        slots["trace"] = ["TRACE = [", *(f"    {_literal(a)}," for a in tracing_example(config)), "]"]
    for layout in get_args(InputLayout):  # a section per layout
        slots[layout] = config.input_layout == layout
    scale = 0.0 if error else Tolerance().for_precision(config.dtype, entry.sample.reduction_length()).scale
    slots.update(scale=scale, scaled=bool(scale), unscaled=not scale)
    return slots


def _supervisor_slots(entry: CorpusEntry) -> dict[str, object]:
    """For a CRASH or TIMEOUT bucket: the script re-runs itself in a child
    process and exits 1 when the child dies of the bucket's signal, or is still
    busy after the time the fuzzer gave it (a process can report neither its
    own segfault nor its own hang)."""
    number = entry.numbers.get("signal") if isinstance(entry.numbers, dict) else None
    crash = entry.verdict is Verdict.CRASH and isinstance(number, int)
    limit = hang_limit_s(entry)
    hang = not crash and limit is not None
    return {"crash": crash, "hang": hang, "supervised": crash or hang,
            **({"crash_signal": number} if crash else {}), **({"hang_s": limit} if hang else {})}


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



"""The single-op form of a wrong answer localized to an op: that op alone, fed
the inputs it really got on batch 0, compiled and run the way the target
did, and judged against the same op in float64 (a float64 twin computes the
dtypes the op names in float64)."""

from __future__ import annotations

from fuzz.reports.repro.graph import _captured, _export, _find_op, _op_module, _OpModule
from fuzz.reports.repro.script import _compile_and_load, _device_lines, _host, _imports, _invoke
from fuzz.store.corpus import CorpusEntry
from fuzz.targets.catalog import CompiledTarget


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
        "    twin_mode(True)",
        "    ref = Op()(*tensors(True)).numpy()",
        "    twin_mode(False)",
        "    e32 = Op()(*tensors()).numpy().astype(np.float64)",
        "bad = ~(np.abs(got - ref) <= 1e-5 + 1e-4 * np.abs(ref) + 8 * np.abs(e32 - ref)) "
        "if got.shape == ref.shape else np.ones(1, bool)",
        "print(f'{bad.sum()}/{bad.size} elements off tolerance; got {got.shape}, ref64 {ref.shape}')",
        "if bad.any():",
        "    print('signature:', SIGNATURE)",
        "sys.exit(int(bad.any()))",
    ]
    return "\n".join(lines) + "\n"

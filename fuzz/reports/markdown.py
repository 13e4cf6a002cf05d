"""Upstream-ready words for the corpus: ``REPORT.md`` for one bucket (paste it
into a torch-mlir, IREE or PyTorch issue) and the digest of a whole corpus
(``dlrm-fuzz report``: Markdown for a PR comment, JSON for tools).

Pure text from what a corpus folder already holds (the typed entry, the
standalone ``repro.py``, the tool files and their commands): no compiler runs
here. Who to file against follows the bucket's owner (``oracles.blame``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from fuzz.store.corpus import CorpusEntry
from oracles.verdict import Verdict

__all__ = ["Upstream", "upstream_of", "report_markdown", "digest_markdown", "digest_json",
           "REPORT_NAME"]

REPORT_NAME = "REPORT.md"
_EXCERPT_LINES = 12


@dataclass(frozen=True)
class Upstream:
    """Where a bug is filed: the project, its repository and the component."""

    project: str
    repository: str
    component: str


_TORCH_MLIR_COMPONENTS = {
    "torch": "the FX importer and torch backend contract (decompositions, torch-dialect passes)",
    "linalg-on-tensors": "the Linalg lowering (TorchToLinalg)",
    "tosa": "the TOSA lowering (TorchToTosa)",
    "stablehlo": "the StableHLO lowering (TorchToStablehlo)",
    "refbackend": "the reference backend (RefBackend)",
}


def upstream_of(entry: CorpusEntry) -> Upstream:
    """The project and component a bucket's owner names."""
    owner = entry.owner
    if owner == "torch.export":
        return Upstream("PyTorch", "pytorch/pytorch", "torch.export")
    if owner.startswith("pytorch"):
        return Upstream("PyTorch", "pytorch/pytorch", "eager kernels (float32)")
    if owner.startswith("torch-mlir:"):
        part = owner.split(":", 1)[1]
        return Upstream("torch-mlir", "llvm/torch-mlir",
                        _TORCH_MLIR_COMPONENTS.get(part, part))
    if owner.startswith("iree:"):
        backend = owner.split(":", 1)[1]
        input_type = re.search(r"\((\w[\w-]*) input\)", backend)
        backend = backend.split("(")[0]
        if entry.stage == "run" and entry.verdict is not Verdict.MISMATCH:
            return Upstream("IREE", "iree-org/iree", f"the runtime's HAL driver for {backend}")
        if input_type:
            return Upstream("IREE", "iree-org/iree",
                            f"the {input_type.group(1)} input conversion, then the {backend} backend")
        return Upstream("IREE", "iree-org/iree", f"the {backend} compiler backend (codegen)")
    return Upstream(owner, owner, owner)


def _what(entry: CorpusEntry) -> str:
    if entry.verdict is Verdict.MISMATCH:
        op = (entry.culprit or "").split(":", 1)[-1] or "the program"
        return f"wrong results (no error) from {op}"
    return entry.error.strip() or entry.verdict.value


def title(entry: CorpusEntry) -> str:
    """A one-line issue title: the upstream project to file with, and what goes wrong."""
    up = upstream_of(entry)
    return f"[{up.project}] {_what(entry)}"[:200]


def _expected_vs_got(entry: CorpusEntry) -> list[str]:
    numbers = entry.numbers
    if entry.verdict is not Verdict.MISMATCH:
        return [f"- Expected: {entry.stage} succeeds (eager PyTorch runs this program).",
                f"- Got: `{entry.error.strip()}`"]
    lines = ["The DLRM sample the fuzzer stored (the minimal program below isolates the op):",
             f"- Expected (eager PyTorch, float64): {numbers.get('expected', '?')}",
             f"- Got: {numbers.get('got', '?')}"]
    if "first_bad_index" in numbers:
        lines.append(f"- First wrong element {numbers['first_bad_index']}: got "
                     f"{numbers.get('first_bad_got')}, expected {numbers.get('first_bad_expected')}; "
                     f"{numbers.get('bad_elements')}/{numbers.get('elements')} elements off, "
                     f"max abs error {numbers.get('max_abs_error')}")
    return lines


def _excerpt(folder: Path, entry: CorpusEntry) -> str:
    """The MLIR lines that matter: the error diagnostics, or the culprit's lowering."""
    text = entry.detail or ""
    errors = [line for line in text.splitlines() if "error:" in line]
    if errors:
        return "\n".join(errors[:_EXCERPT_LINES])
    op = (entry.culprit or "").split(":", 1)[-1].split("[")[0].split(".")[1:2]
    for program in sorted(folder.glob("*.mlir")):
        lines = program.read_text(errors="replace").splitlines()
        hits = [i for i, line in enumerate(lines) if op and op[0] in line]
        if hits:
            start = max(hits[0] - 2, 0)
            return "\n".join(lines[start:start + _EXCERPT_LINES])
    return ""


def report_markdown(folder: Path, entry: CorpusEntry, repro: dict[str, Any] | None = None,
                    tools: dict[str, Any] | None = None) -> str:
    """REPORT.md for one bucket: what a maintainer needs, nothing of dlrm-fuzz's internals."""
    up = upstream_of(entry)
    versions = ", ".join(f"{name} {entry.tool_versions.get(name, '?')}" for name in
                         ("torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime"))
    out = [f"# {title(entry)}", "",
           f"- File against: **{up.project}** ({up.repository}), {up.component}",
           f"- Tool versions: {versions}",
           *([f"- IREE build: {entry.tool_versions['iree-compile --version']}"]
             if "iree-compile --version" in entry.tool_versions else []),
           f"- Seen on: {', '.join(entry.seen_on)} ({' and '.join(entry.shape_modes)} shapes)",
           f"- Found by dlrm-fuzz (differential fuzzing of DLRM against eager PyTorch), "
           f"bucket `{entry.bucket}`"
           + (f" (on a variant of the drawn sample with {', '.join(entry.repairs)} switched off: "
              f"known bugs stop it earlier)" if entry.repairs else ""),
           "", "## Expected vs got", "", *_expected_vs_got(entry), ""]
    source = folder / "repro.py"
    if source.exists():
        status = (repro or {}).get("status", "not checked")
        beside = _files_beside(folder)
        out += ["## Minimal program", "",
                f"`python repro.py` (needs only {_repro_needs(repro or entry.repro)}"
                + (f"; reads {', '.join(beside)} beside it" if beside else "")
                + f") exits 1 while the bug is present, 0 once it is fixed, 2 when it cannot "
                f"run; checked when written: {status}.", "",
                "```python", source.read_text().rstrip(), "```", ""]
    if tools and tools.get("commands"):
        out += ["## Without Python", "",
                f"From this folder, with the IREE / torch-mlir tools of the versions above on "
                f"PATH (`pip install` puts `iree-compile`, `iree-run-module` and "
                f"`torch-mlir-opt` there):", "",
                "```bash", *tools["commands"], "```", "",
                f"While the bug is present this shows: `{tools.get('expect', '')}`", ""]
    excerpt = _excerpt(folder, entry)
    if excerpt:
        out += ["## MLIR excerpt", "", "```mlir", excerpt, "```", ""]
    return "\n".join(out)


# Files a repro.py reads from its own folder (fuzz.reports.repro writes them).
_REPRO_INPUTS = ("arg*.npy", "const*.npy", "params.npz", "weights.npz", "refbackend_runtime.py")


def _files_beside(folder: Path) -> list[str]:
    return sorted({path.name for pattern in _REPRO_INPUTS for path in folder.glob(pattern)})


def _repro_needs(repro: dict[str, Any]) -> str:
    """What a repro of this kind imports: an export repro stops at torch, a
    refbackend one never touches IREE."""
    if repro.get("kind") == "export":
        return "torch and numpy"
    if repro.get("target", "").startswith("refbackend"):
        return "torch, torch-mlir and numpy"
    return "torch, torch-mlir, IREE and numpy"


def _family(owner: str) -> str:
    if owner.startswith("torch-mlir"):
        return "torch-mlir"
    if owner.startswith("iree"):
        return "IREE"
    return "PyTorch"


def _digest_rows(entries: Sequence[CorpusEntry]) -> list[dict[str, Any]]:
    return [{"bucket": e.bucket, "project": _family(e.owner), "owner": e.owner,
             "verdict": e.verdict.value, "targets": list(e.seen_on),
             "culprit": e.culprit or e.error, "first_seen": e.created,
             "repro_status": e.repro_status or "not written"} for e in entries]


def digest_json(entries: Sequence[CorpusEntry]) -> str:
    """The corpus digest (one row per bucket) as JSON, for scripts and CI."""
    return json.dumps({"buckets": _digest_rows(entries)}, indent=2, sort_keys=True) + "\n"


def digest_markdown(entries: Sequence[CorpusEntry]) -> str:
    """The corpus grouped by project: one line per bucket, fit for a PR comment."""
    rows = _digest_rows(entries)
    out = [f"**dlrm-fuzz corpus: {len(rows)} buckets**", ""]
    for project in ("torch-mlir", "IREE", "PyTorch"):
        mine = [r for r in rows if r["project"] == project]
        if not mine:
            continue
        out += [f"### {project} ({len(mine)})", "",
                "| bucket | verdict | owner | targets | culprit / error | first seen | repro |",
                "|---|---|---|---|---|---|---|"]
        for r in mine:
            culprit = str(r["culprit"]).replace("|", "\\|")[:120]
            out.append(f"| `{r['bucket']}` | {r['verdict']} | {r['owner']} | "
                       f"{len(r['targets'])}: {', '.join(r['targets'])} | `{culprit}` | "
                       f"{r['first_seen'][:10]} | {r['repro_status']} |")
        out.append("")
    return "\n".join(out)

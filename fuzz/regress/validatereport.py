"""A validation's report in the three forms CI reads: Markdown for the PR
comment (what the change broke and fixed first, what it left alone folded
away), JSON for tools, JUnit XML for test dashboards.

JUnit is bump's writer (``fuzz.regress.bumpreport.bump_junit``, one test case
per row, the same mapping of changes to failures and skips), called once per
step so that the matrix, the corpus and the campaign are three suites of one
document; only the suite names are validate's own.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from fuzz.regress.bump import BumpReport, BumpRow, Change, Side
from fuzz.regress.bumpreport import bump_junit
from fuzz.regress.validate import MATRIX_OWNER, SIDE_NAMES, ValidateReport, words

__all__ = ["validate_markdown", "validate_junit", "validate_json", "write_validate_files",
           "GROUPS"]

# (heading, changes) in the order a reviewer reads them: what needs action first.
GROUPS: tuple[tuple[str, tuple[Change, ...]], ...] = (
    ("Broke (fail with --toolchain, pass with --against)", (Change.NEW,)),
    ("Fixed (fail with --against, pass with --toolchain)", (Change.FIXED,)),
    ("Changed (fail on both in another bucket, or flaky)", (Change.MOVED, Change.FLAKY)),
    ("Cannot compare", (Change.CANNOT_COMPARE,)),
    ("Found by the campaign, failing with --against too (add to the corpus)",
     (Change.PRE_EXISTING,)),
    ("Left alone", (Change.STILL_FAILING, Change.PASSING)),
)
# Versions shown per side, in this order (the rest stays in validate.json).
_SHOWN = ("iree-base-compiler", "iree-base-runtime", "torch", "torch-mlir",
          "iree-compile --version", "python")


def _where(side: Side) -> str:
    return side.toolchain.path or f"this install ({side.python})"


def _verdict(report: ValidateReport, strict: bool) -> str:
    status = report.exit_status(strict)
    if status == 4:
        return "nothing could be compared"
    broke, fixed = report.count(Change.NEW), report.count(Change.FIXED)
    if broke:
        return f"breaks {broke}" + (f", fixes {fixed}" if fixed else "")
    if fixed:
        return f"fixes {fixed}, breaks nothing"
    return "breaks nothing" + (", changes to record in the corpus" if status else "")


def _step(row: BumpRow) -> str:
    return "matrix" if row.owner.startswith(MATRIX_OWNER) else \
        "campaign" if row.found else "corpus"


def _counts(rows: list[BumpRow]) -> str:
    names = {Change.NEW: "broke", Change.FIXED: "fixed", Change.STILL_FAILING: "still failing",
             Change.PASSING: "passing", Change.PRE_EXISTING: "failing on both"}
    counted = [(names.get(c, c.value), sum(r.change is c for r in rows)) for c in Change]
    return ", ".join(f"{n} {name}" for name, n in counted if n) or "nothing"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cell(buckets: tuple[str, ...]) -> str:
    return ", ".join(f"`{b}`" for b in buckets) if buckets else "pass"


def validate_markdown(report: ValidateReport, strict: bool = False) -> str:
    """The PR comment: the verdict, both toolchains, one line per step, then
    one table per kind of change (what was left alone folded)."""
    sides = {side.label: side for side in report.sides}
    order = [sides[label] for label in ("to", "from") if label in sides]
    lines = [f"## dlrm-fuzz validate: {_verdict(report, strict)}", "",
             "| | " + " | ".join(SIDE_NAMES[s.label] for s in order) + " |",
             "|---|" + "---|" * len(order),
             "| toolchain | " + " | ".join(f"`{_escape(_where(s))}`" for s in order) + " |"]
    for name in _SHOWN:
        if any(name in s.versions for s in order):
            lines.append(f"| {name} | " + " | ".join(_escape(s.versions.get(name, "?"))
                                                      for s in order) + " |")
    rows = report.rows()
    matrix = [r for r in rows if _step(r) == "matrix"]
    stored = [r for r in rows if _step(r) == "corpus"]
    found = [r for r in rows if _step(r) == "campaign"]
    lines += ["", f"- region: {report.focus}" if report.focus else
              "- region: everything (every matrix row, every stored case)"]
    if report.matrix_rows:
        lines.append(f"- matrix: {_plural(len(report.matrix_rows), 'row')} "
                     f"({', '.join(report.matrix_rows)}) x "
                     f"{_plural(len(report.matrix_targets), 'target')}, "
                     f"{_plural(report.seeds, 'seed')}: {_counts(matrix)}")
    lines.append(f"- corpus: {report.inside} of {_plural(report.stored, 'stored case')} "
                 f"{'inside the focus, ' if report.focus else ''}replayed on both: "
                 f"{_counts(stored)}")
    fuzz = report.bump.fuzz if report.bump else {}
    if fuzz:
        coverage = fuzz.get("coverage")
        inside = ""
        if report.focus and isinstance(coverage, dict):
            focus_row = next((v for k, v in coverage.items() if k.startswith("focus")), None)
            if isinstance(focus_row, dict):
                inside = f" ({focus_row.get('generated', 0)} inside the focus)"
        lines.append(f"- campaign on --toolchain: {fuzz.get('samples', '?')} samples{inside}, "
                     f"{fuzz.get('configs_compiled', '?')} configs compiled in "
                     f"{fuzz.get('elapsed_s', '?')}s; {_plural(len(found), 'bucket')} the corpus "
                     "lacks"
                     + (f": {_counts(found)}" if found else ""))
    lines += [f"- note: {_escape(note)}" for note in report.notes]
    lines += ["- time: " + ", ".join(f"{name} {seconds:.0f}s"
                                    for name, seconds in report.phases.items()), ""]
    for heading, changes in GROUPS:
        group = [row for row in rows if row.change in changes]
        if not group:
            continue
        table = ["| step | what | target | --against | --toolchain | note |",
                 "|---|---|---|---|---|---|"]
        table += [f"| {_step(r)} | {_what(r, report.errors)} | {r.target} | "
                  f"{_cell(r.before)} | {_cell(r.after)} | {_escape(r.note)} |" for r in group]
        if changes == (Change.STILL_FAILING, Change.PASSING):
            lines += [f"<details><summary>{heading}: {len(group)}</summary>", "", *table, "",
                      "</details>", ""]
        else:
            lines += [f"### {heading}: {len(group)}", "", *table, ""]
    shown = [b for r in rows if r.change not in (Change.STILL_FAILING, Change.PASSING)
             and _step(r) == "matrix" for b in (*r.before, *r.after)]
    legend = [b for b in dict.fromkeys(shown) if b in report.errors]
    if legend:
        lines += ["Matrix buckets:", ""] + [f"- `{b}`: {_escape(report.errors[b])}"
                                            for b in legend] + [""]
    junk = report.bump.junk if report.bump else []
    if junk:
        lines += ["### Unreadable corpus entries", ""] + [f"- {_escape(j)}" for j in junk]
    return "\n".join(lines).rstrip() + "\n"


def _what(row: BumpRow, errors: dict[str, str]) -> str:
    if _step(row) == "matrix":
        return row.bucket
    error = errors.get(row.bucket, "")
    return f"`{row.bucket}` ({row.owner})" + (f": {_escape(error[:120])}" if error else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def validate_junit(report: ValidateReport, strict: bool = False) -> str:
    """One suite per step (matrix, corpus, campaign), each case written by
    bump's JUnit writer."""
    root = ET.Element("testsuites")
    rows = report.rows()
    names = {"to": "", "from": ""}
    for side in report.sides:
        names[side.label] = _where(side)
    for step in ("matrix", "corpus", "campaign"):
        part = BumpReport(report.sides, [r for r in rows if _step(r) == step],
                          {k: v for k, v in report.phases.items() if _phase_of(k) == step})
        suite = ET.fromstring(bump_junit(part, strict)).find("testsuite")
        if suite is None:  # bump_junit always writes one; a guard for the type checker
            continue
        suite.set("name", f"dlrm-fuzz validate {step}: {names['from']} -> {names['to']}")
        for element in suite.iter():  # bump's side flags in validate's words
            if element.text:
                element.text = words(element.text)
        root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _phase_of(name: str) -> str:
    if name.startswith("matrix"):
        return "matrix"
    if "fuzz" in name or "found" in name:
        return "campaign"
    return "corpus" if name.startswith("replay") else ""


def validate_json(report: ValidateReport, strict: bool = False) -> str:
    """The report as JSON, with the exit status it gives."""
    return json.dumps({**report.to_dict(), "exit_status": report.exit_status(strict)},
                      indent=2) + "\n"


def write_validate_files(report: ValidateReport, out_dir: Path, strict: bool = False
                         ) -> dict[str, Path]:
    """``validate.md``, ``validate.json`` and ``validate.junit.xml`` in
    ``out_dir`` (each written aside and renamed); format -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {"md": ("validate.md", validate_markdown(report, strict)),
             "json": ("validate.json", validate_json(report, strict)),
             "junit": ("validate.junit.xml", validate_junit(report, strict))}
    written = {}
    for form, (name, text) in texts.items():
        path = out_dir / name
        temp = path.with_suffix(path.suffix + ".tmp")
        temp.write_text(text)
        temp.replace(path)
        written[form] = path
    return written

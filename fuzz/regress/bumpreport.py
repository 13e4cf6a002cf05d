"""A bump's report in the three forms CI reads: Markdown for a PR comment,
JSON for tools, JUnit XML for test dashboards (one test case per bucket).

JUnit is written with the standard library's ElementTree: the schema CI
systems read (testsuites / testsuite / testcase with failure, skipped and
system-out) is a handful of elements, and a writer package would add a
dependency for less than this module. Mapping, as pytest renders xfail: a
NEW bug is a failure; a known bug still failing (or pre-existing) is skipped
("xfail"); a fix passes with its note; MOVED and FLAKY are skipped, or
failures under ``--strict`` (the corpus must be updated), like ``replay``;
CANNOT_COMPARE is skipped with the reason; a stored case passing on both
passes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from fuzz.regress.bump import NEWS, BumpReport, BumpRow, Change

__all__ = ["bump_markdown", "bump_junit", "write_bump_files", "SECTIONS"]

# (change, heading) in the order a reviewer reads them: what needs action first.
SECTIONS: tuple[tuple[Change, str], ...] = (
    (Change.NEW, "New bugs (fail on --to, pass on --from)"),
    (Change.FIXED, "Fixed (failed on --from, pass on --to)"),
    (Change.MOVED, "Moved (fail on both, in another bucket)"),
    (Change.FLAKY, "Flaky (repeated runs disagree)"),
    (Change.CANNOT_COMPARE, "Cannot compare"),
    (Change.PRE_EXISTING, "Found by fuzzing --to, fail on --from too (add to the corpus)"),
    (Change.PASSING, "Stored cases passing on both (stale corpus entries)"),
    (Change.STILL_FAILING, "Still failing (known bugs)"),
)


def _pins(report: BumpReport, label: str) -> str:
    side = next(s for s in report.sides if s.label == label)
    return side.toolchain.describe()


def bump_markdown(report: BumpReport, strict: bool = False) -> str:
    """The PR comment: a verdict line, the counts, one table per change."""
    status = report.exit_status(strict)
    verdict = {0: "no new bugs", 1: "new bugs" if report.count(Change.NEW) else
               "changes to record in the corpus", 4: "nothing could be compared"}[status]
    lines = [f"## dlrm-fuzz bump: {verdict}", "",
             f"- from: `{_pins(report, 'from')}`", f"- to: `{_pins(report, 'to')}`",
             "- " + ", ".join(f"{report.count(change)} {change.value}" for change, _ in SECTIONS
                             if report.count(change)) if report.rows else "- empty corpus"]
    if report.fuzz:
        fuzz = report.fuzz
        found = fuzz.get("new_buckets")
        lines.append(f"- fuzzed --to: {fuzz.get('samples', '?')} samples, "
                     f"{fuzz.get('configs_compiled', '?')} configs compiled, "
                     f"{len(found) if isinstance(found, list) else '?'} buckets not in the "
                     f"corpus, in {fuzz.get('elapsed_s', '?')}s")
    phases = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in report.phases.items())
    lines += [f"- time: {phases}", ""]
    for change, heading in SECTIONS:
        rows = [row for row in report.rows if row.change is change]
        if not rows:
            continue
        lines += [f"### {heading}: {len(rows)}", "",
                  "| bucket | owner | target | --from | --to | note |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{row.bucket}`{' (found)' if row.found else ''} | {row.owner} | "
                  f"{row.target} | {_cell(row.before)} | {_cell(row.after)} | "
                  f"{_escape(row.note)} |" for row in rows]
        lines.append("")
    if report.junk:
        lines += ["### Unreadable corpus entries", ""] + [f"- {_escape(j)}" for j in report.junk]
    return "\n".join(lines).rstrip() + "\n"


def _cell(buckets: tuple[str, ...]) -> str:
    return ", ".join(f"`{b}`" for b in buckets) if buckets else "pass"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def bump_junit(report: BumpReport, strict: bool = False) -> str:
    """One ``testcase`` per bucket (classname: the owner), in one suite."""
    news = NEWS if strict else frozenset({Change.NEW})
    suite = ET.Element("testsuite", name=f"dlrm-fuzz bump {_pins(report, 'from')} -> "
                                         f"{_pins(report, 'to')}")
    failures = skipped = 0
    for row in report.rows:
        case = ET.SubElement(suite, "testcase", classname=row.owner, name=row.bucket,
                             time=f"{row.seconds:.3f}")
        message = f"{row.change.value}: {row.note}".rstrip(": ")
        if row.change in news:
            failures += 1
            failure = ET.SubElement(case, "failure", message=message, type=row.change.value)
            failure.text = _detail(row)
        elif row.change not in (Change.FIXED, Change.PASSING):
            skipped += 1
            ET.SubElement(case, "skipped", message=message, type=row.change.value)
        ET.SubElement(case, "system-out").text = _detail(row)
    suite.set("tests", str(len(report.rows)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{sum(report.phases.values()):.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _detail(row: BumpRow) -> str:
    return (f"{row.change.value} {row.bucket} on {row.target} (owner {row.owner})\n"
            f"--from: {', '.join(row.before) or 'pass'}\n--to: {', '.join(row.after) or 'pass'}\n"
            f"{row.note}").rstrip()


def write_bump_files(report: BumpReport, out_dir: Path, strict: bool = False) -> list[Path]:
    """``bump.md``, ``bump.json`` and ``bump.junit.xml`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"bump.md": bump_markdown(report, strict),
             "bump.json": json.dumps({**report.to_dict(), "exit_status":
                                      report.exit_status(strict)}, indent=2) + "\n",
             "bump.junit.xml": bump_junit(report, strict)}
    written = []
    for name, text in files.items():
        path = out_dir / name
        temp = path.with_suffix(path.suffix + ".tmp")
        temp.write_text(text)
        temp.replace(path)
        written.append(path)
    return written

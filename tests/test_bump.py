"""Toolchain bumps: how one case's behaviour on two toolchains becomes a
change (unit), what counts as "cannot compare" (unit, over the real recorded
messages), the Markdown / JSON / JUnit report and the exit statuses (unit),
and `dlrm-fuzz bump` end to end with both sides on this install and FAKE
targets (engine tier: the orchestration, without uv)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fuzz.regress.bump import BumpReport, BumpRow, Change, Observation, Side, classify, observe
from fuzz.regress.bumpreport import bump_junit, bump_markdown, write_bump_files
from fuzz.regress.replay import ReplayResult, ReplayStatus
from fuzz.regress.toolchains import Toolchain, current_toolchain
from oracles import classify as classify_failure, error_key
from oracles.compat import incompatibility
from tests.test_normalize import INDEX, _failure

OLD_IREE_MESSAGE = "old-iree-target-attr-parse--iree-vulkan-dyn.txt"


def _full_key(name: str) -> str:
    verdict, line, op = classify_failure(_failure(name))
    return error_key(verdict, INDEX[name]["owner"], op, line)


def test_an_older_compiler_rejecting_todays_program_is_an_incompatibility() -> None:
    reason = incompatibility(_full_key(OLD_IREE_MESSAGE))
    assert reason is not None and "cannot parse" in reason


@pytest.mark.parametrize("name", sorted(set(INDEX) - {OLD_IREE_MESSAGE}))
def test_no_real_bug_of_todays_toolchain_counts_as_an_incompatibility(name: str) -> None:
    assert incompatibility(_full_key(name)) is None


def test_only_compile_side_failures_can_be_incompatibilities() -> None:
    text = "error: custom op 'foo.bar' is unknown"
    assert incompatibility(f"COMPILE_ERROR|iree:llvm-cpu|{text}") is not None
    assert incompatibility(f"RUNTIME_ERROR|iree:llvm-cpu|{text}") is None
    assert incompatibility("MISMATCH|torch-mlir:linalg-on-tensors|op:aten.bmm") is None


def _seen(*now: str) -> Observation:
    return Observation(tuple(now))


@pytest.mark.parametrize("before, after, found, change", [
    (_seen("b"), _seen("b"), False, Change.STILL_FAILING),
    (_seen("b"), _seen(), False, Change.FIXED),
    (_seen(), _seen("b"), False, Change.NEW),
    (_seen("b"), _seen("c"), False, Change.MOVED),
    (_seen(), _seen(), False, Change.PASSING),
    (_seen("b"), _seen("b"), True, Change.PRE_EXISTING),
    (_seen(), _seen("b"), True, Change.NEW),
    (_seen("c"), _seen("b"), True, Change.MOVED),
    (Observation(("b",), flaky=True), _seen("b"), False, Change.FLAKY),
    (Observation(cannot="--from: no device"), _seen(), False, Change.CANNOT_COMPARE),
    (_seen(), Observation(("x",), cannot="--to: parse"), False, Change.CANNOT_COMPARE),
])
def test_changes_between_toolchains(before: Observation, after: Observation, found: bool,
                                    change: Change) -> None:
    assert classify("b", before, after, found)[0] is change


def _result(status: ReplayStatus, *now: str, keys: tuple[str, ...] = (),
            note: str = "") -> ReplayResult:
    return ReplayResult("b", "iree-vulkan-dyn", status, tuple(now), 1, 1.0, note, keys)


def test_observing_a_replay_result() -> None:
    assert observe(None, "--to").cannot == "--to: not replayed"
    skipped = observe(_result(ReplayStatus.SKIPPED, note="target 'x' is not available here"),
                      "--from")
    assert skipped.cannot == "--from: target 'x' is not available here"
    assert observe(_result(ReplayStatus.FLAKY, "b"), "--to").flaky
    rejected = observe(_result(ReplayStatus.MOVED, "compile_error-1",
                               keys=(_full_key(OLD_IREE_MESSAGE),)), "--from")
    assert rejected.cannot.startswith("--from: the compiler cannot parse")
    assert "struct is missing required parameter" in rejected.cannot
    # A move into an ordinary bug is a move, not an incompatibility.
    moved = observe(_result(ReplayStatus.MOVED, "c", keys=("RUNTIME_ERROR|iree:x|boom",)), "--to")
    assert moved == Observation(("c",))


def _report(*rows: BumpRow) -> BumpReport:
    sides = [Side("from", Toolchain(), sys.executable, 0.0, True),
             Side("to", Toolchain(("iree-base-compiler==3.12.0", "iree-base-runtime==3.12.0")),
                  "/envs/x/bin/python", 9.3, False)]
    return BumpReport(sides, list(rows), {"environments": 9.3, "replay --from": 12.0})


def _row(bucket: str, change: Change, before: tuple[str, ...] = (),
         after: tuple[str, ...] = ()) -> BumpRow:
    return BumpRow(bucket, "iree-cpu", "iree:llvm-cpu", change, "a | note", before, after,
                   change is Change.PRE_EXISTING, 2.5)


def test_exit_statuses() -> None:
    assert _report().exit_status() == 0  # empty corpus: nothing to compare, nothing wrong
    assert _report(_row("a", Change.STILL_FAILING, ("a",), ("a",))).exit_status() == 0
    fixed = _report(_row("a", Change.FIXED, ("a",)))
    assert fixed.exit_status() == 0 and fixed.exit_status(strict=True) == 1
    assert _report(_row("a", Change.NEW, (), ("a",))).exit_status() == 1
    assert _report(_row("a", Change.CANNOT_COMPARE)).exit_status() == 4
    assert _report(_row("a", Change.CANNOT_COMPARE),
                   _row("b", Change.STILL_FAILING)).exit_status() == 0


def test_markdown_puts_new_bugs_first_and_escapes_cells() -> None:
    report = _report(_row("s", Change.STILL_FAILING, ("s",), ("s",)),
                     _row("n", Change.NEW, (), ("n",)), _row("f", Change.FIXED, ("f",)))
    text = bump_markdown(report)
    assert text.startswith("## dlrm-fuzz bump: new bugs")
    assert "- to: `iree-base-compiler==3.12.0,iree-base-runtime==3.12.0`" in text
    assert "1 new, 1 fixed, 1 still-failing" in text
    assert text.index("### New bugs") < text.index("### Fixed") < text.index("### Still failing")
    assert "| `n` | iree:llvm-cpu | iree-cpu | pass | `n` | a \\| note |" in text


def test_junit_has_one_case_per_bucket_and_strict_turns_news_into_failures() -> None:
    report = _report(_row("n", Change.NEW, (), ("n",)), _row("f", Change.FIXED, ("f",)),
                     _row("s", Change.STILL_FAILING, ("s",), ("s",)),
                     _row("m", Change.MOVED, ("m",), ("x",)),
                     _row("c", Change.CANNOT_COMPARE))
    suite = ET.fromstring(bump_junit(report)).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"n", "f", "s", "m", "c"}
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "1", "3")
    assert cases["n"].find("failure") is not None
    assert cases["f"].find("failure") is None and cases["f"].find("skipped") is None
    skipped = cases["s"].find("skipped")
    assert skipped is not None and skipped.get("type") == "still-failing"
    strict = ET.fromstring(bump_junit(report, strict=True)).find("testsuite")
    assert strict is not None and strict.get("failures") == "3"  # new, fixed, moved


def test_files_are_written_with_the_exit_status(tmp_path: Path) -> None:
    report = _report(_row("n", Change.NEW, (), ("n",)))
    paths = write_bump_files(report, tmp_path / "out")
    assert sorted(p.name for p in paths) == ["bump.json", "bump.junit.xml", "bump.md"]
    data = json.loads((tmp_path / "out" / "bump.json").read_text())
    assert data["exit_status"] == 1 and data["counts"]["new"] == 1
    assert data["rows"][0]["change"] == "new"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          timeout=900, cwd=cwd)


@pytest.mark.engine
def test_bad_pins_and_files_are_one_line_errors(tmp_path: Path) -> None:
    for args in (["--to", "iree-base-compiler=3"], ["--to", str(tmp_path / "nope.toml")],
                 ["--to", "iree-base-compiler==3.12.0", "--corpus", str(__file__)]):
        done = _cli("bump", *args, "--out", str(tmp_path / "out"))
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("dlrm-fuzz: error:") and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_bump_end_to_end_on_fake_targets(tmp_path: Path) -> None:
    """Both sides this install (no environments to build): a corpus with one
    fake bug, fuzzing finds it again, and a second fake bug the corpus lacks."""
    store, out = tmp_path / "corpus", tmp_path / "out"
    seeded = _cli("run", "--targets", "fake-raise", "--corpus", str(store), "--max-samples", "1",
                  "--no-replay", "--no-shrink", "--no-report", "--workers", "1", "--no-cache")
    assert seeded.returncode == 0, seeded.stderr
    pins = ",".join(current_toolchain().resolved())
    done = _cli("bump", "--to", pins, "--corpus", str(store), "--out", str(out),
                "--budget", "5s", "--targets", "fake-raise,fake-abort", "--workers", "1",
                "--repeat", "1")
    assert done.returncode == 0, done.stderr
    data = json.loads((out / "bump.json").read_text())
    changes = {row["bucket"]: (row["change"], row["found"]) for row in data["rows"]}
    stored = [b for b, (c, found) in changes.items() if not found]
    assert len(stored) == 1 and changes[stored[0]] == ("still-failing", False)
    found = {b: c for b, (c, f) in changes.items() if f}
    assert found and set(found.values()) == {"pre-existing"}  # same toolchain: nothing new
    assert any(b.startswith("crash-") for b in found)
    assert all((out / "found" / b / "case.json").is_file() for b in found)
    assert "## dlrm-fuzz bump: no new bugs" in done.stdout
    assert data["sides"][0]["reused_install"] and data["sides"][1]["reused_install"]


REAL_BUG_CORPUS = Path(__file__).parent / "data" / "corpus-iree-3.12"
IREE_3_12 = "iree-base-compiler==3.12.0,iree-base-runtime==3.12.0"


@pytest.mark.pipeline
def test_real_bump_to_an_older_iree_reports_its_compiler_crash_as_new(
        tmp_path: Path, toolchain_root: Path) -> None:
    """A real bump, pinned IREE 3.13.0 -> 3.12.0 in a uv environment, replaying
    a one-bucket corpus: IREE 3.12.0's compiler dies of SIGFPE on a one-row
    table (AnnotateDispatches), fixed in 3.13.0, so going back is a new bug,
    in all three report forms, with exit status 1."""
    import shutil

    store, out = tmp_path / "corpus", tmp_path / "out"
    shutil.copytree(REAL_BUG_CORPUS, store)
    done = _cli("bump", "--to", IREE_3_12, "--corpus", str(store), "--budget", "0s",
                "--env-root", str(toolchain_root), "--out", str(out), "--repeat", "1")
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads((out / "bump.json").read_text())
    assert [(r["bucket"], r["change"]) for r in data["rows"]] == [
        ("compile_error-bfac04ea9b7d", "new")], data["rows"]
    assert data["sides"][0]["reused_install"] and not data["sides"][1]["reused_install"]
    assert "## dlrm-fuzz bump: new bugs" in (out / "bump.md").read_text()
    suite = ET.parse(out / "bump.junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == 1 and cases[0].find("failure") is not None
    assert (store / "compile_error-bfac04ea9b7d" / "case.json").read_bytes() == \
        (REAL_BUG_CORPUS / "compile_error-bfac04ea9b7d" / "case.json").read_bytes()


def test_the_example_workflow_calls_bump_with_options_that_exist() -> None:
    """The GitHub Actions example must not rot: its `dlrm-fuzz bump` line
    parses with today's command line."""
    import shlex

    from fuzz.cli.main import _parser

    workflow = Path(__file__).parents[1] / ".github" / "workflows" / "bump.yml"
    calls = [line.strip() for line in workflow.read_text().splitlines()
             if line.strip().startswith("dlrm-fuzz bump")]
    assert len(calls) == 1, calls
    args = _parser().parse_args(shlex.split(calls[0])[1:])
    assert args.command == "bump" and str(args.out) == "bump"
    assert (str(args.from_), str(args.to)) == ("base-constraints.txt", "constraints.txt")

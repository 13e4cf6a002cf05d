"""``dlrm-fuzz validate`` and the focus of ``matrix`` / ``replay``.

Unit: matrix cells compared across two toolchains, the report's verdict,
Markdown, JUnit (bump's writer, one suite per step) and exit statuses, the
matrix rows and stored cases a focus keeps, one-line errors. Engine tier:
the whole command on two real interpreters (this one, and a venv seeing
this one's packages through a .pth file, as in tests/test_toolchain_path.py)
with plug-in FAKE targets that fail on one interpreter only, so a fix and a
breakage show up in all three steps. The real IREE 3.12.0 -> 3.13.0 run
(the Flow SIGFPE crash reported fixed) is marked pipeline and slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fuzz.cli.main import main
from fuzz.model.config import config_with
from fuzz.model.focus import make_focus
from fuzz.model.presets import preset_config
from fuzz.regress.bump import BumpReport, BumpRow, Change, Side
from fuzz.regress.matrix import FEATURES, Matrix, feature_sample, rows_in_focus
from fuzz.regress.replay import replay_corpus
from fuzz.regress.toolchain_path import MARKER
from fuzz.regress.toolchains import Toolchain
from fuzz.regress.validate import ValidateReport, compare_cells
from fuzz.regress.validatereport import (validate_junit, validate_markdown,
                                         write_validate_files)
from tests.test_toolchain_path import _venv

ROOT = Path(__file__).resolve().parents[1]
IREE_3_12_CORPUS = ROOT / "tests" / "data" / "corpus-iree-3.12"
CRASH = "compile_error-bfac04ea9b7d"  # IREE 3.12.0's SIGFPE in Flow summarizeDispatchRegion
OLD_IREE_KEY = "COMPILE_ERROR|iree:compiler|error: custom op 'foo.bar' is unknown"


# -- the matrix on two toolchains (unit) -----------------------------------------
def _matrix(cells: dict[str, dict[str, str]], keys: dict[str, str] | None = None) -> Matrix:
    targets = list(dict.fromkeys(t for row in cells.values() for t in row))
    return Matrix(targets, cells, {}, 0.0, keys or {})


def test_matrix_cells_are_compared_like_bump_compares_cases() -> None:
    before = _matrix({"pooling=mean": {"iree-cpu": "b1", "iree-vmvx": "PASS", "refbackend": "b2",
                                       "iree-torch": "b3", "iree-tosa": "PASS", "old": "PASS",
                                       "iree-cuda": "b4"}},
                     {"b4": OLD_IREE_KEY})
    after = _matrix({"pooling=mean": {"iree-cpu": "PASS", "iree-vmvx": "b1", "refbackend": "b2",
                                      "iree-torch": "b5", "iree-tosa": "PASS", "iree-cuda": "b4"}},
                    {"b4": OLD_IREE_KEY})
    changes = {(c.feature, c.target): c for c in compare_cells(before, after)}
    assert {t: c.change for (_, t), c in changes.items()} == {
        "iree-cpu": Change.FIXED, "iree-vmvx": Change.NEW, "refbackend": Change.STILL_FAILING,
        "iree-torch": Change.MOVED, "iree-tosa": Change.PASSING, "old": Change.CANNOT_COMPARE,
        "iree-cuda": Change.CANNOT_COMPARE}
    assert changes["pooling=mean", "old"].note == "--toolchain: the target does not run there"
    assert "does not know an op" in changes["pooling=mean", "iree-cuda"].note
    assert changes["pooling=mean", "iree-cpu"].before == ("b1",)
    assert changes["pooling=mean", "iree-cpu"].after == ()
    assert changes["pooling=mean", "iree-torch"].note == "b3 -> b5"


def _sides() -> list[Side]:
    return [Side("from", Toolchain(path="/envs/iree-3.12"), "/envs/iree-3.12/bin/python", 0.1,
                 False, {"iree-base-compiler": "3.12.0", "python": "/envs/iree-3.12/bin/python"}),
            Side("to", Toolchain(path="/envs/iree-3.13"), "/envs/iree-3.13/bin/python", 0.1,
                 False, {"iree-base-compiler": "3.13.0", "python": "/envs/iree-3.13/bin/python"})]


def _report(cells: dict[str, dict[str, str]], after: dict[str, dict[str, str]],
            *rows: BumpRow) -> ValidateReport:
    sides = _sides()
    report = ValidateReport(sides, "focus pooling=mean", compare_cells(_matrix(cells),
                                                                      _matrix(after)),
                            ["pooling=mean"], ["iree-cpu", "iree-vmvx"], 2,
                            BumpReport(sides, list(rows), {"replay --against": 3.0},
                                       {"samples": 12, "configs_compiled": 9, "elapsed_s": 60.0,
                                        "coverage": {"focus (every pin, input and shape)":
                                                     {"generated": 12}}}),
                            stored=24, inside=1, phases={"matrix --against": 5.0})
    return report


def _case(bucket: str, change: Change, before: tuple[str, ...], after: tuple[str, ...],
          found: bool = False) -> BumpRow:
    return BumpRow(bucket, "iree-cpu", "iree:compiler", change, "", before, after, found, 1.5)


def test_report_says_what_broke_what_was_fixed_and_folds_what_was_left_alone(
        tmp_path: Path) -> None:
    report = _report({"pooling=mean": {"iree-cpu": "PASS", "iree-vmvx": "b1"}},
                     {"pooling=mean": {"iree-cpu": "b9", "iree-vmvx": "b1"}},
                     _case(CRASH, Change.FIXED, (CRASH,), ()),
                     _case("b7", Change.PRE_EXISTING, ("b7",), ("b7",), found=True))
    report.errors = {CRASH: "iree-compile crashed (SIGFPE) in mlir::iree_compiler::IREE::Flow::"
                            "summarizeDispatchRegion (AnnotateDispatches.cpp)", "b9": "error: boom"}
    assert report.exit_status() == 1 and report.count(Change.NEW) == 1
    text = validate_markdown(report)
    assert text.startswith("## dlrm-fuzz validate: breaks 1, fixes 1\n")
    assert "| iree-base-compiler | 3.13.0 | 3.12.0 |" in text  # --toolchain first
    assert "| toolchain | `/envs/iree-3.13` | `/envs/iree-3.12` |" in text
    assert "- region: focus pooling=mean" in text
    assert "- matrix: 1 row (pooling=mean) x 2 targets, 2 seeds: 1 broke, 1 still failing" in text
    assert "- corpus: 1 of 24 stored cases inside the focus, replayed on both: 1 fixed" in text
    assert "- campaign on --toolchain: 12 samples (12 inside the focus)" in text
    assert text.index("### Broke") < text.index("### Fixed") < text.index("### Found by")
    assert f"| corpus | `{CRASH}` (iree:compiler): iree-compile crashed (SIGFPE) in " \
           "mlir::iree_compiler::IREE::Flow::summarizeDispatchRegion" in text
    assert "| matrix | pooling=mean | iree-cpu | pass | `b9` |" in text
    assert "- `b9`: error: boom" in text  # what a matrix bucket is
    assert "<details><summary>Left alone: 1</summary>" in text
    assert report.exit_status(strict=True) == 1

    suites = ET.fromstring(validate_junit(report)).findall("testsuite")
    assert [s.get("name", "").split(":")[0] for s in suites] == [
        "dlrm-fuzz validate matrix", "dlrm-fuzz validate corpus", "dlrm-fuzz validate campaign"]
    assert [(s.get("tests"), s.get("failures")) for s in suites] == [("2", "1"), ("1", "0"),
                                                                     ("1", "0")]
    case = suites[0].find("testcase")
    assert case is not None and (case.get("classname"), case.get("name")) == (
        "matrix.iree-cpu", "pooling=mean")
    detail = ET.tostring(suites[0], encoding="unicode")
    assert "--against: pass" in detail and "--from" not in detail

    files = write_validate_files(report, tmp_path / "out")
    assert sorted(p.name for p in files.values()) == ["validate.json", "validate.junit.xml",
                                                      "validate.md"]
    data = json.loads(files["json"].read_text())
    assert data["exit_status"] == 1 and data["counts"]["new"] == 1 and data["counts"]["fixed"] == 1
    assert [s["label"] for s in data["sides"]] == ["against", "toolchain"]
    assert data["corpus"]["inside"] == 1 and data["matrix"]["cells"][0]["change"] == "new"


def test_a_fix_alone_passes_unless_strict_and_nothing_comparable_is_4() -> None:
    fixed = _report({"pooling=mean": {"iree-cpu": "b1"}}, {"pooling=mean": {"iree-cpu": "PASS"}})
    assert (fixed.exit_status(), fixed.exit_status(strict=True)) == (0, 1)
    assert validate_markdown(fixed).startswith("## dlrm-fuzz validate: fixes 1, breaks nothing")
    alone = _report({"plain": {"iree-cpu": "PASS"}}, {"plain": {"iree-cpu": "PASS"}})
    assert alone.exit_status(strict=True) == 0
    assert validate_markdown(alone).startswith("## dlrm-fuzz validate: breaks nothing\n")
    lost = _report({"plain": {"iree-cpu": "PASS"}}, {"plain": {"iree-vmvx": "PASS"}})
    assert lost.exit_status() == 4
    assert validate_markdown(lost).startswith("## dlrm-fuzz validate: nothing could be compared")


# -- what a focus keeps (unit) ---------------------------------------------------
def test_matrix_rows_inside_a_focus() -> None:
    assert rows_in_focus(None) == list(FEATURES)
    assert rows_in_focus(make_focus("pooling=mean")) == ["pooling=mean"]
    assert rows_in_focus(make_focus("input=empty_bags")) == ["empty_bags"]
    assert rows_in_focus(make_focus("input=batch_of_one")) == []  # every row is a batch of 3
    kaggle = preset_config("kaggle", 1e-3)
    # --preset: the model itself, with and without empty bags...
    assert rows_in_focus(make_focus(None, kaggle), kaggle) == ["plain", "empty_bags"]
    # ... --neighbours: every feature its tables take (not MD widths for 26
    # tables, not padding row 1 of a one-row table; stacked is already on).
    near = rows_in_focus(make_focus(None, kaggle, neighbours=True), kaggle)
    assert "pooling=mean" in near and "qr=mult" in near
    assert not {"md", "padding_idx", "input_layout=stacked"} & set(near)
    one_row = config_with(feature_sample("plain", 0).config, ln_emb=(1, 12))
    assert one_row is not None
    indices = feature_sample("plain", 0, one_row).batches[0].indices[0]
    assert int(indices.max()) == 0  # row 0 of a one-row table, not row 1


def test_replay_leaves_out_the_cases_outside_the_focus() -> None:
    results, junk = replay_corpus(IREE_3_12_CORPUS, focus=make_focus("pooling=mean"))
    assert (results, junk) == ([], [])  # nothing replayed, no worker started


# -- one-line errors (unit) ------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["validate", "--toolchain", "/no/such/env"], "no such folder"),
    (["validate", "--toolchain", "iree-base-compiler==3.12.0"], "use `dlrm-fuzz bump`"),
    (["validate", "--toolchain", ".", "--focus", "pooling=median"], "--focus pooling=median"),
    (["matrix", "--focus", "input=batch_of_one"], "no matrix row lies inside"),
    (["replay", "corpus", "--focus", "nope=1"], "unknown knob"),
    (["matrix", "--rows-scale", "1e-3"], "add --config FILE or --preset NAME"),
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                      words: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("dlrm-fuzz: error:")


@pytest.mark.engine
def test_a_toolchain_that_cannot_run_is_one_line_exit_2(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    bare = _venv(tmp_path / "bare", packages=False)
    assert main(["validate", "--toolchain", str(bare), "--corpus", str(tmp_path / "none"),
                 "--out", str(tmp_path / "out"), "--focus", "pooling=mean"]) == 2
    err = capsys.readouterr().err
    assert "does not import there" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# -- the whole command on two interpreters (engine tier) --------------------------
# Plug-in FAKE targets that behave by interpreter: fake-fixed fails on the old
# one only, fake-broke on the new one only.
PLUGIN = '''
import os, sys
from fuzz.targets.catalog import FakeTarget

def targets():
    old = os.path.realpath(sys.prefix) == os.path.realpath(os.environ["VALIDATE_TEST_OLD"])
    return [FakeTarget("fake-fixed", "fails on the old toolchain", behaviour="raise" if old else "ok"),
            FakeTarget("fake-broke", "fails on the new toolchain", behaviour="ok" if old else "raise")]
'''


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (MARKER, "PYTHONPATH")}
    env.update(PYTHONPATH=str(ROOT), VALIDATE_TEST_OLD=sys.prefix)
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env=env)


@pytest.mark.slow
def test_validate_on_two_interpreters_reports_fixed_and_broken_in_every_step(
        tmp_path: Path) -> None:
    start = time.monotonic()
    (tmp_path / "validate_fakes.py").write_text(PLUGIN)
    new = _venv(tmp_path / "new-env", packages=True)
    store, out = tmp_path / "corpus", tmp_path / "out"
    plugin = ("--target-plugin", "validate_fakes:targets")
    # A stored case inside the focus (fails on the old interpreter, this
    # one) and one outside it (the IREE 3.12 crash: never replayed here).
    seeded = _cli("run", *plugin, "--targets", "fake-fixed", "--focus", "pooling=mean",
                  "--corpus", str(store), "--max-samples", "1", "--no-replay", "--no-shrink",
                  "--no-report", "--workers", "1", "--no-cache", cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    shutil.copytree(IREE_3_12_CORPUS / CRASH, store / CRASH)
    done = _cli("validate", "--toolchain", str(new), *plugin, "--targets",
                "fake-fixed,fake-broke", "--focus", "pooling=mean", "--corpus", str(store),
                "--out", str(out), "--budget", "3s", "--seeds", "1", "--repeat", "1",
                "--workers", "1", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # something broke
    data = json.loads(done.stdout)
    cells = {c["target"]: c["change"] for c in data["matrix"]["cells"]}
    assert data["matrix"]["rows"] == ["pooling=mean"]
    assert cells == {"fake-fixed": "fixed", "fake-broke": "new"}
    assert (data["corpus"]["stored"], data["corpus"]["inside"]) == (2, 1)
    stored = [r for r in data["corpus"]["rows"] if not r["found"]]
    found = [r for r in data["corpus"]["rows"] if r["found"]]
    assert [(r["target"], r["change"]) for r in stored] == [("fake-fixed", "fixed")]
    assert [(r["target"], r["change"]) for r in found] == [("fake-broke", "new")]
    assert data["campaign"]["samples"] >= 1
    focus_row = data["campaign"]["coverage"]["focus (every pin, input and shape)"]
    assert focus_row["generated"] == data["campaign"]["samples"]  # every sample inside
    pythons = {s["label"]: s["versions"]["python"] for s in data["sides"]}
    assert pythons == {"against": sys.executable, "toolchain": str(new / "bin" / "python")}
    # The case the campaign stored records the new interpreter.
    (case,) = (out / "found" / found[0]["bucket"]).glob("case.json")
    assert json.loads(case.read_text())["tool_versions"]["python"] == str(new / "bin" / "python")
    markdown = (out / "validate.md").read_text()
    assert markdown.startswith("## dlrm-fuzz validate: breaks 2, fixes 2\n")
    assert ET.parse(out / "validate.junit.xml").getroot().tag == "testsuites"
    print(f"\nvalidate on two interpreters, fake targets: {time.monotonic() - start:.1f}s")


# -- the real thing (pipeline, slow) ---------------------------------------------
@pytest.mark.slow
@pytest.mark.pipeline
def test_real_validate_reports_the_iree_3_12_crash_fixed(tmp_path: Path,
                                                         toolchain_root: Path) -> None:
    """IREE 3.12.0 (a uv environment, the one test_bump builds) against this
    install's IREE 3.13.0, both by path, on the crash's own model: the stored
    case (SIGFPE in Flow summarizeDispatchRegion on 3.12) is fixed, nothing
    broke, and the report names each side's versions."""
    from fuzz.regress.toolchains import environment

    start = time.monotonic()
    old = environment(Toolchain(("iree-base-compiler==3.12.0", "iree-base-runtime==3.12.0")),
                      toolchain_root).parents[1]
    built = time.monotonic() - start
    out = tmp_path / "out"
    done = _cli("validate", "--toolchain", sys.prefix, "--against", str(old),
                "--corpus", str(IREE_3_12_CORPUS),
                "--config", str(IREE_3_12_CORPUS / CRASH / "case.json"), "--targets", "iree-cpu",
                "--budget", "0s", "--seeds", "1", "--repeat", "1", "--workers", "2",
                "--out", str(out), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # fixed, nothing broke
    data = json.loads(done.stdout)
    assert [(r["bucket"], r["change"]) for r in data["corpus"]["rows"]] == [(CRASH, "fixed")]
    assert data["matrix"]["rows"] == ["plain", "empty_bags"]  # the crash's own model
    assert data["counts"]["new"] == 0
    versions = {s["label"]: s["versions"]["iree-base-compiler"] for s in data["sides"]}
    assert versions == {"against": "3.12.0", "toolchain": "3.13.0"}
    assert "fixes" in (out / "validate.md").read_text().splitlines()[0]
    print(f"\nreal validate 3.12 -> 3.13: environment {built:.1f}s, "
          f"validate {time.monotonic() - start - built:.1f}s")

"""Release bisection: the search over a scripted "toolchain" (unit: which
releases it tries, the answer in both directions, skips stepped around), the
range parsing and the repro-driven test (a stub repro.py, no install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.regress import bisect as bisect_module
from fuzz.regress.bisect import (BisectError, Mark, Step, bisect_releases, parse_range, repro_test,
                         versions_in)

RELEASES = ["2.9.0", "3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "3.6.0", "3.7.0",
            "3.8.0", "3.9.0", "3.10.0", "3.11.0", "3.12.0", "3.13.0"]


def scripted(marks: dict[str, Mark], tried: list[str]):  # type: ignore[no-untyped-def]
    def test(version: str) -> Step:
        tried.append(version)
        return Step(version, marks[version], {Mark.BAD: 1, Mark.GOOD: 0}.get(marks[version], 2),
                    0.1)
    return test


def _marks(first_change: int, before: Mark, after: Mark, skip: tuple[int, ...] = ()
           ) -> dict[str, Mark]:
    return {v: Mark.SKIP if i in skip else before if i < first_change else after
            for i, v in enumerate(RELEASES)}


@pytest.mark.parametrize("change", range(1, len(RELEASES)))
def test_finds_the_release_that_introduced_a_bug_in_log_steps(change: int) -> None:
    tried: list[str] = []
    result = bisect_releases(RELEASES, scripted(_marks(change, Mark.GOOD, Mark.BAD), tried))
    assert (result.direction, result.last_good, result.first_bad) == \
        ("introduced", RELEASES[change - 1], RELEASES[change])
    assert result.answer == f"introduced in {RELEASES[change]} (last good {RELEASES[change - 1]})"
    assert len(tried) <= 2 + 4  # both ends, then ceil(log2(13)) probes
    assert len(set(tried)) == len(tried)  # nothing tried twice


def test_finds_the_release_that_fixed_a_bug() -> None:
    tried: list[str] = []
    result = bisect_releases(RELEASES, scripted(_marks(10, Mark.BAD, Mark.GOOD), tried))
    assert (result.direction, result.last_bad, result.first_good) == ("fixed", "3.8.0", "3.9.0")
    assert result.answer == "fixed in 3.9.0 (last bad 3.8.0)"
    assert [s.version for s in result.steps] == tried


def test_skipped_releases_are_stepped_around_and_ends_walked_inward() -> None:
    marks = _marks(10, Mark.BAD, Mark.GOOD, skip=(0, 1, 14))  # old ends and newest cannot run
    result = bisect_releases(RELEASES, scripted(marks, []))
    assert result.answer == "fixed in 3.9.0 (last bad 3.8.0); cannot run on 2.9.0, 3.0.0, 3.13.0"


def test_only_skips_between_good_and_bad_give_the_candidates() -> None:
    marks = _marks(6, Mark.GOOD, Mark.BAD, skip=(4, 5, 6))
    result = bisect_releases(RELEASES, scripted(marks, []))
    assert result.direction == "introduced" and result.first_bad == "3.6.0"
    assert result.candidates == ("3.3.0", "3.4.0", "3.5.0", "3.6.0")
    assert result.answer.startswith("introduced between 3.2.0 and 3.6.0; first bad is one of "
                                    "3.3.0, 3.4.0, 3.5.0, 3.6.0")


def test_no_transition_or_nothing_runnable_is_not_comparable() -> None:
    present = bisect_releases(RELEASES, scripted({v: Mark.BAD for v in RELEASES}, []))
    assert not present.comparable
    assert present.answer == ("not comparable: the bug is present on every release that can "
                              "run the repro (2.9.0..3.13.0)")
    tried: list[str] = []
    nothing = bisect_releases(RELEASES, scripted({v: Mark.SKIP for v in RELEASES}, tried))
    assert not nothing.comparable and "no release in the range" in nothing.answer
    assert len(tried) == len(RELEASES)


def test_ranges() -> None:
    assert parse_range("2.9.0..3.13.0") == ("2.9.0", "3.13.0")
    with pytest.raises(BisectError, match="OLD..NEW"):
        parse_range("2.9.0-3.13.0")
    assert versions_in(RELEASES, "3.8.0", "3.10.0") == ["3.8.0", "3.9.0", "3.10.0"]
    with pytest.raises(BisectError, match="'3.7.1' is not installable"):
        versions_in(RELEASES, "3.7.1", "3.13.0")
    with pytest.raises(BisectError, match="must be older"):
        versions_in(RELEASES, "3.13.0", "3.8.0")


STUB = """import sys
v = {version!r}
if v in {bad!r}:
    print('run failed: boom'); print('signature: RUNTIME_ERROR|iree:x|boom'); sys.exit(1)
if v in {other!r}:
    print('signature: RUNTIME_ERROR|iree:x|another'); sys.exit(1)
if v in {crash!r}:
    import os; os.kill(os.getpid(), 11)
print('run passed: fixed'); sys.exit(0)
"""


@pytest.mark.engine
def test_repro_exit_statuses_become_marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """Each "release" is this Python with a version baked into repro.py's
    folder; a repro failing with another signature or dying is a skip."""
    folders: dict[str, Path] = {}
    for version in ("1", "2", "3", "4"):
        folder = tmp_path / version
        folder.mkdir()
        (folder / "repro.py").write_text(STUB.format(version=version, bad=["1"], other=["3"],
                                                     crash=["4"]))
        folders[version] = folder
    monkeypatch.setattr(bisect_module, "environment", lambda toolchain, root: Path(sys.executable))
    marks = {}
    for version, folder in folders.items():
        step = repro_test(folder, ("iree-base-compiler",), "RUNTIME_ERROR|iree:x|boom")(version)
        marks[version] = (step.mark, step.exit_code)
    assert marks == {"1": (Mark.BAD, 1), "2": (Mark.GOOD, 0), "3": (Mark.SKIP, 1),
                     "4": (Mark.SKIP, -11)}
    with pytest.raises(BisectError, match="no repro.py"):
        repro_test(tmp_path, ("iree-base-compiler",), "x")


@pytest.mark.engine
def test_bisect_command_rejects_bad_input_in_one_line(tmp_path: Path) -> None:
    for args in (["nope", "--iree", "3.8.0..3.9.0", "--corpus", str(tmp_path)],
                 ["nope", "--iree", "3.8.0-3.9.0"]):
        done = subprocess.run([sys.executable, "-m", "fuzz", "bisect", *args],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.startswith("dlrm-fuzz: error:")
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.pipeline
@pytest.mark.slow
def test_real_bisect_finds_the_release_that_fixed_a_real_compiler_crash(
        tmp_path: Path, toolchain_root: Path) -> None:
    """The bucket's own repro.py, run in uv environments of IREE 3.12.0 and
    3.13.0: the SIGFPE in AnnotateDispatches on a one-row table is fixed in
    3.13.0 (the full 2.9.0..3.13.0 bisection is in the README)."""
    import shutil

    store = tmp_path / "corpus"
    shutil.copytree(Path(__file__).parent / "data" / "corpus-iree-3.12", store)
    done = subprocess.run([sys.executable, "-m", "fuzz", "bisect", "compile_error-bfac04ea9b7d",
                           "--corpus", str(store), "--iree", "3.12.0..3.13.0",
                           "--env-root", str(toolchain_root)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fixed in 3.13.0 (last bad 3.12.0)" in done.stdout, done.stdout
    steps = [line for line in done.stdout.splitlines() if line.lstrip().startswith(("3.12.0",
                                                                                  "3.13.0"))]
    assert len(steps) == 2, done.stdout

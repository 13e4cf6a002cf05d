"""Release bisection (``dlrm-fuzz bisect``): which release of a package
brought a bug in, or took it out.

The search is ``git bisect`` over an ordered list of installable releases:
each step installs one release in its own cached uv environment
(``fuzz.regress.toolchains``) and runs the bucket's standalone ``repro.py`` there,
whose exit status is already the test: 1 the bug is present ("bad"), 0 it is
absent ("good"), anything else the release cannot run the repro ("skip": a
missing device, an older compiler that cannot parse today's program, a
crash). Skipped releases are stepped around, never guessed; when only
skipped releases separate a good from a bad one, the answer says the first
bad is one of them. Both directions are answered: a bug present at the old
end and absent at the new end was *fixed*, and the search then finds the
last bad and first good release.

``bisect_releases`` is pure over a ``test(version) -> Step`` callable, so the
search is tested without installing anything.
"""

from __future__ import annotations

import enum
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from fuzz.regress.toolchains import Toolchain, ToolchainError, environment, releases

__all__ = ["Mark", "Step", "BisectResult", "bisect_releases", "parse_range", "versions_in",
           "repro_test", "IREE_PACKAGES", "BisectError"]

IREE_PACKAGES = ("iree-base-compiler", "iree-base-runtime")


class BisectError(ValueError):
    """Bad range or bucket: one line naming the problem and the fix."""


class Mark(str, enum.Enum):
    """How one release's repro run counts for the bisection (bad, good, or untestable)."""
    BAD = "bad"
    GOOD = "good"
    SKIP = "skip"


@dataclass(frozen=True)
class Step:
    """One release tried: its mark, the repro's exit status, why."""

    version: str
    mark: Mark
    exit_code: int | None
    seconds: float
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        """The step as JSON for the bisect report, its mark as plain text."""
        out = asdict(self)
        out["mark"] = self.mark.value
        return out


@dataclass
class BisectResult:
    """The answer, and every step that led to it (in the order tried)."""

    packages: tuple[str, ...]
    versions: tuple[str, ...]
    steps: list[Step] = field(default_factory=list)
    direction: str = ""  # "introduced" | "fixed" | "" (no transition / not comparable)
    last_good: str | None = None
    first_bad: str | None = None
    last_bad: str | None = None  # fixed: the last release with the bug
    first_good: str | None = None  # fixed: the first release without it
    candidates: tuple[str, ...] = ()  # skipped releases the answer cannot tell apart
    answer: str = ""

    @property
    def comparable(self) -> bool:
        """False when the ends showed no transition, so there is no answer to give."""
        return bool(self.direction)

    def to_dict(self) -> dict[str, object]:
        """The result and its steps as JSON, for ``bisect --json``."""
        out = {k: v for k, v in asdict(self).items() if k != "steps"}
        out["steps"] = [s.to_dict() for s in self.steps]
        out["comparable"] = self.comparable
        return out


def parse_range(text: str) -> tuple[str, str]:
    """``2.9.0..3.13.0`` -> ("2.9.0", "3.13.0")."""
    match = re.fullmatch(r"\s*([0-9][0-9A-Za-z.+!_-]*?)\s*\.\.\s*([0-9][0-9A-Za-z.+!_-]*)\s*", text)
    if not match:
        raise BisectError(f"range={text!r}: write OLD..NEW with two release versions, "
                          "e.g. 2.9.0..3.13.0")
    return match.group(1), match.group(2)


def versions_in(available: Sequence[str], low: str, high: str) -> list[str]:
    """The releases from ``low`` to ``high`` inclusive, oldest first; both
    ends must be releases (a typo must not silently shrink the range)."""
    ordered = list(available)
    for end in (low, high):
        if end not in ordered:
            raise BisectError(f"release={end!r} is not installable; choose from "
                              f"{', '.join(ordered[:3])} ... {', '.join(ordered[-3:])}")
    lo, hi = ordered.index(low), ordered.index(high)
    if lo >= hi:
        raise BisectError(f"range={low}..{high}: the first release must be older than the "
                          "second")
    return ordered[lo:hi + 1]


def bisect_releases(versions: Sequence[str], test: Callable[[str], Step],
                    packages: tuple[str, ...] = IREE_PACKAGES,
                    on_step: Callable[[Step], None] | None = None) -> BisectResult:
    """Binary search for the release where ``test`` changes its mark."""
    if len(versions) < 2:
        raise BisectError(f"versions={list(versions)!r}: need at least two releases to bisect")
    result = BisectResult(tuple(packages), tuple(versions))
    marks: dict[int, Mark] = {}

    def mark(i: int) -> Mark:
        if i not in marks:
            step = test(versions[i])
            result.steps.append(step)
            marks[i] = step.mark
            if on_step is not None:
                on_step(step)
        return marks[i]

    # The nearest testable release at each end (skips walked past, inward).
    lo = next((i for i in range(len(versions)) if mark(i) is not Mark.SKIP), None)
    if lo is None:
        result.answer = "not comparable: no release in the range can run the repro"
        return result
    hi = next((i for i in range(len(versions) - 1, lo, -1) if mark(i) is not Mark.SKIP), None)
    skipped_ends = [versions[i] for i in range(len(versions))
                    if marks.get(i) is Mark.SKIP and (i < lo or (hi is not None and i > hi))]
    if hi is None or marks[lo] is marks[hi]:
        where = (f"{versions[lo]}..{versions[hi]}" if hi is not None else versions[lo])
        state = "present" if marks[lo] is Mark.BAD else "absent"
        result.answer = (f"not comparable: the bug is {state} on every release that can run "
                         f"the repro ({where})")
        if skipped_ends:
            result.answer += f"; cannot run on {', '.join(skipped_ends)}"
        return result
    old_mark = marks[lo]
    # Invariant: versions[lo] has old_mark, versions[hi] the other; find the change.
    while True:
        between = [i for i in range(lo + 1, hi) if marks.get(i) is not Mark.SKIP]
        untested = [i for i in between if i not in marks]
        if not untested:
            break
        middle = (lo + hi) // 2
        # Nearest untested release to the middle (skips stepped around).
        probe = min(untested, key=lambda i: (abs(i - middle), i))
        got = mark(probe)
        if got is Mark.SKIP:
            continue
        if got is old_mark:
            lo = probe
        else:
            hi = probe
    candidates = tuple(versions[i] for i in range(lo + 1, hi + 1))
    if old_mark is Mark.GOOD:
        result.direction, result.last_good, result.first_bad = "introduced", versions[lo], versions[hi]
        what = "first bad"
    else:
        result.direction, result.last_bad, result.first_good = "fixed", versions[lo], versions[hi]
        what = "first good"
    if len(candidates) > 1:
        result.candidates = candidates
        result.answer = (f"{result.direction} between {versions[lo]} and {versions[hi]}; "
                         f"{what} is one of {', '.join(candidates)} (the others cannot run "
                         "the repro)")
    elif old_mark is Mark.GOOD:
        result.answer = f"introduced in {versions[hi]} (last good {versions[lo]})"
    else:
        result.answer = f"fixed in {versions[hi]} (last bad {versions[lo]})"
    if skipped_ends:
        result.answer += f"; cannot run on {', '.join(skipped_ends)}"
    return result


def _tail(text: str, words: str = "") -> str:
    """The line that says why: the signature, a 'cannot run' line or the last one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()
             and "Warning" not in line and not line.startswith("return ")]
    for prefix in ("signature:", "cannot run:", "run passed", "lowering passed",
                   "compile passed", words or "\0"):
        hit = next((line for line in lines if line.startswith(prefix)), None)
        if hit:
            return hit[:300]
    return lines[-1][:300] if lines else ""


def repro_test(folder: Path, packages: Sequence[str], signature: str,
               env_root: Path | None = None, timeout_s: float = 900.0
               ) -> Callable[[str], Step]:
    """A test for ``bisect_releases``: the bucket's ``repro.py`` run by the
    Python of an environment with every package of ``packages`` at the release.
    Exit 1 with another bucket's signature is a skip: that release fails
    differently, which says nothing about this bug."""
    script = folder / "repro.py"
    if not script.is_file():
        raise BisectError(f"bucket={folder.name}: no repro.py in {folder}; write one with "
                          f"`dlrm-fuzz repro {folder.name} --write`")

    def test(version: str) -> Step:
        began = time.monotonic()
        try:
            python = environment(Toolchain(tuple(f"{p}=={version}" for p in packages)), env_root)
        except ToolchainError as exc:
            return Step(version, Mark.SKIP, None, time.monotonic() - began, str(exc))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        try:
            done = subprocess.run([str(python), "-I", script.name], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return Step(version, Mark.SKIP, None, time.monotonic() - began,
                        f"repro.py ran over {timeout_s:.0f}s")
        seconds = time.monotonic() - began
        said = _tail(done.stdout + "\n" + done.stderr)
        if done.returncode == 1 and f"signature: {signature}" in done.stdout:
            return Step(version, Mark.BAD, 1, seconds, said)
        if done.returncode == 0:
            return Step(version, Mark.GOOD, 0, seconds, said)
        why = said if done.returncode in (1, 2) else f"exit {done.returncode}: {said}".strip()
        return Step(version, Mark.SKIP, done.returncode, seconds, why)

    return test

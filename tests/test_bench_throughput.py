"""bench/throughput.py measures the old engine from a git rev (issue 21): a
clone without that rev gets a one-line error naming the fix before any
figure is measured. Unit tier: no compiler, no workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "throughput.py"


@pytest.mark.engine
def test_a_missing_old_engine_rev_is_one_line_naming_git_fetch_tags() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--old-rev", "no-such-rev-of-dlrm-fuzz",
                           "--skip", "1,2,3,7,8"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "'no-such-rev-of-dlrm-fuzz'" in done.stderr and "git fetch --tags" in done.stderr

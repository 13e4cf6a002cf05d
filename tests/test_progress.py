"""Live progress: a redrawn status line on a terminal, plain lines when piped
(unit, with a stand-in report), and what a piped campaign prints (engine tier)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console

from fuzz.engine.progress import CampaignProgress


@dataclass
class _Report:
    samples: int = 0
    batches_checked: int = 0
    findings: list[object] = field(default_factory=list)
    new_buckets: list[object] = field(default_factory=list)


def test_piped_output_gets_plain_lines_at_most_every_interval() -> None:
    out = io.StringIO()
    progress = CampaignProgress(Console(file=out, force_terminal=False, width=200), 600,
                                every_s=3600)
    report = _Report()
    progress.phase("generate", report)
    for n in range(1, 6):
        report.samples, report.batches_checked = n, 2 * n
        progress.update(report)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "-- generate"
    assert len(lines) == 2 and "\x1b" not in out.getvalue()  # one status line, no redraws
    assert re.fullmatch(r"0m0\ds elapsed, 9m5\ds left \| generate \| samples 1 \| batches 2 "
                        r"\| buckets 0 \(0 new\)", lines[1]), lines[1]


def test_a_terminal_gets_a_status_line_that_redraws() -> None:
    out = io.StringIO()
    progress = CampaignProgress(Console(file=out, force_terminal=True, width=200), 60)
    report = _Report(samples=7, batches_checked=21, findings=[1, 2], new_buckets=[1])
    progress.phase("shrink", report)
    progress.update(report)
    progress.print("  NEW  sample 7: ...")
    progress.close()
    text = out.getvalue()
    assert "\x1b[" in text  # cursor control: the line is redrawn in place
    assert "shrink | samples 7 | batches 21 | buckets 2 (1 new)" in text
    assert "NEW  sample 7" in text


@pytest.mark.engine
def test_a_piped_campaign_prints_progress_lines(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", "--targets", "fake-ok", "--corpus",
         str(tmp_path / "c"), "--max-samples", "3", "--no-replay", "--no-shrink", "--no-report",
         "--workers", "1", "--no-cache", "--budget", "5m"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "-- generate" in done.stdout
    assert re.search(r"elapsed, \d+m\d\ds left \| generate \| samples \d+ \| batches \d+",
                     done.stdout), done.stdout[:2000]
    assert "\x1b[2K" not in done.stdout  # no redraw codes in a log

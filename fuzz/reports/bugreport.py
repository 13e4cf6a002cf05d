"""Turns a stored bucket into an upstream-ready bug: the standalone
``repro.py`` (checked when written), the files for the toolchain's own
command-line tools, and ``REPORT.md``; ``case.json`` records whether the
reproducer reproduces (``repro_status``), never a repro that passes as valid.

The writing of repro.py and the tool files needs torch (an export, a
compile), so it runs as a worker job; REPORT.md is plain text, written by the
campaign process from what the job returns.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

from fuzz.store import corpus
from oracles.results import TargetResult
from fuzz.targets.cache import ArtifactCache
from fuzz.reports.markdown import REPORT_NAME, report_markdown
from fuzz.targets.catalog import FAKE_TARGETS, Target
from fuzz.reports.repro import write_repro
from fuzz.reports.toolfiles import write_tool_files

__all__ = ["BugReportJob", "file_bug_report"]


@dataclass(frozen=True)
class BugReportJob:
    """Worker job: write and check repro.py and the tool files of one folder."""

    folder: str
    table: dict[str, Target] | None = None
    # The first report of an op-level bucket: the one-op form only (the
    # tool files and a model form come with the report after shrinking).
    one_op_only: bool = False
    # Its first report searched for one failing op and found none
    # (``fuzz.reports.repro.write``: ``searched``): this one does not search.
    searched: bool = False
    # Read by a Ray pool: a report reads and writes the corpus folder, which
    # only the coordinator's machine has (fuzz.workers.rayactor.runs_here).
    runs_here: ClassVar[bool] = True

    @property
    def target_name(self) -> str:
        """Names the folder, so a worker lost on this job is reported against it."""
        return f"report:{Path(self.folder).name}"

    def __call__(self, on_stage: Callable[[str], None], cache: ArtifactCache | None) -> Any:


        began = time.monotonic()
        folder = Path(self.folder)
        entry = corpus.load_entry(folder)
        if entry.target in FAKE_TARGETS:  # engine tests: nothing upstream to report
            return {"repro": {"status": "not written: FAKE target"}, "tools": {}}
        on_stage("repro")
        repro = write_repro(folder, entry, self.table, one_op_only=self.one_op_only,
                            searched=self.searched)
        if self.one_op_only and repro.status != "reproduces":
            return {"repro": repro.to_dict(), "tools": {},
                    "seconds": round(time.monotonic() - began, 2)}
        on_stage("tools")
        tools = write_tool_files(folder, entry, self.table)
        # Its cost: the campaign keeps room for the reports still to write.
        return {"repro": repro.to_dict(), "tools": tools.to_dict(),
                "seconds": round(time.monotonic() - began, 2)}


def file_bug_report(root: Path, bucket: str, answer: Any) -> str:
    """Record a ``BugReportJob``'s answer in the case and write REPORT.md;
    returns the repro status. A job lost to a crash or timeout (the pool then
    answers a TargetResult) is recorded as such."""
    if not isinstance(answer, dict):
        failure = answer.failure if isinstance(answer, TargetResult) else None
        status = f"cannot run: the report job failed ({failure.message if failure else answer})"
        corpus.update_case(root, bucket, repro_status=status[:300])
        return status
    repro, tools = answer["repro"], answer["tools"]
    status = str(repro.get("status", "not checked"))
    corpus.update_case(root, bucket, repro_status=status, tools=tools, repro={
        k: repro.get(k) for k in ("kind", "target", "lines", "exit_code")})
    entry = corpus.load_entry(root / bucket)
    text = report_markdown(root / bucket, entry, repro, tools)
    temp = root / bucket / f".{REPORT_NAME}.{os.getpid()}"
    temp.write_text(text)
    os.replace(temp, root / bucket / REPORT_NAME)
    return status

"""REPORT.md and the corpus digest (unit tier: text from typed entries, no
compiler), and the `report` / `repro` commands' handling of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.store import corpus
from fuzz.store.corpus import CorpusEntry
from fuzz.reports.markdown import digest_json, digest_markdown, report_markdown, upstream_of
from oracles import Stage, Verdict
from tests.helpers import tiny_config, tiny_sample

POOLED = "op:aten.embedding_bag.padding_idx[per_sample_weights]"


def _entries() -> list[CorpusEntry]:
    sample = tiny_sample(tiny_config())
    return [
        CorpusEntry(bucket="mismatch-aaa", signature="MISMATCH|torch-mlir:linalg-on-tensors|" + POOLED,
                    verdict=Verdict.MISMATCH, owner="torch-mlir:linalg-on-tensors",
                    target="refbackend", sample=sample, culprit=POOLED,
                    seen_on=("iree-cpu", "refbackend-dyn"), repro_status="reproduces",
                    numbers={"expected": "float64[1, 1] min=0.3 max=0.3",
                             "got": "float32[1, 1] min=0.4 max=0.4"}),
        CorpusEntry(bucket="runtime_error-bbb", signature="RUNTIME_ERROR|iree:vulkan-spirv|x",
                    verdict=Verdict.RUNTIME_ERROR, owner="iree:vulkan-spirv",
                    target="iree-vulkan-dyn", sample=sample, stage=Stage.RUN,
                    error="INVALID_ARGUMENT; Vulkan dispatch binding 2 resolved to an empty buffer range",
                    seen_on=("iree-vulkan-dyn",)),
        CorpusEntry(bucket="export_error-ccc", signature="EXPORT_ERROR|torch.export|x",
                    verdict=Verdict.EXPORT_ERROR, owner="torch.export", target="iree-cpu",
                    sample=sample, stage=Stage.EXPORT, error="boom", seen_on=("iree-cpu",)),
    ]


def test_report_says_what_each_repro_form_needs_and_reads(tmp_path: Path) -> None:
    """An export repro needs torch alone, a refbackend one no IREE; the files a
    script loads from its folder are named (a maintainer attaches them)."""
    mismatch, _, export = _entries()
    (tmp_path / "repro.py").write_text("print('hi')\n")
    export_text = report_markdown(tmp_path, export, {"status": "reproduces", "kind": "export"})
    assert "(needs only torch and numpy)" in export_text and "2 when it cannot run" in export_text
    for name in ("arg0.npy", "refbackend_runtime.py", "notes.txt"):
        (tmp_path / name).write_text("x")
    ref_text = report_markdown(tmp_path, mismatch, {"status": "reproduces", "kind": "single-op",
                                                    "target": "refbackend"})
    assert "(needs only torch, torch-mlir and numpy; reads arg0.npy, refbackend_runtime.py " \
        "beside it)" in ref_text


def test_upstream_project_and_component_follow_the_owner() -> None:
    mismatch, vulkan, export = _entries()
    assert upstream_of(mismatch).repository == "llvm/torch-mlir"
    assert "TorchToLinalg" in upstream_of(mismatch).component
    assert upstream_of(vulkan).project == "IREE" and "HAL driver" in upstream_of(vulkan).component
    assert upstream_of(export).project == "PyTorch"


def test_report_has_title_project_versions_program_and_commands(tmp_path: Path) -> None:
    entry = _entries()[0]
    (tmp_path / "repro.py").write_text("print('hi')\n")
    tools = {"tool": "iree-run-module", "commands": ["iree-compile @compile.flagfile program.mlir -o m.vmfb"],
             "expect": "mismatch"}
    text = report_markdown(tmp_path, entry, {"status": "reproduces"}, tools)
    assert text.startswith("# [torch-mlir] wrong results (no error) from aten.embedding_bag")
    assert "torch-mlir 20261001" in text and "iree-base-compiler 3.13.0" in text
    assert "```python\nprint('hi')\n```" in text and "iree-compile @compile.flagfile" in text
    assert "min=0.3" in text and "min=0.4" in text  # tensor summaries, not raw tensors


def test_digest_groups_by_project_one_line_per_bucket() -> None:
    text = digest_markdown(_entries())
    assert text.index("### torch-mlir (1)") < text.index("### IREE (1)") < text.index("### PyTorch (1)")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 3 and "reproduces" in rows[0] and "not written" in rows[1]
    data = json.loads(digest_json(_entries()))
    assert [b["project"] for b in data["buckets"]] == ["torch-mlir", "IREE", "PyTorch"]


@pytest.mark.engine
def test_report_and_repro_commands_on_a_real_folder_and_bad_input(tmp_path: Path) -> None:
    for entry in _entries():
        corpus.save(tmp_path, entry)
    done = subprocess.run([sys.executable, "-m", "fuzz", "report", str(tmp_path), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and len(json.loads(done.stdout)["buckets"]) == 3
    missing = subprocess.run([sys.executable, "-m", "fuzz", "repro", "nope", "--corpus", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "bucket='nope': no such case" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_a_bug_of_ours_in_one_report_job_spares_the_other_reports(tmp_path: Path) -> None:
    """The report phase runs one job per bucket: a job that hits a bug of
    ours is recorded in that case and in the campaign's harness errors (exit 3
    with the summary), and every other bucket still gets its report."""
    from types import SimpleNamespace

    from fuzz.engine.campaign import Campaign, CampaignOptions
    from fuzz.workers.pool import HarnessFault

    root = tmp_path / "corpus"
    entries = _entries()
    for entry in entries:
        corpus.save(root, entry)
    buckets = [e.bucket for e in entries]
    fine = {"repro": {"status": "reproduces", "kind": "model", "target": "iree-cpu", "lines": 9,
                      "exit_code": 1}, "tools": []}
    answers = dict(zip(buckets, [fine, HarnessFault("report", "Traceback ...\nIndexError: "
                                                            "pop from empty list"), fine]))

    class Pool:
        """Answers the report jobs in the order they were submitted."""

        def __init__(self) -> None:
            self.jobs: list = []  # type: ignore[type-arg]

        def submit(self, job, after=None, urgent=False) -> int:  # type: ignore[no-untyped-def]
            self.jobs.append(job)
            return len(self.jobs) - 1

        def completed(self, timeout=None) -> list:  # type: ignore[no-untyped-def,type-arg]
            names = [j.folder.rsplit("/", 1)[-1] for j in self.jobs]
            assert sorted(names) == sorted(buckets), "one report job per bucket"
            return [(ticket, answers[name]) for ticket, name in enumerate(names)]

    campaign = Campaign(CampaignOptions(corpus_dir=root, targets=("fake-ok",)))
    campaign.session.pool = Pool()
    campaign.bugs.needs_report.update(buckets)
    campaign.bugs.write_reports()
    assert campaign.report.harness_errors == [
        "report of runtime_error-bbb: IndexError: pop from empty list"]
    assert campaign.report.repro_status["mismatch-aaa"] == "reproduces"
    assert campaign.report.repro_status["export_error-ccc"] == "reproduces"
    assert (root / "export_error-ccc" / "REPORT.md").is_file()
    status = json.loads((root / "runtime_error-bbb" / "case.json").read_text())["repro_status"]
    assert "bug in dlrm-fuzz: IndexError: pop from empty list" in status

"""``dlrm-fuzz corpus --rekey``: a corpus stored under bucket-key version 3
(IREE owners spelled per backend in the key) gets today's ids, the ids a
fresh run files the same faults in; nothing is overwritten or lost."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fuzz.store import corpus
from fuzz.cli.main import main
from fuzz.store.rekey import rekey
from oracles import KEY_VERSION, Verdict, bucket_for, error_key
from tests.helpers import tiny_sample

LINE = "error: failed to legalize operation 'arith.truncf' that was explicitly marked illegal"


def _v3_bucket(key: str) -> str:
    """The id version 3 gave a key (the hash never changed, only the key)."""
    return f"compile_error-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _store_v3(root: Path, owner: str) -> str:
    key = f"COMPILE_ERROR|{owner}|arith.truncf|{LINE}"
    bucket = _v3_bucket(key)
    corpus.save(root, corpus.CorpusEntry(
        bucket=bucket, signature=key, verdict=Verdict.COMPILE_ERROR, owner=owner,
        target="iree-vmvx", sample=tiny_sample(), error=LINE, key_version=3))
    (root / bucket / "REPORT.md").write_text(f"# {bucket}\nbucket `{bucket}` on vmvx\n")
    return bucket


def test_rekey_renames_to_the_id_a_fresh_run_gives(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    old = _store_v3(root, "iree:vmvx")
    today = bucket_for(Verdict.COMPILE_ERROR,
                       error_key(Verdict.COMPILE_ERROR, "iree:compiler", "arith.truncf", LINE))
    assert old != today
    (record,) = rekey(root)
    assert (record.old, record.new, record.status) == (old, today, "renamed")
    assert not (root / old).exists()
    (entry,) = corpus.load(root)[0]
    assert entry.bucket == today and entry.key_version == KEY_VERSION
    assert entry.owner == "iree:vmvx"  # blame's word is kept; only the id moved
    assert bucket_for(entry.verdict, entry.signature) == today
    assert (root / today / "REPORT.md").read_text() == f"# {today}\nbucket `{today}` on vmvx\n"
    assert [r.status for r in rekey(root)] == ["current"]  # idempotent


def test_rekey_never_overwrites_a_case_that_lands_on_a_taken_id(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    first, second = _store_v3(root, "iree:vmvx"), _store_v3(root, "iree:compiler")
    records = {r.old: r for r in rekey(root)}
    assert {r.new for r in records.values()} and len({r.new for r in records.values()}) == 1
    statuses = sorted(r.status.split(":")[0] for r in records.values())
    assert statuses == ["kept", "renamed"]
    assert len(corpus.load(root)[0]) == 2  # both cases are still there
    kept = next(r for r in records.values() if r.status.startswith("kept"))
    assert (root / kept.old / "case.json").is_file()
    assert json.loads((root / kept.old / "case.json").read_text())["key_version"] == 3
    assert {first, second} == set(records)


def test_cli_rekey_reports_what_it_renamed(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "corpus"
    old = _store_v3(root, "iree:llvm-cpu")
    assert main(["corpus", str(root), "--rekey"]) == 0
    out = capsys.readouterr().out
    assert f"{old} -> compile_error-" in out and "1 of 1 buckets renamed" in out

"""Bucket keys name the fault, not where it was noticed: every real message in
``tests/data/messages`` (collected from today's toolchain by running the
pipeline and the default campaign; ``index.json`` says which fault each one
is, and which targets and samples produce it) keys the same as the other
messages of its fault and differently from every other fault. Synthetic
variants of the real texts (other SSA names, shapes, numbers, call contexts,
bindings) prove the rules are not fitted to one sample. Unit tier: text only,
no compiler.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from oracles import Failure, Verdict, classify, error_key, first_error_line, normalize_error

MESSAGES = Path(__file__).parent / "data" / "messages"
INDEX: dict[str, dict[str, Any]] = json.loads((MESSAGES / "index.json").read_text())
FAULTS = sorted({meta["fault"] for meta in INDEX.values()})


def _message(name: str) -> str:
    return (MESSAGES / name).read_text()


def _failure(name: str) -> Failure:
    meta = INDEX[name]
    return Failure(meta["stage"], meta["error_type"], _message(name), signal=meta.get("signal"),
                   exit_code=meta.get("exit_code"), timed_out=meta.get("timed_out", False))


def _text_key(name: str) -> str:
    """The error part of a bucket key, as the campaign computes it."""
    return normalize_error(classify(_failure(name))[1])


def _full_key(name: str) -> str:
    """The whole bucket key: verdict, owner, blamed op and error text."""
    verdict, line, op = classify(_failure(name))
    return error_key(verdict, INDEX[name]["owner"], op, line)


def test_index_and_fixtures_agree() -> None:
    files = {p.name for p in MESSAGES.glob("*.txt")}
    assert files == set(INDEX), "every fixture needs an index.json entry and vice versa"


@pytest.mark.parametrize("name", sorted(INDEX))
def test_fixture_verdict(name: str) -> None:
    assert classify(_failure(name))[0] is Verdict(INDEX[name]["verdict"])


@pytest.mark.parametrize("name", sorted(INDEX))
def test_key_drops_where_the_fault_was_noticed(name: str) -> None:
    key = _text_key(name)
    for leak in ("while invoking", "while calling", "hal.fence", "hal.device", ".c:", ".py",
                 "/work/", "%arg", "Warning", "loc(\"", "1337"):
        assert leak not in key, f"{name}: {leak!r} leaks into {key!r}"


@pytest.mark.parametrize("fault", FAULTS)
def test_one_fault_one_text_key(fault: str) -> None:
    names = [n for n, meta in INDEX.items() if meta["fault"] == fault]
    keys = {n: _text_key(n) for n in names}
    assert len(set(keys.values())) == 1, keys


@pytest.mark.parametrize("fault", FAULTS)
def test_one_fault_one_bucket_per_owner(fault: str) -> None:
    by_owner: dict[str, set[str]] = {}
    for name, meta in INDEX.items():
        if meta["fault"] == fault:
            by_owner.setdefault(meta["owner"], set()).add(_full_key(name))
    assert all(len(keys) == 1 for keys in by_owner.values()), by_owner


def test_different_faults_never_share_a_bucket() -> None:
    keys: dict[str, set[str]] = {}
    for name, meta in INDEX.items():
        keys.setdefault(meta["fault"], set()).add(_full_key(name))
    for a, b in itertools.combinations(FAULTS, 2):
        assert not keys[a] & keys[b], f"{a} and {b} share a bucket"


@pytest.mark.parametrize("a, b", [
    ("linalg-int32-select--iree-cpu.txt", "quantized-byte--iree-cpu.txt"),
    ("quantized-byte--iree-cpu.txt", "quantized-4bit--iree-cpu.txt"),
    ("tosa-embedding-bag--iree-tosa.txt", "tosa-size-int--iree-tosa-dyn.txt"),
    ("tosa-size-int--iree-tosa-dyn.txt", "tosa-gather--campaign.txt"),
    ("linalg-int32-select--iree-cpu.txt", "vulkan-empty-range--queue-execute.txt"),
    ("crash-sigsegv.txt", "crash-sigabrt.txt"),
    ("crash-memory-cap.txt", "timeout.txt"),
])
def test_different_faults_differ_by_text_alone(a: str, b: str) -> None:
    """Even without the op and owner, the text tells these faults apart."""
    assert _text_key(a) != _text_key(b)


def test_vulkan_call_contexts_share_one_key() -> None:
    """The reported problem: one empty-range fault, noticed at submission
    (hal.device.queue.execute) or at the wait (hal.fence.await), on binding 1
    or 2, was two buckets."""
    names = [n for n in INDEX if n.startswith("vulkan-empty-range--")]
    messages = "".join(_message(n) for n in names)
    assert "hal.fence.await" in messages and "hal.device.queue.execute" in messages
    assert len({_full_key(n) for n in names}) == 1
    assert _text_key(names[0]) == ("Error invoking function: <src>: INVALID_ARGUMENT; "
                                   "Vulkan dispatch binding N resolved to an empty buffer range")


def _variants(text: str) -> list[str]:
    """The same message as another sample, build or call site would print it."""
    return [
        text.replace("%23", "%117").replace("%arg4", "%arg19").replace("%11", "%2"),
        text.replace("[10,12]", "[977,20]").replace("[2,4]", "[64,16]").replace("[3]", "[?]"),
        text.replace("si64", "si32"),
        text.replace(":461:0", ":470:0").replace("/work/main/", "/home/ci/checkout/"),
        text.replace("command_buffer.c:1337", "command_buffer.c:1402").replace("c/runtime", "runtime"),
        text.replace("binding 1 ", "binding 7 ").replace("binding 2 ", "binding 0 "),
        text.replace("hal.device.queue.execute; while calling import",
                     "hal.fence.await; while calling variadic import"),
        text.replace("; \n", "; while invoking native function hal.command_buffer.dispatch; \n"),
        text.replace("within 5s", "within 120s").replace("of 1024 MiB", "of 8192 MiB"),
    ]


@pytest.mark.parametrize("name", sorted(INDEX))
def test_synthetic_variants_keep_the_key(name: str) -> None:
    base = _text_key(name)
    for variant in _variants(_message(name)):
        assert normalize_error(first_error_line(variant)) == base


@pytest.mark.parametrize("line, other", [
    # Device ordinals, byte sizes and offsets are where, not what.
    ("error: INVALID_ARGUMENT; buffer range out of bounds: offset 1024 + length 256 > 512 bytes on vulkan://0",
     "error: INVALID_ARGUMENT; buffer range out of bounds: offset 64 + length 8 > 16B on vulkan://3"),
    ("error: RESOURCE_EXHAUSTED; device 0 out of memory allocating 4.5 MiB",
     "error: RESOURCE_EXHAUSTED; device #2 out of memory allocating 12 MiB"),
    ("error: 'linalg.generic' op operand #2 does not dominate this use",
     "error: 'linalg.generic' op operand #0 does not dominate this use"),
    ("worker died (SIGSEGV) in stage run", "worker died (SIGSEGV) in stage run"),
])
def test_where_is_not_what(line: str, other: str) -> None:
    assert normalize_error(line) == normalize_error(other)


@pytest.mark.parametrize("line, other", [
    # What stays: status codes, stage names, op names, exit codes, the words.
    ("error: INVALID_ARGUMENT; Vulkan dispatch binding 1 resolved to an empty buffer range",
     "error: OUT_OF_RANGE; Vulkan dispatch binding 1 resolved to an empty buffer range"),
    ("worker died (SIGSEGV) in stage compile", "worker died (SIGSEGV) in stage run"),
    ("worker died (exit code 1) in stage compile", "worker died (exit code 3) in stage compile"),
    ("error: failed to legalize operation 'torch.aten.gather' that was explicitly marked illegal: %1 = x",
     "error: failed to legalize operation 'torch.aten.index_select' that was explicitly marked illegal: %1 = x"),
])
def test_different_faults_stay_apart(line: str, other: str) -> None:
    assert normalize_error(line) != normalize_error(other)


def test_warnings_before_a_message_without_error_line_are_skipped() -> None:
    message = ("/venv/lib/python3.11/copyreg.py:105: FutureWarning: `isinstance(treespec, LeafSpec)` "
               "is deprecated\n  return cls.__new__(cls, *args)\nSomething real went wrong\n")
    assert first_error_line(message) == "Something real went wrong"


def test_log_prefixes_with_time_and_thread_do_not_split_a_key() -> None:
    """torch logs through glog: "E1203 07:25:40.958000 2161 file.py:3090] ..."
    (seen on a real torch.export failure): the prefix changes every run."""
    lines = [f"E1203 07:25:{s:02d}.958000 {pid} .tox/tests/lib/python3.11/site-packages/torch/"
             f"_subclasses/fake_tensor.py:3090] failed while attempting to run meta for "
             f"quantized.embedding_bag_byte_rowwise_offsets.default\nTraceback (most recent call "
             f"last):\n  ...\nRuntimeError: boom" for s, pid in ((40, 2161), (13, 99))]
    first = [first_error_line(line) for line in lines]
    assert first[0] == first[1] == ("failed while attempting to run meta for "
                                    "quantized.embedding_bag_byte_rowwise_offsets.default")

"""Failure signatures: the bucket a failure belongs to, so that one bug found
by a thousand samples, on many targets, is stored once.

This module is the one definition of bucket identity that replay, shrinking,
reports and (later) bump and bisect build on; ``KEY_VERSION`` is stored with
every corpus entry and changes whenever a key's recipe does.

A bucket id is ``<verdict>-<12 hex digits>``, a hash of a readable key:

- errors: ``verdict | owner | blamed op | normalized first error line``. The
  owner is the component the failing stage belongs to (``torch.export``,
  ``torch-mlir:<output type>``, an IREE backend), not a target name, so a
  static and a dynamic target, or two drivers of one backend, share a bucket;
  the normalized line keeps the fault and drops the accidents of one sample.
- mismatches: ``MISMATCH | owner | culprit``. The culprit is what localization
  found: the first divergent op with the arguments that select its lowering
  (``op:aten.embedding_bag.padding_idx[per_sample_weights]``), else the
  minimal feature set feature ablation kept (``features:weighted_pooling``),
  else the sample's whole feature set (``sample:...``; coarse, the last resort).
  The owner comes from blame across targets (``oracles.blame``).
"""

from __future__ import annotations

import hashlib

from oracles.normalize import normalize_error
from oracles.verdict import Outcome, Verdict

__all__ = ["KEY_VERSION", "signature_key", "error_key", "mismatch_key", "bucket_for",
           "normalize_error"]

KEY_VERSION = 3


def error_key(verdict: Verdict, owner: str, op: str | None, error_line: str) -> str:
    what = "|".join(part for part in (op, normalize_error(error_line)) if part)
    return f"{verdict.value}|{owner}|{what}"


def mismatch_key(owner: str, culprit: str) -> str:
    return f"{Verdict.MISMATCH.value}|{owner}|{culprit}"


def signature_key(outcome: Outcome, owner: str, culprit: str | None = None) -> str:
    """The readable key of a failing outcome; ``culprit`` is required for a
    mismatch (there is no error text to key on)."""
    if outcome.verdict is Verdict.MISMATCH:
        if not culprit:
            raise ValueError("culprit=None: a MISMATCH key needs the localized culprit "
                             "(or the feature set it falls back to)")
        return mismatch_key(owner, culprit)
    return error_key(outcome.verdict, owner, outcome.op, outcome.error)


def bucket_for(verdict: Verdict, key: str) -> str:
    """A stable bucket id for a signature key: ``<verdict>-<12 hex digits>``."""
    return f"{verdict.value.lower()}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

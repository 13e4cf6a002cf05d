"""Failure signatures: the bucket a failure belongs to, so that one bug found
by a thousand samples, on many targets, is stored once.

This module is the one definition of bucket identity that replay, shrinking,
reports and (later) bump and bisect build on; ``KEY_VERSION`` is stored with
every corpus entry and changes whenever a key's recipe does.

A bucket id is ``<verdict>-<12 hex digits>``, a hash of a readable key:

- errors: ``verdict | owner | blamed op | normalized first error line``. The
  owner is the component the failing stage belongs to (``torch.export``,
  ``torch-mlir:<output type>``, ``torch-mlir:torch`` for the shared prefix,
  ``iree``), not a target name, so a static and a dynamic target, or two
  drivers of one backend, share a bucket; the normalized line keeps the fault
  and drops the accidents of one sample. IREE's owners enter the key as one
  family (``key_owner``): whether blame names ``iree:compiler`` or
  ``iree:llvm-cpu`` depends on how many IREE backends ran beside it, and a
  bucket must not move with the set of targets a run happened to use (the
  case still records the owner blame gave).
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
           "normalize_error", "key_owner", "upgrade_key", "flaky_key"]

KEY_VERSION = 4

# What changed at each version, for corpora stored under an older one:
# 4: IREE owners of errors enter the key as the family "iree" (``key_owner``).
_IREE_FAMILY = "iree"


def key_owner(owner: str) -> str:
    """The part of an error's owner that every subset of targets agrees on."""
    return _IREE_FAMILY if owner.startswith(_IREE_FAMILY + ":") else owner


def error_key(verdict: Verdict, owner: str, op: str | None, error_line: str) -> str:
    """The bucket key of an error: verdict, owner family, op and normalized error line."""
    what = "|".join(part for part in (op, normalize_error(error_line)) if part)
    return f"{verdict.value}|{key_owner(owner)}|{what}"


def upgrade_key(key: str) -> str:
    """A key stored under an older ``KEY_VERSION``, in today's recipe (the
    parts every version kept: verdict, owner, the rest)."""
    verdict, owner, rest = (key.split("|", 2) + ["", ""])[:3]
    if verdict == Verdict.MISMATCH.value or not owner:
        return key
    return f"{verdict}|{key_owner(owner)}|{rest}"


def mismatch_key(owner: str, culprit: str) -> str:
    """The bucket key of a wrong answer: blamed on its owner and first divergent op."""
    return f"{Verdict.MISMATCH.value}|{owner}|{culprit}"


def flaky_key(owner: str, culprit: str) -> str:
    """A wrong answer that changed when the same program ran again: its own
    bucket, apart from the deterministic MISMATCH of the same culprit."""
    return f"{Verdict.FLAKY.value}|{owner}|{culprit}"


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

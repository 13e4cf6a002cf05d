"""Failure signatures: the bucket a failure belongs to, so that one bug found
by a thousand samples is stored once.

A bucket id is a short hash of a readable key. For errors the key is the
verdict, who owns the failing stage (torch.export, the torch-mlir output type,
or the IREE target) and the first error line with the accidents of one sample
removed (SSA names, shapes, numbers, source locations): the same missing
lowering hit from two different configs lands in one bucket. For numeric
mismatches there is no error text, so the key is the target plus the DLRM
features the sample exercises that select distinct lowerings (weighted
pooling, table kinds, index dtype, empty bags, interaction): coarse, but it
never merges two different code paths.
"""

from __future__ import annotations

import hashlib

from fuzz.sample import Sample
from oracles.normalize import normalize_error
from oracles.verdict import Outcome, Verdict

__all__ = ["signature", "signature_key", "bucket_for", "normalize_error", "sample_features"]

def sample_features(sample: Sample) -> list[str]:
    """The code-path switches a sample turns on, as sorted short strings."""
    config = sample.config
    features = {f"interaction={config.arch_interaction_op}"}
    if config.arch_interaction_op == "dot" and config.arch_interaction_itself:
        features.add("interaction_itself")
    if config.weighted_pooling:
        features.add(f"weighted_pooling={config.weighted_pooling}")
    for k in range(config.num_tables):
        kind = config.table_kind(k)
        if kind == "qr":
            features.add(f"qr={config.qr_operation}")
        elif kind == "quantized":
            features.add(f"quantized={config.quantize_bits}")
        elif kind == "md":
            features.add("md")
    if config.index_dtype != "int64":
        features.add(f"index_dtype={config.index_dtype}")
    if any((batch.bag_lengths(k) == 0).any() for batch in sample.batches
           for k in range(config.num_tables)):
        features.add("empty_bags")
    if 0.0 < config.loss_threshold < 1.0:
        features.add("clamp")
    return sorted(features)


def signature_key(outcome: Outcome, sample: Sample, owner: str) -> str:
    """``owner`` names who is to blame for the failing stage (see module doc)."""
    if outcome.verdict is Verdict.MISMATCH:
        return f"MISMATCH|{owner}|{','.join(sample_features(sample))}"
    what = "|".join(part for part in (outcome.op, normalize_error(outcome.error)) if part)
    return f"{outcome.verdict.value}|{owner}|{what}"


def bucket_for(verdict: Verdict, key: str) -> str:
    """A stable bucket id for a signature key: ``<verdict>-<12 hex digits>``."""
    return f"{verdict.value.lower()}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def signature(outcome: Outcome, sample: Sample, owner: str) -> str:
    """The bucket id of an outcome."""
    return bucket_for(outcome.verdict, signature_key(outcome, sample, owner))

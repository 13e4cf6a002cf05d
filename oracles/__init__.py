"""Verdicts, tolerances and failure signatures: how dlrm-fuzz decides that a
compiled DLRM is wrong, and which known bug a failure belongs to."""

from oracles.classify import blamed_op, classify, first_error_line
from oracles.compare import Comparison, Tolerance, compare, summarize
from oracles.judge import ReferenceFailed, judge
from oracles.signature import bucket_for, normalize_error, sample_features, signature, signature_key
from oracles.verdict import Outcome, Verdict

__all__ = ["Verdict", "Outcome", "Tolerance", "Comparison", "compare", "summarize",
           "classify", "first_error_line", "blamed_op", "judge", "ReferenceFailed",
           "signature", "signature_key", "bucket_for", "normalize_error", "sample_features"]

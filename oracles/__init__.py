"""Verdicts, tolerances, failure signatures and blame: how dlrm-fuzz decides
that a compiled DLRM is wrong, which component is at fault, and which known
bug a failure belongs to. Pure functions over the values in
``oracles.results``: nothing here imports the engine (``fuzz``)."""

from oracles.blame import Blamed, Observation, blame, same_wrong_answer
from oracles.classify import blamed_op, classify, first_error_line
from oracles.compat import incompatibility
from oracles.compare import Comparison, Tolerance, compare, summarize
from oracles.judge import ReferenceFailed, judge, reference_failed
from oracles.normalize import normalize_error
from oracles.results import Failure, Stage, TargetResult
from oracles.signature import KEY_VERSION, bucket_for, error_key, mismatch_key, signature_key
from oracles.verdict import Outcome, Verdict

__all__ = ["Verdict", "Outcome", "Tolerance", "Comparison", "compare", "summarize",
           "classify", "first_error_line", "blamed_op", "judge", "ReferenceFailed", "reference_failed",
           "signature_key", "error_key", "mismatch_key", "bucket_for", "KEY_VERSION",
           "normalize_error", "Failure", "Stage", "TargetResult", "Observation", "Blamed",
           "blame", "same_wrong_answer", "incompatibility"]

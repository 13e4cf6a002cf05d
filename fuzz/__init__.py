"""dlrm-fuzz: differential fuzzing of DLRM through torch-mlir and IREE.

The subpackages follow a sample's way (the README's "Code map"):
``model`` (what is fuzzed) -> ``targets`` (the roads that compile and run
it) -> ``engine`` (the campaign that drives many samples through them) ->
``triage`` (judging, localizing, shrinking what fails) -> ``store`` (the
corpus) -> ``reports`` (repros and upstream words), with ``regress``
(replay, bump, bisect, matrix, toolchains) and ``cli`` on top.
"""

from fuzz import _moved
from fuzz.model.config import DLRMConfig, InvalidConfig
from fuzz.model.sample import Batch, InvalidSample, Sample

_moved.install()

__all__ = ["DLRMConfig", "InvalidConfig", "Batch", "Sample", "InvalidSample"]

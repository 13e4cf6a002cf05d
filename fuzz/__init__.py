"""dlrm-fuzz engine: DLRM config and model, pipeline stages, targets, workers,
campaign, corpus store and CLI."""

from fuzz.config import DLRMConfig, InvalidConfig
from fuzz.sample import Batch, InvalidSample, Sample

__all__ = ["DLRMConfig", "InvalidConfig", "Batch", "Sample", "InvalidSample"]

"""Hypothesis strategies that generate DLRM configurations and their inputs."""

from strategies.configs import ConfigLimits, dlrm_configs
from strategies.inputs import bags, batches, batches_like, dense_values
from strategies.samples import samples

__all__ = ["ConfigLimits", "dlrm_configs", "bags", "batches", "batches_like",
           "dense_values", "samples"]

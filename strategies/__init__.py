"""Hypothesis strategies that generate DLRM configurations and their inputs."""

from strategies.configs import SHAPE_CLASSES, ConfigLimits, dlrm_configs, shape_classes
from strategies.inputs import bags, batches, batches_like, dense_values, weight_values
from strategies.samples import samples

__all__ = ["ConfigLimits", "dlrm_configs", "SHAPE_CLASSES", "shape_classes", "bags", "batches",
           "batches_like", "dense_values", "weight_values", "samples"]

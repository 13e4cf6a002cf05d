"""What is fuzzed: a DLRM configuration (``config``), the eager model it
builds (``dlrm``, from its ``layers``, called through ``calling``), a sample
of inputs (``sample``) and weights passed as program inputs (``weights``). A
new DLRM knob goes into ``config`` and ``dlrm``."""

from typing import Any

from fuzz import _moved
from fuzz.model.config import DLRMConfig, InvalidConfig
from fuzz.model.sample import Batch, InvalidSample, Sample

__all__ = ["DLRMConfig", "InvalidConfig", "Batch", "InvalidSample", "Sample"]


def __getattr__(name: str) -> Any:
    """The old ``fuzz.model`` module's names (now ``fuzz.model.dlrm``)."""
    return _moved.forward(__name__, "fuzz.model", "fuzz.model.dlrm", name)

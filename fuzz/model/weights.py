"""Weights as function inputs: one compiled program for every weight draw.

torch-mlir's importer turns a module's parameters into constants inside the
MLIR, so every weight seed is a new program and table size drives compile
time (a 10^6-row table is 10^6 rows of MLIR text). Exported with its floating
parameters and buffers as function inputs instead (``torch.func.
functional_call``), the program is the same for every seed and a few KB at
any table size: compiled once, it serves every weight draw.

Only floating parameters and buffers can be inputs. A config whose weights
are partly something else keeps them all inline, because its program would
still depend on the seed: quantized tables (prepacked uint8 rows drawn from
the seed) and dynamically quantized MLPs (prepacked, not tensors at all).
bfloat16 models keep theirs inline too: numpy, which carries every input to
the runtimes, has no bfloat16.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from fuzz.model.config import DLRMConfig, weights_as_inputs

__all__ = ["WeightsAsInputs", "weights_as_inputs", "state_names", "state_tensors",
           "state_arrays", "export_form"]


def state_names(model: nn.Module) -> list[str]:
    """The floating parameters and buffers, in a fixed order (the program's
    leading inputs)."""
    named = [*model.named_parameters(), *model.named_buffers()]
    return [name for name, tensor in named if tensor.is_floating_point()]


def state_tensors(model: nn.Module, names: Sequence[str] | None = None) -> list[torch.Tensor]:
    """The tensors of ``names`` (default: all of ``state_names``), in order."""
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    return [state[name] for name in (names or state_names(model))]


def state_arrays(model: nn.Module, names: Sequence[str] | None = None) -> list[np.ndarray]:
    """The values of ``names`` (default: all of ``state_names``) as arrays."""
    return [tensor.detach().numpy() for tensor in state_tensors(model, names)]


class WeightsAsInputs(nn.Module):
    """``model`` called with its floating state given as the first argument."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.names = state_names(model)

    def forward(self, state: list[torch.Tensor], args: tuple[Any, ...]) -> Any:
        """Run the model with ``state`` bound in place of its own weights."""
        return torch.func.functional_call(self.model, dict(zip(self.names, state)), args)


def export_form(model: nn.Module, config: DLRMConfig, args: tuple[Any, ...],
                spec: Any) -> tuple[nn.Module, tuple[Any, ...], Any]:
    """(module, example args, dynamic-shape spec) to hand ``torch.export`` for
    ``config``'s weight form: the model itself, or wrapped with its floating
    state as a leading list argument (static in every dimension)."""
    if not weights_as_inputs(config):
        return model, args, spec
    wrapped = WeightsAsInputs(model)
    tensors = state_tensors(model, wrapped.names)
    return wrapped, (tensors, args), None if spec is None else ([None] * len(tensors), spec)

"""The loop-free bag: an export variant of the model in which every
``F.embedding_bag`` (``nn.EmbeddingBag`` calls it) reaches the exporter as a
gather and a segment sum instead of the bag op.

Why: ``torch.onnx.export(..., dynamo=True)`` writes a bag as ``Loop`` +
``SequenceEmpty`` + ``ConcatFromSequence``, and torch-mlir's ONNX conversions
(``TorchOnnxToTorch``, run inside ``iree-compile`` and by torch-mlir's own
importer) have no lowering for ``onnx.Loop`` over a sequence: one op blocks
every DLRM on the ONNX road. That is one bucket; the variant lets the rest of
the graph (the MLPs, the interaction, the casts, the gathers themselves)
reach compile and run on the same road.

The segment sum is a masked matrix product: ``member[b, i]`` is 1 when index
``i`` falls in bag ``b`` (``starts[b] <= i < ends[b]``, and the index is not
``padding_idx``), and the pooled rows are ``member @ (weight[indices] *
per_sample_weights)``. That expresses ``sum`` and ``mean`` (the count of
members, at least 1, divides: an empty bag pools to zeros as eager's does),
``include_last_offset`` (B+1 offsets: the last one closes the last bag),
empty bags and ``padding_idx`` exactly. ``max`` pooling has no such form:
a config with it keeps the bag op (``supported`` says so and the ONNX
export falls back to the plain form, which is the Loop bucket again, never a
false alarm). The matrix costs batch x indices elements per table.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["LOOP_FREE", "LOOP", "VARIANTS", "supported", "loop_free", "pool"]

# The variants, as targets and cases record them.
LOOP = "loop"
LOOP_FREE = "loop-free"
VARIANTS = (LOOP, LOOP_FREE)


def supported(config: Any) -> tuple[bool, str]:
    """(True, "") when the loop-free form computes ``config``'s bags exactly,
    else (False, why): the export then keeps the bag op."""
    if getattr(config, "pooling", "sum") == "max":
        return False, "pooling='max' has no gather + segment-sum form: the bag op is kept"
    return True, ""


def pool(input: Any, weight: Any, offsets: Any = None, max_norm: Any = None,
         norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
         sparse: bool = False, per_sample_weights: Any = None,
         include_last_offset: bool = False, padding_idx: int | None = None) -> Any:
    """``F.embedding_bag``'s answer (same signature) as a gather and a masked
    matrix product. 2-D ``input`` (fixed-length bags, no offsets) is pooled
    row by row as bags of equal length."""
    import torch

    if max_norm is not None or mode == "max":
        raise ValueError(f"mode={mode!r}, max_norm={max_norm!r}: the loop-free bag "
                         f"pools sum and mean without max_norm only")
    if input.dim() == 2:  # [B, L]: bags of L indices each
        batch, length = input.shape
        offsets = torch.arange(batch, dtype=input.dtype) * length
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        include_last_offset = False
    count = input.shape[0]
    rows = weight[input]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.to(rows.dtype).unsqueeze(1)
    offsets = offsets.to(input.dtype)
    if include_last_offset:
        starts, ends = offsets[:-1], offsets[1:]
    else:
        starts = offsets
        ends = torch.cat([offsets[1:], torch.full((1,), count, dtype=offsets.dtype)])
    position = torch.arange(count, dtype=offsets.dtype).unsqueeze(0)
    member = (position >= starts.unsqueeze(1)) & (position < ends.unsqueeze(1))
    if padding_idx is not None:
        member = member & (input != padding_idx).unsqueeze(0)
    mask = member.to(rows.dtype)
    pooled = mask @ rows
    if mode == "mean":
        pooled = pooled / mask.sum(dim=1, keepdim=True).clamp(min=1)
    return pooled


# The bag op as an exported ATen graph calls it (localization's instrumented
# program is such a graph, re-exported by the road): it must take the variant's
# form too, or it would export the Loop the target never compiled.
_ATEN_BAGS = ("aten.embedding_bag.padding_idx", "aten.embedding_bag.default")
# ATen's number for max pooling (``F.embedding_bag``'s own table: 0 sum, 1 mean, 2 max).
_ATEN_MAX, _ATEN_MEAN = 2, 1


def _aten_bag(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """An ATen ``embedding_bag`` call answered by ``pool``: its outputs
    (pooled, offset2bag, bag_size, max_indices), the last three empty (a
    DLRM graph reads only the first). ``max`` mode keeps the op."""
    import torch

    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args), **kwargs)
    mode = int(bound.get("mode", 0))
    if mode == _ATEN_MAX:
        return func(*args, **kwargs)
    padding = bound.get("padding_idx")
    pooled = pool(bound["indices"], bound["weight"], bound["offsets"],
                  mode="mean" if mode == _ATEN_MEAN else "sum",
                  per_sample_weights=bound.get("per_sample_weights"),
                  include_last_offset=bool(bound.get("include_last_offset", False)),
                  padding_idx=None if padding is None or padding < 0 else int(padding))
    empty = torch.zeros(0, dtype=torch.int64)
    return pooled, empty, empty, empty


def _in_loop_free_mode(forward: Callable[..., Any]) -> Callable[..., Any]:
    """``forward`` with every ``F.embedding_bag`` it calls answered by ``pool``."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    class LoopFreeBags(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if func is F.embedding_bag:
                return pool(*args, **(kwargs or {}))
            if str(func) in _ATEN_BAGS:
                return _aten_bag(func, args, kwargs or {})
            return func(*args, **(kwargs or {}))

    # functools.wraps keeps the signature torch.export reads (inspect follows __wrapped__).
    @functools.wraps(forward)
    def loop_free_forward(*args: Any, **kwargs: Any) -> Any:
        with LoopFreeBags():
            return forward(*args, **kwargs)

    return loop_free_forward


def loop_free(module: Any) -> Any:
    """``module`` (the recipe's, owned by the caller: a fresh build) with its
    forward computing every bag loop-free; the same module is returned. An
    ATen graph (localization's instrumented program) has its bag nodes
    rewritten: ``torch.export`` retraces a ``GraphModule`` without the
    function mode seeing its op calls."""
    import torch.fx

    if isinstance(module, torch.fx.GraphModule):
        for node in module.graph.nodes:
            if node.op == "call_function" and str(node.target) in _ATEN_BAGS:
                node.target = _GRAPH_BAGS[str(node.target)]
        module.recompile()
    module.forward = _in_loop_free_mode(module.forward)
    return module


def loop_free_bag_padding_idx(*args: Any, **kwargs: Any) -> Any:
    """``aten.embedding_bag.padding_idx`` as a rewritten graph node calls it."""
    import torch

    return _aten_bag(torch.ops.aten.embedding_bag.padding_idx, args, kwargs)


def loop_free_bag_default(*args: Any, **kwargs: Any) -> Any:
    """``aten.embedding_bag.default`` as a rewritten graph node calls it."""
    import torch

    return _aten_bag(torch.ops.aten.embedding_bag.default, args, kwargs)


_GRAPH_BAGS = {"aten.embedding_bag.padding_idx": loop_free_bag_padding_idx,
               "aten.embedding_bag.default": loop_free_bag_default}

"""How far a low-precision DLRM's answer may honestly stray from the float64
reference: a bound on output magnitudes that rounding errors scale with
(``output_magnitude``: absolute weights, pooled absolute rows, sigmoid
bounded), and a measured spread by Monte Carlo arithmetic
(``rounding_spread``: the model re-run with random rounding). Apart from
the model: it judges the model, it is not part of it (``oracles.compare``
says how the tolerance uses them).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fuzz.model.dlrm import _TORCH_DTYPES, DLRM, FixedLengthDLRM, MDTable, PlainTable, QRTable


__all__ = ["output_magnitude", "rounding_spread"]


_UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def output_magnitude(model: DLRM, *args: Any, peaks: list[torch.Tensor] | None = None
                     ) -> torch.Tensor:
    """The reference model run on magnitudes: every weight, bias, row, pooling
    and per-sample weight and input replaced by its absolute value (ReLU and
    the clamp pass it through, a Sigmoid divides by 4 and adds 1, the dot
    interaction's ``T T^T`` counts twice). It bounds every partial sum a
    program computing the output in any order can meet, so where it passes
    the dtype's largest finite value an overflow to inf (and NaN after it) is
    that dtype's arithmetic, not a compiler's bug. ``peaks`` collects, per
    example, the largest magnitude of every stage on the way."""
    dense, rest = args[0], list(args[1:])
    if isinstance(model, FixedLengthDLRM):
        rest.insert(0, None)
    offsets, indices = rest[0], rest[1]
    weights = rest[2] if len(rest) > 2 else None
    with torch.no_grad():
        x = _mlp_magnitude(model.bot_l, model._input(dense).abs(), peaks)
        ly = []
        for k, table_indices in enumerate(indices):
            table_offsets = None if offsets is None else offsets[k]
            v_w = model.pooling_weights(k)
            if v_w is not None:
                psw: Any = v_w.abs().gather(0, table_indices)
            elif weights is not None:
                psw = model._input(weights[k]).abs()
            else:
                psw = None
            ly.append(_table_magnitude(model.emb_l[k], table_indices, table_offsets, psw))
            if peaks is not None:
                peaks.append(ly[-1].amax(dim=1))
        if model.config.arch_interaction_op == "cat":
            z = torch.cat([x] + ly, dim=1)
        else:
            batch_size, d = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = 2 * torch.bmm(T, torch.transpose(T, 1, 2))
            offset = 1 if model.config.arch_interaction_itself else 0
            n = Z.shape[1]
            li = torch.tensor([i for i in range(n) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(n) for j in range(i + offset)])
            z = torch.cat([x, Z[:, li, lj]], dim=1)
        if peaks is not None:
            peaks.append(z.amax(dim=1))
        return _mlp_magnitude(model.top_l, z, peaks)


def _mlp_magnitude(mlp: nn.Module, x: torch.Tensor,
                   peaks: list[torch.Tensor] | None = None) -> torch.Tensor:
    for layer in mlp.children():
        if isinstance(layer, nn.Linear):
            x = F.linear(x, layer.weight.abs(), None if layer.bias is None else layer.bias.abs())
            if peaks is not None:
                peaks.append(x.amax(dim=1))
        elif isinstance(layer, nn.Sigmoid):
            x = x / 4 + 1
    return x


def _table_magnitude(table: nn.Module, indices: torch.Tensor, offsets: torch.Tensor | None,
                     psw: torch.Tensor | None) -> torch.Tensor:
    if isinstance(table, PlainTable):
        bag = table.bag
        return F.embedding_bag(indices, bag.weight.abs(), offsets, mode=bag.mode,
                               per_sample_weights=psw, include_last_offset=bag.include_last_offset,
                               padding_idx=bag.padding_idx)
    if isinstance(table, MDTable):
        bag = table.bag
        pooled = F.embedding_bag(indices, bag.weight.abs(), offsets, mode="sum",
                                 per_sample_weights=psw, include_last_offset=bag.include_last_offset)
        return _mlp_magnitude(nn.Sequential(table.proj), pooled) \
            if isinstance(table.proj, nn.Linear) else pooled
    assert isinstance(table, QRTable), type(table)
    extra = {"include_last_offset": True} if table.include_last_offset else {}
    q = F.embedding_bag((indices / table.collisions).long(), table.weight_q.abs(), offsets,
                        mode=table.mode, per_sample_weights=psw, **extra)
    r = F.embedding_bag(torch.remainder(indices, table.collisions).long(), table.weight_r.abs(),
                        offsets, mode=table.mode, per_sample_weights=psw, **extra)
    if table.operation == "concat":
        return torch.cat((q, r), dim=1)
    return q * r if table.operation == "mult" else q + r


def rounding_spread(model: DLRM, *args: Any, runs: int = 4, seed: int = 0) -> torch.Tensor:
    """How far rounding in the model's dtype can move each output of the float64
    ``model``, measured rather than bounded (Monte Carlo arithmetic): ``runs``
    evaluations in float64 with every quantity a correct compiler rounds
    perturbed by a random relative amount of its size, the largest deviation
    from the exact output returned. What is perturbed, by ``U(-1, 1)`` times:
    each ``nn.Linear`` weight by ``sqrt(fan_in) u`` and bias by ``u`` (a dot
    product of n terms in any order is the exact product of weights perturbed
    by about ``sqrt(n) u``, Higham & Mary's probabilistic backward error),
    table rows by ``sqrt(L) u`` (L: the longest bag), pooling and per-sample
    weights and the dense input by ``u``, and the interaction's operands by
    ``sqrt(d) u``. It follows the network's real amplification and
    cancellation (the dot interaction summing 10^4-sized terms to -90), which
    an a-priori bound on magnitudes cannot without being uselessly wide.
    Where ``output_magnitude`` passes the dtype's largest value the spread is
    infinite: a compiler may overflow there (summing in another order, or in
    the dtype where eager sums in float32)."""
    import copy

    u = _UNIT_ROUNDOFF[model.config.dtype]
    dense, rest = args[0], list(args[1:])
    if isinstance(model, FixedLengthDLRM):
        rest.insert(0, None)
    offsets, indices = rest[0], rest[1]
    weights = rest[2] if len(rest) > 2 else None
    longest = 1
    for k, table_indices in enumerate(indices):
        if table_indices.dim() == 2:
            longest = max(longest, int(table_indices.shape[1]))
        elif offsets is not None and table_indices.numel():
            starts = offsets[k].tolist()
            ends = starts[1:] + [table_indices.numel()]
            if model.config.include_last_offset:
                ends = starts[1:]
                starts = starts[:-1]
            longest = max([longest] + [e - b for b, e in zip(starts, ends)])
    generator = torch.Generator().manual_seed(seed)

    def noise(t: torch.Tensor, rel: float) -> torch.Tensor:
        eps = torch.rand(t.shape, generator=generator, dtype=torch.float64) * 2 - 1
        return t * (1 + rel * eps)

    with torch.no_grad():
        exact = model(*args)
        spread = torch.zeros_like(exact)
        for _ in range(runs):
            twin = copy.deepcopy(model)
            for module in twin.modules():
                if isinstance(module, (nn.Linear, nn.Sigmoid)):
                    # its output is stored in the dtype: one more rounding
                    module.register_forward_hook(lambda _m, _i, out: noise(out, u))
                if isinstance(module, nn.Linear):
                    module.weight.copy_(noise(module.weight, (module.in_features ** 0.5) * u))
                    if module.bias is not None:
                        module.bias.copy_(noise(module.bias, u))
            for name, param in list(twin.named_parameters()) + list(twin.named_buffers()):
                if name.startswith("emb_l.") and (name.endswith("weight") and ".proj." not in name
                                                   or name.endswith("weight_q")
                                                   or name.endswith("weight_r")):
                    param.copy_(noise(param, (longest ** 0.5) * u))
                elif name.startswith("v_W"):
                    param.copy_(noise(param, u))
            interact = twin.interact_features
            d = twin.config.embedding_width

            def noisy_interaction(x: torch.Tensor, ly: list[torch.Tensor],
                                  interact: Any = interact, d: int = d) -> torch.Tensor:
                rel = (d ** 0.5) * u
                return interact(noise(x, rel), [noise(y, rel) for y in ly])

            twin.interact_features = noisy_interaction  # type: ignore[method-assign]
            noisy_weights = None if weights is None else (
                noise(weights, u) if isinstance(weights, torch.Tensor)
                else [noise(w, u) for w in weights])
            sparse = [offsets, indices] if not isinstance(model, FixedLengthDLRM) else [indices]
            out = twin(noise(dense, u), *sparse, *([noisy_weights] if weights is not None else []))
            spread = torch.maximum(spread, (out - exact).abs())
        # Rows whose partial sums may pass the dtype's range: not judgeable.
        limit = torch.finfo(_TORCH_DTYPES[model.config.dtype]).max
        peaks: list[torch.Tensor] = []
        output_magnitude(model, *args, peaks=peaks)
        overflow = (torch.stack(peaks, dim=1) > limit).any(dim=1, keepdim=True)
        spread = torch.where(overflow, torch.full_like(spread, math.inf), spread)
    return spread

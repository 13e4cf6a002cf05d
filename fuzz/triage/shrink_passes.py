"""The shrinker's passes: one generator of candidate samples per way of
cutting a sample, in the order ``fuzz.triage.shrink`` runs them (``PASSES``).

The big cuts come first (whole tables, batches, examples, in halves and then
one at a time, as delta debugging does), then knobs back to their defaults,
then bag contents, then sizes (rows, widths, MLP layers), and values toward
zero last; before them all, the skeleton jumps straight to the bottom of the
lattice. Each candidate is an edit of ``fuzz.triage.edits`` (``None`` where
it does not apply); the reducer decides which are worth a compile. With a
``region`` (``fuzz.model.focus.Focus``) the passes that know one
(``passes_for``) never leave it. A new pass goes here, in ``PASSES``.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterator, Sequence

from fuzz.model.focus import Focus
from fuzz.model.sample import Sample
from fuzz.triage import edits

__all__ = ["Candidates", "PASSES", "passes_for"]

Candidates = Iterator["Sample | None"]


def _removals(count: int) -> Iterator[list[int]]:
    """Position sets to remove, delta-debugging style: halves, quarters, ...,
    then single positions (last first: drawn data puts the simple cases first)."""
    size = count // 2
    while size > 1:
        for start in range(0, count, size):
            yield list(range(start, min(start + size, count)))
        size //= 2
    for p in reversed(range(count)):
        yield [p]


def _keeping(count: int) -> Iterator[list[int]]:
    for removed in _removals(count):
        yield [p for p in range(count) if p not in removed]


def _tables(s: Sample) -> Candidates:
    for keep in _keeping(s.config.num_tables):
        yield edits.keep_tables(s, keep)


def _batches(s: Sample) -> Candidates:
    for keep in _keeping(len(s.batches)):
        yield edits.keep_batches(s, keep)


def _examples(s: Sample) -> Candidates:
    for b, batch in enumerate(s.batches):
        for keep in _keeping(batch.batch_size):
            yield edits.keep_examples(s, b, keep)


def _knobs(s: Sample, region: Focus | None = None) -> Candidates:
    """Knobs back to their defaults, halves of the set first: a case that
    needs one knob of eight then costs about four steps instead of eight.
    The knobs ``region`` pins are left out of the set."""
    pinned = region.pinned if region is not None else {}
    names = [name for name in edits.non_default_knobs(s.config) if name not in pinned]
    for removed in _removals(len(names)):
        yield edits.knobs_to_default(s, [names[i] for i in removed])


def _bags(s: Sample) -> Candidates:
    """Whole tables' bags emptied, then chunks of bags, then single indices."""
    for b, batch in enumerate(s.batches):
        for k in range(s.config.num_tables):
            full = [r for r, n in enumerate(batch.bag_lengths(k)) if n]
            for removed in _removals(len(full)):
                yield edits.empty_bags_of(s, b, k, [full[i] for i in removed])
    for b, batch in enumerate(s.batches):
        for k in range(s.config.num_tables):
            for row, n in enumerate(batch.bag_lengths(k)):
                for removed in _removals(int(n)):
                    yield edits.keep_bag_indices(s, b, k, row,
                                                 [p for p in range(int(n)) if p not in removed])


def _used_rows(s: Sample, k: int) -> int:
    top = [int(batch.indices[k].max()) for batch in s.batches if batch.indices[k].size]
    return max(top, default=0) + 1


def _toward(value: int, floor: int = 1) -> list[int]:
    """Smaller values to try for ``value``: the floor, the half, one less."""
    return sorted({v for v in (floor, value // 2, value - 1) if floor <= v < value})


def _unused_rows(s: Sample) -> Candidates:
    """Every table cut to the rows its bags use: early, because a big table
    inlined as a constant makes every later step's export, lowering and
    compile slow (a 1-table case with a large table took ~20 s a step)."""
    for k in range(s.config.num_tables):
        yield edits.fewer_rows(s, k, _used_rows(s, k))


def _kind_floor(s: Sample, k: int) -> int | None:
    """The fewest rows table ``k`` can have and keep its kind (a QR or MD
    table needs more rows than its threshold, a padding index a row for
    it); None for a plain or quantized table (one row keeps it)."""
    config = s.config
    kind = config.table_kind(k)
    if kind == "qr":
        return config.qr_threshold + 1
    if kind == "md":
        return config.md_threshold + 1
    return None


def _rows(s: Sample) -> Candidates:
    """The rows the bags use, then the fewest that keep the table's kind
    (a QR case of 3.3 million rows otherwise halves toward its threshold
    one compile at a time: ~14 steps of 5-18 s with its table inline),
    then toward one row."""
    for k, rows in enumerate(s.config.ln_emb):
        yield edits.fewer_rows(s, k, _used_rows(s, k))
        floor = _kind_floor(s, k)
        if floor is not None:
            yield edits.fewer_rows(s, k, max(floor, _used_rows(s, k)))
            yield edits.fewer_rows(s, k, floor)
        for target in _toward(rows):
            yield edits.fewer_rows(s, k, target)


def _widths(s: Sample) -> Candidates:
    config = s.config
    for width in _toward(config.base_width) + _toward(config.base_width, floor=2):
        yield edits.narrow_m_spa(s, width)
    if isinstance(config.m_spa, tuple):
        for k, width in enumerate(config.m_spa):
            for target in _toward(width):
                yield edits.narrow_table_width(s, k, target)
    for removed in _removals(config.num_dense):
        yield edits.drop_dense_columns(s, removed)


def _mlps(s: Sample) -> Candidates:
    mlp: edits.MLP
    for mlp in ("bot", "top"):
        widths = s.config.ln_bot if mlp == "bot" else s.config.ln_top
        for i in range(1, len(widths) - 1):
            yield edits.drop_hidden(s, mlp, i)
    for mlp in ("bot", "top"):
        widths = s.config.ln_bot if mlp == "bot" else s.config.ln_top
        for i in range(1, len(widths) - (1 if mlp == "bot" else 0)):
            for target in _toward(widths[i]):
                yield edits.narrow_layer(s, mlp, i, target)


def _values(s: Sample) -> Candidates:
    yield edits.zero_indices(s)
    for k in range(s.config.num_tables):
        yield edits.zero_indices(s, k=k)
    yield edits.halve_indices(s)
    yield edits.zero_dense(s)
    for b, batch in enumerate(s.batches):
        yield edits.zero_dense(s, b=b)
        for col in range(s.config.num_dense):
            yield edits.zero_dense(s, b=b, col=col)
        for row in range(batch.batch_size):
            yield edits.zero_dense(s, b=b, row=row)
    yield edits.round_dense(s)
    yield edits.unit_weights(s)
    yield edits.with_seed(s, 0)


# What a skeleton variant leaves as it was (``_skeleton``'s ``keep``): the
# dimensions a fault most often needs beyond its knobs, most often first (on
# seed 97 a bf16 constant needed the top MLP, a QR Vulkan fault both tables,
# a vmvx out-of-bounds read its examples and indices).
_KEEPS = ("mlps", "tables", "examples", "values", "widths")


def _skeleton(s: Sample, k: int, empty: bool, region: Focus | None = None,
              keep: str | None = None) -> Sample | None:
    """The bottom of the lattice for table ``k``, built without a single
    predicate call: that table alone (its kind kept: a QR, MD or quantized
    table keeps the rows that make it one), one batch, one example whose bag
    holds one index 0 (or nothing, with ``empty``), the narrowest widths, no
    hidden layers, one dense column, zero values, seed 0; every knob kept.
    ``keep`` (one of ``_KEEPS``) leaves that dimension as it was: every
    table (their bags too), the first batch's examples and bags, the MLPs,
    the widths, or the index and dense values. An edit that does not
    apply, or would leave ``region``, is passed over; ``None`` when nothing
    changed."""
    kind = s.config.table_kind(k)
    out = s

    def apply(edit: edits.Edit) -> None:
        nonlocal out
        new = edit(out)
        if new is not None and (region is None or region.holds(new)):
            out = new

    if keep != "tables":
        apply(lambda x: edits.keep_tables(x, [k]))
    apply(lambda x: edits.keep_batches(x, [0]))
    if keep not in ("examples", "tables"):
        lengths = out.batches[0].bag_lengths(0)
        row = 0 if empty else next((r for r, n in enumerate(lengths) if n), 0)
        apply(lambda x: edits.keep_examples(x, 0, [row]))
        if empty:
            apply(lambda x: edits.empty_bags_of(x, 0, 0, [0]))
        else:
            apply(lambda x: edits.keep_bag_indices(x, 0, 0, 0, [0]))
    if keep != "values":
        apply(edits.zero_indices)
        config = out.config
        floors = {1, 2, config.qr_threshold + 1, config.md_threshold + 1,
                  (config.padding_idx or 0) + 1}
        for rows in sorted(floors):
            cut = edits.fewer_rows(out, 0, rows)
            if cut is not None and cut.config.table_kind(0) == kind and \
                    (region is None or region.holds(cut)):
                out = cut
                break
    if keep != "widths":
        for width in (1, 2):
            apply(lambda x: edits.narrow_m_spa(x, width))
        apply(lambda x: edits.drop_dense_columns(x, range(1, x.config.num_dense)))
    mlp: edits.MLP
    for mlp in ("bot", "top") if keep != "mlps" else ():
        for _ in range(len(getattr(out.config, f"ln_{mlp}"))):
            apply(lambda x: edits.drop_hidden(x, mlp, 1))
        widths = getattr(out.config, f"ln_{mlp}")
        for i in range(1, len(widths)):
            for width in (1, 2):
                apply(lambda x: edits.narrow_layer(x, mlp, i, width))
    for edit in (edits.zero_dense, edits.unit_weights, lambda x: edits.with_seed(x, 0)):
        if keep != "values" or edit is not edits.zero_dense:
            apply(edit)
    return None if out is s else out


def _skeletons(s: Sample, region: Focus | None = None) -> Candidates:
    """Jump to the bottom first: for one table of each kind, the skeleton
    with an empty bag, then with one index. Most faults the fuzzer finds
    hang on a knob, not on the data, so one compile usually lands on the
    minimal case (or next to it), and the passes below then only confirm
    the fixpoint; when the skeleton no longer fails it cost one step. Then,
    for the first table's kind, the bottom but one dimension (``_KEEPS``):
    a fault that needs its MLP or both its tables lands next to the bottom
    in one more step instead of a pass per dimension (seed 97's bf16 constant
    on iree-cpu-dyn spent 65 s in seven passes and never reached its MLP);
    at the bottom every variant is the sample itself and costs nothing."""
    firsts: dict[str, int] = {}
    for k in range(s.config.num_tables):
        firsts.setdefault(s.config.table_kind(k), k)
    for empty in (True, False):
        for k in firsts.values():
            yield _skeleton(s, k, empty, region)
    for keep in _KEEPS:
        yield _skeleton(s, 0, False, region, keep)


PASSES: Sequence[tuple[str, Callable[[Sample], Candidates]]] = (
    ("skeleton", _skeletons), ("tables", _tables), ("unused rows", _unused_rows), ("batches", _batches),
    ("examples", _examples), ("knobs", _knobs),
    ("bags", _bags), ("rows", _rows), ("widths", _widths), ("mlps", _mlps), ("values", _values),
)
"""The passes in the order they run; each is retried from the new sample
after every accepted candidate, and the whole list until nothing is accepted."""
# The passes that know a region (the others' candidates are filtered).
_REGION_AWARE = {"skeleton": _skeletons, "knobs": _knobs}


def passes_for(region: Focus | None) -> list[tuple[str, Callable[[Sample], Candidates]]]:
    """``PASSES``, the region-aware ones told about ``region``."""
    if region is None:
        return list(PASSES)
    return [(name, functools.partial(_REGION_AWARE[name], region=region)
             if name in _REGION_AWARE else generate) for name, generate in PASSES]

"""The strategies: every sample is valid, every DLRM code path and sparse
edge case is reachable, and shrinking lands on the plainest DLRM."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from fuzz.model.config import DLRMConfig
from fuzz.model.sample import Sample
from strategies import ConfigLimits, bags, batches, batches_like, dlrm_configs, samples


@settings(max_examples=150)
@given(samples())
def test_every_sample_is_valid(sample: Sample) -> None:
    assert sample.batches  # batch 0 is always checked, by static targets too
    for batch in sample.batches:
        batch.validate(sample.config)  # raises on anything DLRM_Net would reject
        assert all(o.dtype == np.dtype(sample.config.index_dtype) for o in batch.offsets)


@pytest.mark.parametrize("name, predicate", [
    ("qr mult", lambda c: c.qr_flag and c.qr_operation == "mult" and c.table_kind(0) == "qr"),
    ("qr add", lambda c: c.qr_flag and c.qr_operation == "add"),
    ("qr concat", lambda c: c.qr_concat),
    ("md with projection", lambda c: c.md_flag and any(
        c.table_kind(k) == "md" and c.table_width(k) < c.base_width for k in range(c.num_tables))),
    ("8-bit", lambda c: c.quantize_bits == 8),
    ("4-bit", lambda c: c.quantize_bits == 4),
    ("learned pooling", lambda c: c.weighted_pooling == "learned"),
    ("fixed pooling", lambda c: c.weighted_pooling == "fixed"),
    ("int32", lambda c: c.index_dtype == "int32"),
    ("cat", lambda c: c.arch_interaction_op == "cat"),
    ("dot itself", lambda c: c.arch_interaction_op == "dot" and c.arch_interaction_itself),
    ("sigmoid in top", lambda c: c.sigmoid_top >= 0),
    ("sigmoid in bottom", lambda c: c.sigmoid_bot >= 0),
    ("clamp", lambda c: 0 < c.loss_threshold < 1),
    ("four tables", lambda c: c.num_tables == 4),
])
def test_every_code_path_is_reachable(name: str, predicate: Callable[[DLRMConfig], bool]) -> None:
    found = find(dlrm_configs(), predicate, settings=settings(max_examples=2000))
    assert predicate(found)


@pytest.mark.slow  # 22-50 s each (searches); the slow tier: python3 -m tox -e slow
@pytest.mark.parametrize("name, predicate", [
    ("empty bag", lambda s: any((b.bag_lengths(k) == 0).any() for b in s.batches
                                for k in range(s.config.num_tables))),
    ("last row", lambda s: any(b.indices[k].size and b.indices[k].max() == s.config.ln_emb[k] - 1
                               and s.config.ln_emb[k] > 1 for b in s.batches
                               for k in range(s.config.num_tables))),
    ("duplicate index in a bag", lambda s: any(
        len(set(b.indices[0][b.offsets[0][i]:b.offsets[0][i] + n].tolist())) < n
        for b in s.batches for i, n in enumerate(b.bag_lengths(0)))),
    ("batch of one", lambda s: s.batches[0].batch_size == 1),
    ("several batches", lambda s: len(s.batches) >= 2),
    ("same shape twice", lambda s: len(s.batches) >= 2 and [a.shape for a in s.batches[0].flat()]
     == [a.shape for a in s.batches[1].flat()]),
    ("new shape", lambda s: len(s.batches) >= 2 and [a.shape for a in s.batches[0].flat()]
     != [a.shape for a in s.batches[1].flat()]),
    ("all bags empty", lambda s: s.batches[0].indices[0].size == 0),
])
def test_sparse_edge_cases_are_reachable(name: str, predicate: Callable[[Sample], bool]) -> None:
    assert predicate(find(samples(), predicate, settings=settings(max_examples=2000)))


def _shrunk(predicate: Callable[[Sample], bool]) -> Sample:
    """The example Hypothesis shrinks a failure to: it replays the minimal
    failing example last (more robust than ``find`` under a forced seed)."""
    seen: list[Sample] = []

    @settings(database=None, max_examples=500)
    @given(samples())
    def fails_when(sample: Sample) -> None:
        seen.append(sample)
        assert not predicate(sample)

    with pytest.raises(AssertionError):
        fails_when()
    return seen[-1]


def test_shrinks_to_the_plainest_dlrm() -> None:
    # Shrunk per part: with an always-true predicate on whole samples every
    # shrink step "succeeds" and Hypothesis' cap on successful shrinks is spent
    # polishing dense floats before it reaches the config.
    c = find(dlrm_configs(), lambda c: True, settings=settings(database=None))
    assert (c.ln_emb, c.m_spa, c.weighted_pooling, c.index_dtype) == ((1,), 1, None, "int64")
    assert (c.qr_flag, c.md_flag, c.quantize_bits, c.arch_interaction_op) == (False, False, 32, "dot")
    assert (c.sigmoid_bot, c.sigmoid_top, c.loss_threshold) == (-1, -1, 0.0)
    assert c.weights == "inline"
    batch = find(batches(c), lambda b: True, settings=settings(database=None))
    assert batch.batch_size == 1
    assert batch.indices[0].size >= 1 and set(batch.indices[0].tolist()) == {0}  # no empty bag


@pytest.mark.slow  # ~35 s: Hypothesis shrinks whole samples, dense floats included
def test_a_whole_sample_shrinks_to_one_batch_and_no_extra_draws() -> None:
    # One batch, no extra weight draws. (The seed is left out: with every
    # shrink step succeeding, Hypothesis' cap on successful shrinks can run
    # out before the 32-bit seed reaches 0, depending on the run's seed.)
    smallest = _shrunk(lambda s: True)
    assert len(smallest.batches) == 1 and smallest.draws == ()


@pytest.mark.slow  # 51 s; Hypothesis' shrink was cut short in a loaded full run (2 tables left)
def test_failure_needing_pooling_shrinks_to_just_pooling() -> None:
    found = _shrunk(lambda s: s.config.weighted_pooling is not None)
    c = found.config
    assert c.weighted_pooling == "fixed" and c.ln_emb == (1,) and c.quantize_bits == 32


@given(st.data())
def test_batches_like_keeps_shapes(data: st.DataObject) -> None:
    sample = data.draw(samples(max_batches=1))
    again = data.draw(batches_like(sample.config, sample.batches[0]))
    assert [a.shape for a in again.flat()] == [a.shape for a in sample.batches[0].flat()]
    again.validate(sample.config)


def test_argument_validation() -> None:
    with pytest.raises(ValueError, match="rows=0"):
        bags(0)
    with pytest.raises(ValueError, match="max_batches=0"):
        samples(max_batches=0)
    with pytest.raises(ValueError, match="max_rows=0"):
        ConfigLimits(max_rows=0)
    with pytest.raises(TypeError, match="limits="):
        dlrm_configs(limits={"max_rows": 3})  # type: ignore[arg-type]


def test_draw_samples_gives_distinct_accepted_samples() -> None:
    from strategies.draw import draw_samples

    def single_table(s: Sample) -> bool:
        return s.config.num_tables == 1

    drawn = draw_samples(12, seed=3, accept=single_table)
    assert len(drawn) == 12 and all(single_table(s) for s in drawn)
    keys = {(s.config.to_json(), s.seed, s.npz_bytes()) for s in drawn}
    assert len(keys) == 12


@pytest.mark.parametrize("seed", [0, 1])
def test_a_short_campaigns_stream_reaches_every_knob_value(seed: int) -> None:
    """The first 40 samples of the campaign's stream (a 10-minute campaign on
    2 cores checks about that many) hold every value of every generated knob:
    Hypothesis' small-example start and clustering are kept to rounds of 10
    (strategies/draw.py), and no knob value is drawn too rarely to show."""
    from strategies.draw import each_sample

    class Enough(BaseException):
        pass

    seen: list[Sample] = []

    def take(sample: Sample) -> None:
        seen.append(sample)
        if len(seen) == 40:
            raise Enough

    with pytest.raises(Enough):
        each_sample(seed, take)
    values = {(k, v) for s in seen for k, v in s.config.to_dict().items()
              if k in ("dtype", "quantize_mlp", "pooling", "include_last_offset",
                       "per_sample_weights", "input_layout", "weights", "weighted_pooling",
                       "index_dtype", "arch_interaction_op", "qr_flag", "md_flag")}
    expected = {("dtype", "float32"), ("dtype", "float16"), ("dtype", "bfloat16"),
                ("quantize_mlp", "none"), ("quantize_mlp", "qint8"), ("quantize_mlp", "float16"),
                ("pooling", "sum"), ("pooling", "mean"), ("pooling", "max"),
                ("input_layout", "lists"), ("input_layout", "stacked"), ("input_layout", "fixed"),
                ("weights", "inline"), ("weights", "inputs"),
                ("weighted_pooling", None), ("weighted_pooling", "fixed"),
                ("weighted_pooling", "learned"), ("index_dtype", "int64"), ("index_dtype", "int32"),
                ("arch_interaction_op", "dot"), ("arch_interaction_op", "cat"),
                *((k, b) for k in ("include_last_offset", "per_sample_weights", "qr_flag", "md_flag")
                  for b in (False, True))}
    assert expected <= values, sorted(expected - values, key=str)
    assert {s.config.padding_idx is None for s in seen} == {True, False}
    assert {s.config.quantize_bits for s in seen} == {4, 8, 32}
    assert len({(s.config.to_json(), s.seed, s.npz_bytes()) for s in seen}) == 40


_STREAM_SCRIPT = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from strategies.draw import draw_samples, sample_key
print(','.join(sample_key(s).hex()[:12] for s in draw_samples(12, 1)))
"""


@pytest.mark.engine
def test_a_seed_gives_one_stream_whatever_modules_are_imported() -> None:
    """Hypothesis mixes constants from the source of local modules imported
    so far into its draws: without ``each_sample`` emptying that pool, seed
    1's stream changed with the modules a campaign had imported (a script
    and the CLI drew different samples for one seed)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    streams = {subprocess.run([sys.executable, "-c", _STREAM_SCRIPT, *extra], cwd=root, env=env,
                              capture_output=True, text=True, check=True).stdout
               for extra in ([], ["fuzz.engine.campaign", "fuzz.triage.localize", "tests.helpers"])}
    assert len(streams) == 1 and len(next(iter(streams)).split(",")) == 12, streams

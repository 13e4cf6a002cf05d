"""The structured edits and the shrinker: every edit keeps a sample valid and
the reducing ones make it strictly smaller; the shrinker reaches the minimal
case for known predicates, never returns a passing sample, respects its
budget and never pays twice for one candidate. One pipeline test shrinks the
real weighted-pooling mismatch on the refbackend target."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.triage import edits
from fuzz.model.sample import Sample
from fuzz.triage.shrink import PASSES, ShrinkResult, StepRejected, shrink
from strategies import dlrm_configs
from strategies.samples import samples
from tests.helpers import tiny_config, tiny_sample, varied_sample


def _big_sample(index_dtype: str = "int32") -> Sample:
    """Three tables (two QR), cat interaction, a hidden layer with a sigmoid,
    a clamp, int32 indices, learned pooling weights, three batches."""
    config = tiny_config(ln_bot=(3, 8, 4), ln_top=(16, 6, 2), arch_interaction_op="cat",
                         sigmoid_top=0, loss_threshold=0.01, weighted_pooling="learned",
                         qr_flag=True, qr_threshold=15, qr_collisions=2, index_dtype=index_dtype)
    return varied_sample(config)


def _nonempty_bag_in_table0(s: Sample) -> bool:
    return any(batch.indices[0].size for batch in s.batches)


def _weighted_bug(s: Sample) -> bool:
    return s.config.weighted_pooling is not None and _nonempty_bag_in_table0(s)


def _assert_valid(s: Sample) -> None:
    again = Sample.from_arrays(s.config.__class__.from_json(s.config.to_json()), s.seed,
                               s.arrays())
    assert edits.content_hash(again) == edits.content_hash(s)


# -- edits -----------------------------------------------------------------
# Tiny-class samples: the edits do not depend on size, and a medium sample
# (128 bags of up to 64 indices in 8 tables) has thousands of candidates.
@settings(max_examples=40)
@given(samples(dlrm_configs()))
def test_every_shrink_edit_is_valid_and_strictly_smaller(sample: Sample) -> None:
    key = edits.size_key(sample)
    tried = 0
    for name, generate in PASSES:
        for candidate in generate(sample):
            if candidate is None:
                continue
            tried += 1
            _assert_valid(candidate)
            assert edits.size_key(candidate) < key, (name, edits.sample_size(candidate),
                                                     edits.sample_size(sample))
    assert tried > 0 or edits.size_key(sample)[:3] == (1, 1, 0)


@settings(max_examples=40)
@given(samples(dlrm_configs()))
def test_non_reducing_edits_stay_valid(sample: Sample) -> None:
    for candidate in (edits.fill_empty_bags(sample), edits.same_shape_batches(sample),
                      *(edits.knob_to_default(sample, k) for k in edits.knobs())):
        if candidate is not None:
            _assert_valid(candidate)


def test_drop_table_fixes_widths_and_mixed_dimensions() -> None:
    config = tiny_config(md_flag=True, md_threshold=15, m_spa=(2, 4, 3))
    sample = tiny_sample(config)
    dropped = edits.drop_table(sample, 1)
    assert dropped is not None
    assert dropped.config.ln_emb == (10, 30) and dropped.config.m_spa == (2, 3)
    assert dropped.config.ln_bot[-1] == 3 and dropped.config.ln_top[0] == 3 + 3
    off = edits.knob_to_default(sample, "md_flag")
    assert off is not None and off.config.m_spa == 4


def test_drop_example_keeps_offsets_consistent() -> None:
    sample = tiny_sample()
    cut = edits.drop_example(sample, 0, 0)
    assert cut is not None and cut.batches[0].batch_size == 1
    for k in range(3):
        assert cut.batches[0].offsets[k].tolist() == [0]
        assert cut.batches[0].indices[k].tolist() == sample.batches[0].indices[k][
            int(sample.batches[0].offsets[k][1]):].tolist()


def test_index_dtype_edit_converts_arrays_and_rows_clamp() -> None:
    sample = tiny_sample(tiny_config(index_dtype="int32"))
    wide = edits.knob_to_default(sample, "index_dtype")
    assert wide is not None and wide.batches[0].indices[0].dtype == np.int64
    fewer = edits.fewer_rows(sample, 2, 5)
    assert fewer is not None and fewer.batches[0].indices[2].max() == 4


def test_drop_hidden_moves_the_sigmoid() -> None:
    sample = tiny_sample(tiny_config(ln_top=(10, 5, 3, 1), sigmoid_top=2))
    dropped = edits.drop_hidden(sample, "top", 1)
    assert dropped is not None
    assert dropped.config.ln_top == (10, 3, 1) and dropped.config.sigmoid_top == 1


def test_four_bit_widths_stay_even() -> None:
    sample = tiny_sample(tiny_config(quantize_bits=4))
    assert edits.narrow_m_spa(sample, 3) is None
    narrowed = edits.narrow_m_spa(sample, 2)
    assert narrowed is not None and narrowed.config.ln_bot[-1] == 2


def test_edit_that_changes_nothing_is_none() -> None:
    sample = tiny_sample()
    assert edits.knob_to_default(sample, "weighted_pooling") is None
    assert edits.with_seed(sample, sample.seed) is None


# -- shrink ----------------------------------------------------------------
def test_shrinks_weighted_pooling_to_one_table_one_example_one_index() -> None:
    result = shrink(_big_sample(), _weighted_bug, budget_s=60)
    size = result.size_after
    assert (size["tables"], size["examples"], size["indices"], size["batches"]) == (1, 1, 1, 1)
    assert edits.non_default_knobs(result.sample.config) == {"weighted_pooling": "learned"}
    assert (size["rows"], size["width"], size["dense"], size["mlp"]) == (1, 1, 1, 1)
    assert (size["index_sum"], size["dense_nonzero"], size["seed"]) == (0, 0, 0)
    assert result.stopped == "fixpoint" and result.steps_accepted > 0
    json.dumps(result.to_dict())


def test_the_skeleton_lands_on_the_bottom_in_one_accepted_step() -> None:
    """The first pass jumps straight to one table of the failing kind, one
    example, one index: the first accepted step is already that small, and
    the whole shrink (knobs in halves) costs a handful of predicate calls,
    not one per edit (32 steps before the skeleton and the knob halves)."""
    accepted: list[Sample] = []
    result = shrink(_big_sample(), _weighted_bug, budget_s=60, on_progress=accepted.append)
    first = edits.sample_size(accepted[0])
    assert (first["tables"], first["examples"], first["indices"], first["batches"]) == (1, 1, 1, 1)
    assert first["features"] == len(edits.non_default_knobs(_big_sample().config))
    assert result.stopped == "fixpoint" and result.steps_tried <= 12
    qr = shrink(_big_sample(), lambda s: s.config.table_kind(0) == "qr", budget_s=60)
    assert qr.sample.config.table_kind(0) == "qr" and qr.size_after["tables"] == 1


def test_shrink_keeps_the_feature_the_predicate_needs() -> None:
    result = shrink(_big_sample(), lambda s: s.config.index_dtype == "int32", budget_s=60)
    assert edits.non_default_knobs(result.sample.config) == {"index_dtype": "int32"}
    assert result.sample.batches[0].indices[0].dtype == np.int32
    assert edits.size_key(result.sample)[:3] == (1, 1, 0)


@settings(max_examples=25)
@given(samples(dlrm_configs()), st.integers(0, 3))  # tiny: a medium one spends the whole budget
def test_shrink_never_returns_a_passing_sample(sample: Sample, which: int) -> None:
    base = edits.sample_size(sample)
    predicates: list[Callable[[Sample], bool]] = [
        lambda s: edits.sample_size(s)["indices"] >= min(base["indices"], 3),
        lambda s: s.config.num_tables == base["tables"] or edits.sample_size(s)["examples"] > 1,
        lambda s: int(edits.content_hash(s), 16) % 3 != 0 or s is sample,
        lambda s: edits.sample_size(s)["rows"] >= base["rows"] // 2,
    ]
    predicate = predicates[which]
    result = shrink(sample, predicate, budget_s=30)
    assert result.sample is sample or predicate(result.sample)
    assert edits.size_key(result.sample) <= edits.size_key(sample)


def test_never_asks_twice_about_one_candidate() -> None:
    seen: Counter[str] = Counter()

    def never(s: Sample) -> bool:
        seen[edits.content_hash(s)] += 1
        return False

    result = shrink(_big_sample(), never, budget_s=60)
    assert result.sample is not None and result.steps_accepted == 0
    assert max(seen.values()) == 1 and sum(seen.values()) == result.steps_tried
    assert result.stopped == "fixpoint"


def test_a_rejected_candidate_costs_one_step_not_the_shrink() -> None:
    """A predicate that cannot judge a candidate (an export guard the edit
    broke, a bug of ours on it) rejects that step; shrinking goes on past it
    and still reaches the minimal case of the predicate it can judge."""
    rejected = 0

    def guarded(s: Sample) -> bool:
        nonlocal rejected
        if edits.sample_size(s)["examples"] == 1:  # e.g. a guard "batch >= 2"
            rejected += 1
            raise StepRejected(f"Guard failed: batch >= 2 (candidate {rejected})")
        return _weighted_bug(s)

    result = shrink(_big_sample(), guarded, budget_s=60)
    assert rejected > 0 and result.steps_rejected == rejected
    assert result.steps_rejected <= result.steps_tried - result.steps_accepted
    assert _weighted_bug(result.sample) and result.size_after["tables"] == 1
    assert result.stopped == "fixpoint"
    record = result.to_dict()
    assert record["steps_rejected"] == rejected
    assert record["rejections"][0].startswith("Guard failed: batch >= 2")


def test_the_record_says_which_pass_spent_the_steps_and_seconds() -> None:
    """Per pass: steps tried, accepted and seconds, summing to the totals, so a
    slow shrink shows where its compiles went (here a predicate that needs
    the MLP hidden layer spends seconds only in the passes that try it)."""
    def slow_on_mlp(s: Sample) -> bool:
        if len(s.config.ln_top) < len(_big_sample().config.ln_top):
            time.sleep(0.05)  # a candidate without the hidden layer: the costly compile
            return False
        return _weighted_bug(s)

    result = shrink(_big_sample(), slow_on_mlp, budget_s=60)
    by_pass = result.to_dict()["by_pass"]
    assert sum(t for t, _, _ in by_pass.values()) == result.steps_tried
    assert sum(a for _, a, _ in by_pass.values()) == result.steps_accepted
    assert by_pass["mlps"][2] >= 0.05
    assert by_pass["mlps"][2] > by_pass.get("tables", [0, 0, 0.0])[2]
    assert len(result.sample.config.ln_top) == len(_big_sample().config.ln_top)


def test_a_fault_that_needs_its_mlp_lands_next_to_the_bottom_in_one_step() -> None:
    """When every skeleton loses the fault (it needs the top MLP's hidden
    layer), the skeleton that keeps the MLPs is the first step accepted: one
    table, one example, one index, the MLP as it was."""
    hidden = len(_big_sample().config.ln_top)

    def needs_mlp(s: Sample) -> bool:
        return len(s.config.ln_top) == hidden and _weighted_bug(s)

    accepted: list[Sample] = []
    result = shrink(_big_sample(), needs_mlp, budget_s=60, on_progress=accepted.append)
    first = edits.sample_size(accepted[0])
    assert (first["tables"], first["examples"], first["indices"]) == (1, 1, 1)
    assert accepted[0].config.ln_top[1:] == _big_sample().config.ln_top[1:]  # [0]: derived
    assert result.stopped == "fixpoint" and len(result.sample.config.ln_top) == hidden
    assert result.to_dict()["by_pass"]["skeleton"][1] >= 1


def test_side_by_side_candidates_reach_the_same_case_in_fewer_rounds() -> None:
    """Judging two candidates at a time (one per worker) accepts the first
    that still fails, as one at a time would: the same smallest case, in
    fewer rounds; a candidate the batch rejects is counted like any other."""
    rounds = 0

    def many(batch: list[Sample]) -> list[bool | StepRejected]:
        nonlocal rounds
        rounds += 1
        return [StepRejected("guard") if edits.sample_size(c)["examples"] == 1
                else _weighted_bug(c) for c in batch]

    def one(c: Sample) -> bool:
        if edits.sample_size(c)["examples"] == 1:
            raise StepRejected("guard")
        return _weighted_bug(c)

    alone = shrink(_big_sample(), one, budget_s=60)
    paired = shrink(_big_sample(), one, budget_s=60, many=many, width=2)
    assert edits.content_hash(paired.sample) == edits.content_hash(alone.sample)
    assert paired.steps_accepted == alone.steps_accepted
    assert paired.steps_tried >= alone.steps_tried and paired.steps_rejected > 0
    assert rounds < alone.steps_tried
    with pytest.raises(ValueError, match="width=0"):
        shrink(_big_sample(), one, budget_s=60, many=many, width=0)


def test_budget_and_max_steps_are_respected() -> None:
    def slow(s: Sample) -> bool:
        time.sleep(0.05)
        return False

    started = time.monotonic()
    result = shrink(_big_sample(), slow, budget_s=0.3)
    assert result.stopped == "budget"
    assert time.monotonic() - started < 0.3 + 0.05 + 0.5
    capped = shrink(_big_sample(), lambda s: True, budget_s=60, max_steps=3)
    assert capped.stopped == "max_steps" and capped.steps_tried == 3


def test_progress_survives_an_interrupt() -> None:
    best: list[Sample] = []
    calls = 0

    def interrupted(s: Sample) -> bool:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise KeyboardInterrupt
        return True

    with pytest.raises(KeyboardInterrupt):
        shrink(_big_sample(), interrupted, budget_s=60, on_progress=best.append)
    assert len(best) == 3
    assert edits.size_key(best[-1]) < edits.size_key(best[0]) < edits.size_key(_big_sample())


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="budget_s"):
        shrink(tiny_sample(), lambda s: True, budget_s=0)
    with pytest.raises(ValueError, match="max_steps"):
        shrink(tiny_sample(), lambda s: True, budget_s=1, max_steps=-1)
    with pytest.raises(TypeError, match="still_failing"):
        shrink(tiny_sample(), None, budget_s=1)  # type: ignore[arg-type]


# -- the real bug ----------------------------------------------------------
@pytest.mark.pipeline
@pytest.mark.slow  # minutes of real compiles; test_phases shrinks the same bug within a campaign
def test_real_weighted_pooling_mismatch_shrinks_to_one_index() -> None:
    import oracles  # noqa: F401  (oracles before fuzz.workers.execute: import order)
    from fuzz.workers.execute import execute
    from fuzz.targets.catalog import TARGETS
    from oracles.judge import ReferenceFailed, judge
    from oracles.verdict import Verdict

    def mismatch(s: Sample) -> bool:
        got = execute(TARGETS["refbackend"], s)
        try:
            outcome = judge(got, execute(TARGETS["eager-f64"], s), execute(TARGETS["eager"], s))
        except ReferenceFailed:
            return False
        return outcome.verdict is Verdict.MISMATCH

    # int32 indices would hit a different bug first (a lowering error on
    # embedding_bag), and the predicate asks for the MISMATCH only.
    start = _big_sample(index_dtype="int64")
    assert mismatch(start)
    result = shrink(start, mismatch, budget_s=90)
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "config"}))
    size = result.size_after
    assert (size["tables"], size["examples"], size["indices"]) == (1, 1, 1)
    assert result.sample.config.weighted_pooling == "learned"
    assert edits.non_default_knobs(result.sample.config) == {"weighted_pooling": "learned"}
    assert mismatch(result.sample)
    assert isinstance(result, ShrinkResult)
    # The same predicate localizes the bug by ablation: pooling weights alone.
    from fuzz.triage.ablate import ablate
    ablation = ablate(start, mismatch, budget_s=60)
    print(json.dumps({k: v for k, v in ablation.to_dict().items() if k != "config"}))
    assert ablation.minimal == ("weighted_pooling=learned",)


def test_a_big_qr_table_is_cut_to_its_threshold_in_one_step() -> None:
    """A table of a million QR rows whose fault needs the QR path and a
    non-empty bag is cut straight to the fewest rows that keep it QR
    (threshold + 1): halving toward the threshold took ~14 compiles of a
    table that makes each one slow (a Vulkan case shrinking at 0.2 steps/s)."""
    from fuzz.triage.shrink_passes import _rows

    config = tiny_config(qr_flag=True, qr_threshold=200, qr_collisions=4, ln_emb=(1_000_000,),
                         ln_top=(5, 1))
    sample = tiny_sample(config)  # its bags hit the last row
    assert [c.config.ln_emb for c in _rows(sample) if c is not None][0] == (201,)
    calls: list[int] = []

    def qr_bug(s: Sample) -> bool:  # the QR path, on a high index (not the skeleton's 0)
        calls.append(s.config.ln_emb[0])
        return s.config.table_kind(0) == "qr" and \
            any(int(b.indices[0].max(initial=0)) >= 100 for b in s.batches)

    result = shrink(sample, qr_bug, budget_s=60)
    assert result.sample.config.ln_emb == (201,) and result.stopped == "fixpoint"
    assert len([rows for rows in calls if 201 < rows < 1_000_000]) == 0, calls


_THREE_KNOBS = {"loss_threshold", "qr_flag", "index_dtype"}


def _needs_three_knobs(s: Sample) -> bool:
    return _THREE_KNOBS <= set(edits.non_default_knobs(s.config))


def test_knob_resets_implied_by_a_lost_group_cost_no_step() -> None:
    """A fault that needs three knobs of eight: once a group reset has lost
    it, a later candidate that resets what is left of that group is not
    judged (it cannot keep a fault whose knob it resets). Without that
    memory ddmin's halves and quarters start again from every accepted
    candidate: 16 knob steps one at a time, 9 with it; the result is the
    same three knobs."""
    judged: list[Sample] = []

    def needs(s: Sample) -> bool:
        judged.append(s)
        return _needs_three_knobs(s)

    result = shrink(_big_sample(), needs, budget_s=60)
    assert set(edits.non_default_knobs(result.sample.config)) == _THREE_KNOBS
    assert result.stopped == "fixpoint"
    knob_steps = result.by_pass["knobs"][0]
    assert knob_steps <= 10, result.by_pass


def test_a_candidate_left_unjudged_after_the_winner_is_no_evidence() -> None:
    """A many-predicate may answer False for candidates after the first that
    holds without judging them (the campaign's does, to save a reference
    run): those must not count as lost, or a fault that needs no knob would
    keep one."""
    def many(batch: list[Sample]) -> list[bool | StepRejected]:
        out: list[bool | StepRejected] = []
        for c in batch:
            out.append(False if True in out else _nonempty_bag_in_table0(c))
        return out

    result = shrink(_big_sample(), _nonempty_bag_in_table0, budget_s=60, many=many, width=2)
    assert edits.non_default_knobs(result.sample.config) == {}
    assert result.stopped == "fixpoint"


def test_a_callable_width_is_asked_before_each_batch() -> None:
    """The campaign's width is the workers free at that moment: each batch
    holds as many candidates as the callable said, and the result is the one
    a fixed width reaches."""
    widths = iter([1, 2, 3] * 100)
    sizes: list[int] = []

    def many(batch: list[Sample]) -> list[bool | StepRejected]:
        sizes.append(len(batch))
        return [_weighted_bug(c) for c in batch]

    varying = shrink(_big_sample(), _weighted_bug, budget_s=60, many=many,
                     width=lambda: next(widths))
    fixed = shrink(_big_sample(), _weighted_bug, budget_s=60)
    assert edits.content_hash(varying.sample) == edits.content_hash(fixed.sample)
    assert 3 in sizes and max(sizes) == 3

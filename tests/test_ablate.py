"""Feature ablation: features are read generically off the config and the
inputs, named by the documented rule, and the minimal set is right for AND
and OR of two features (an OR keeps only the later feature, by design)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings

from fuzz.triage import edits
from fuzz.triage.ablate import Ablation, ablate, family, features
from fuzz.model.sample import Sample
from strategies.samples import samples
from tests.helpers import tiny_config, tiny_sample, varied_sample


def _busy_sample() -> Sample:
    config = tiny_config(weighted_pooling="fixed", qr_flag=True, qr_operation="add",
                         qr_threshold=15, index_dtype="int32", arch_interaction_op="cat",
                         ln_top=(16, 1), loss_threshold=0.1)
    return varied_sample(config)


def _int32(s: Sample) -> bool:
    return s.config.index_dtype == "int32"


def _pooled(s: Sample) -> bool:
    return s.config.weighted_pooling is not None


def test_features_are_named_by_the_rule() -> None:
    names = set(features(_busy_sample()))
    assert names == {"weighted_pooling=fixed", "qr_flag", "qr_operation=add", "qr_threshold",
                     "index_dtype", "arch_interaction_op", "loss_threshold", "empty_bags",
                     "mixed_shapes"}
    assert family("weighted_pooling=fixed") == family("weighted_pooling=learned")
    assert "quantize_bits=4" in features(tiny_sample(tiny_config(quantize_bits=4)))


@settings(max_examples=40)
@given(samples())
def test_every_non_default_knob_is_a_feature_that_switches_off(sample: Sample) -> None:
    found = features(sample)
    assert {family(name) for name in found} >= set(edits.non_default_knobs(sample.config))
    for name, switch_off in found.items():
        off = switch_off(sample)
        if off is not None:
            assert name not in features(off)


def test_and_of_two_features_keeps_both() -> None:
    result = ablate(_busy_sample(), lambda s: _int32(s) and _pooled(s), budget_s=30)
    assert result.minimal == ("index_dtype", "weighted_pooling=fixed")
    assert set(edits.non_default_knobs(result.sample.config)) == {"index_dtype",
                                                                  "weighted_pooling"}
    assert not result.untested and result.steps == len(features(_busy_sample()))
    json.dumps(result.to_dict())


def test_or_of_two_features_keeps_the_later_one() -> None:
    # weighted_pooling precedes index_dtype in DLRMConfig: it is switched off
    # first while int32 still fails, then int32 is found necessary.
    result = ablate(_busy_sample(), lambda s: _int32(s) or _pooled(s), budget_s=30)
    assert result.minimal == ("index_dtype",)
    assert result.sample.config.weighted_pooling is None


def test_input_features_are_ablated() -> None:
    def empty(s: Sample) -> bool:
        return any((b.bag_lengths(k) == 0).any() for b in s.batches
                   for k in range(s.config.num_tables))

    result = ablate(_busy_sample(), empty, budget_s=30)
    assert result.minimal == ("empty_bags",)
    assert edits.non_default_knobs(result.sample.config) == {}
    assert len(result.sample.batches) == 2  # mixed shapes switched off too


def test_budget_leaves_features_untested() -> None:
    def slow(s: Sample) -> bool:
        time.sleep(0.05)
        return True

    result = ablate(_busy_sample(), slow, budget_s=0.12)
    assert result.untested and result.steps < len(features(_busy_sample()))
    assert isinstance(result, Ablation)


def test_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="budget_s"):
        ablate(tiny_sample(), _int32, budget_s=-1)

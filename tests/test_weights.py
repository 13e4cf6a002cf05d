"""Weights as program inputs (fuzz/weights.py): the wrapped model computes
exactly what the model does (unit, eager), and through the real pipeline one
program serves every weight seed and any table size (pipeline)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fuzz.workers.execute import execute
from fuzz.model.dlrm import build, to_torch
from fuzz.targets.pipeline import Timer
from fuzz.targets.catalog import TARGETS, CompiledTarget
from fuzz.model.weights import WeightsAsInputs, export_form, state_arrays, state_names, \
    weights_as_inputs
from oracles import Verdict, judge
from tests.helpers import tiny_config, tiny_sample, varied_sample


@pytest.mark.parametrize("knobs", [{}, {"qr_flag": True, "qr_threshold": 5},
                                   {"md_flag": True, "m_spa": (4, 2, 3), "md_threshold": 15},
                                   {"weighted_pooling": "learned"}, {"dtype": "float16"}])
def test_the_wrapped_model_computes_what_the_model_does(knobs: dict) -> None:
    config = tiny_config(weights="inputs", **knobs)
    model = build(config, 5)
    args = to_torch(tiny_sample(config).batches[0].flat(), config)
    wrapped = WeightsAsInputs(model)
    state = [torch.from_numpy(a) for a in state_arrays(model)]
    with torch.no_grad():
        assert torch.equal(wrapped(state, args), model(*args))
    assert all(torch.from_numpy(a).is_floating_point() for a in state_arrays(model))
    other = [torch.from_numpy(a) for a in state_arrays(build(config, 6))]
    with torch.no_grad():  # another seed's weights through the same module
        assert torch.equal(wrapped(other, args), build(config, 6)(*args))


@pytest.mark.parametrize("knobs", [{}, {"qr_flag": True, "qr_threshold": 5},
                                   {"md_flag": True, "m_spa": (4, 2, 3), "md_threshold": 15},
                                   {"weighted_pooling": "fixed"}, {"dtype": "float16"}])
def test_the_export_model_has_every_shape_and_no_drawn_weight(knobs: dict) -> None:
    """Weights-as-inputs programs are exported from ``build(config, None)``:
    the seeded model's state, name for name and shape for shape, all zero."""
    config = tiny_config(weights="inputs", **knobs)
    seeded, zeros = build(config, 4), build(config, None)
    assert state_names(zeros) == state_names(seeded)
    for drawn, zero in zip(state_arrays(seeded), state_arrays(zeros)):
        assert zero.shape == drawn.shape and zero.dtype == drawn.dtype
        assert not zero.any() and drawn.any()


@pytest.mark.parametrize("knobs", [{"dtype": "bfloat16"}, {"quantize_bits": 8},
                                   {"quantize_mlp": "qint8"}])
def test_weights_that_cannot_all_be_inputs_stay_inline(knobs: dict) -> None:
    """Prepacked quantized tables are uint8 drawn from the seed, quantized MLPs
    are not tensors, numpy has no bfloat16: a program with any of them would
    still depend on the seed, so none of its weights become inputs."""
    config = tiny_config(weights="inputs", **knobs)
    assert not weights_as_inputs(config) and weights_as_inputs(tiny_config(weights="inputs"))
    model = build(config, 0)
    assert export_form(model, config, (), None)[0] is model
    if "quantize_bits" in knobs:  # its floating state alone would not cover the tables
        assert not any("emb" in name for name in state_names(model))


@pytest.mark.pipeline
def test_one_program_for_every_seed_and_any_table_size() -> None:
    target = TARGETS["iree-cpu"]
    assert isinstance(target, CompiledTarget)
    sizes = {}
    for weights in ("inline", "inputs"):
        config = tiny_config(ln_emb=(10, 100_000, 30), weights=weights)
        example = tiny_sample(config).batches[0].flat()
        programs = [target.lowered(config, seed, example, Timer(), None) for seed in (1, 2)]
        assert (programs[0] == programs[1]) == (weights == "inputs")
        sizes[weights] = len(programs[0])
    assert sizes["inputs"] < 20_000 < 1_000_000 < sizes["inline"], sizes
    for seed in (1, 2):  # the same program, right for each seed's weights
        sample = varied_sample(tiny_config(weights="inputs"), seed=seed)
        for name in ("iree-cpu", "iree-cpu-dyn", "iree-torch"):
            outcome = judge(execute(TARGETS[name], sample), execute(TARGETS["eager-f64"], sample),
                            execute(TARGETS["eager"], sample))
            assert outcome.verdict is Verdict.PASS, outcome
    assert np.isfinite(sizes["inputs"])


def test_a_failing_weight_draw_becomes_a_sample_of_its_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Draws are judged like batches; the first that fails where the
    sample's own seed passed is queued, re-seeded, as a sample of its own."""
    from fuzz.engine.campaign import Campaign, CampaignOptions
    from fuzz.engine.dispatch import InFlight
    from fuzz.triage.findings import Triage
    from oracles import Tolerance
    from oracles.results import TargetResult

    class _Pool:
        slots, pending, runnable = 1, 0, 0

        def __init__(self) -> None:
            self.jobs: list = []

        def submit(self, job: object, after: int | None = None) -> int:
            self.jobs.append(job)
            return len(self.jobs)

    campaign = Campaign(CampaignOptions(targets=("fake-ok",), corpus_dir=tmp_path / "c"))
    pool = _Pool()
    campaign.session.pool, campaign.session.triage = pool, Triage(pool, Tolerance())  # type: ignore[arg-type]
    sample = tiny_sample(tiny_config(weights="inputs"))
    sample = type(sample)(sample.config, sample.seed, sample.batches, draws=(7, 8, 9))
    good, bad = np.ones((2, 1), np.float32), np.full((2, 1), 3.0, np.float32)

    def result(name: str, draws: dict) -> TargetResult:
        return TargetResult(target=name, outputs=[good], draws=draws)

    reference = result("eager-f64", {7: [good], 8: [good], 9: [good]})
    eager = result("eager", {7: [good], 8: [good], 9: [good]})
    results = {"fake-ok": result("fake-ok", {7: [good], 8: [bad], 9: [bad]})}
    outcomes = campaign.session.triage.outcomes(results, reference, eager, sample)
    assert outcomes["fake-ok"].verdict is Verdict.PASS
    flight = InFlight(sample, [TARGETS["iree-cpu"]], 4, [])
    campaign.filing.check_draws(flight, reference, eager, results, outcomes)
    assert campaign.report.draws_checked == 2 and campaign.report.draws_reseeded == 1
    queued = {job[1].seed for job in pool.jobs}
    assert queued == {8} and all(job[1].draws == () for job in pool.jobs)
    assert campaign.session.waiting[-1].index == 4  # filed under the sample's number
    # Once the budget is spent, a failing draw is noted, not run as a new sample.
    campaign.filing.closed = True
    submitted = len(pool.jobs)
    campaign.filing.check_draws(flight, reference, eager, results, outcomes)
    assert len(pool.jobs) == submitted and campaign.report.draws_reseeded == 1
    (note,) = campaign.report.cut_unfiled
    assert "weight draw 8 failed" in note and "not run again" in note


@pytest.mark.pipeline
def test_weight_draws_run_on_the_one_artifact() -> None:
    sample = varied_sample(tiny_config(weights="inputs"))
    sample = type(sample)(sample.config, sample.seed, sample.batches, draws=(101, 202))
    results = {name: execute(TARGETS[name], sample) for name in ("eager-f64", "eager", "iree-cpu")}
    got = results["iree-cpu"]
    assert got.compiles == 1 and sorted(got.draws) == [101, 202]
    for seed in (101, 202):
        assert not np.array_equal(got.draws[seed][0], got.outputs[0])  # other weights, other answers
        drawn = {name: type(r)(r.target, r.draws[seed]) for name, r in results.items()}
        outcome = judge(drawn["iree-cpu"], drawn["eager-f64"], drawn["eager"])
        assert outcome.verdict is Verdict.PASS, outcome

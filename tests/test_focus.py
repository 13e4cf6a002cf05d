"""Staying inside a region (issue 23): ``--focus``, ``--config``,
``--neighbours``, ``--preset`` and ``--rows-scale``. Unit tier (no compiler,
no workers) but for the two ``pipeline`` tests at the end: the Kaggle preset
through refbackend and IREE llvm-cpu, and one short focused campaign."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fuzz.cli.main import main
from fuzz.engine.coverage import FOCUS_ROW, Coverage
from fuzz.model.config import DLRMConfig
from fuzz.model.focus import INPUT_CLASSES, FocusError, make_focus, parse_focus
from fuzz.model.presets import PRESETS, preset_config, scale_rows
from fuzz.model.sample import Sample
from fuzz.triage import edits
from fuzz.triage.shrink import shrink
from strategies.draw import draw_samples
from tests.helpers import tiny_config


# -- parsing ---------------------------------------------------------------------
def test_values_are_parsed_by_the_fields_type() -> None:
    pins, inputs, shape = parse_focus(
        "pooling=mean,ln_emb=[4, 8],padding_idx=none,include_last_offset=true,"
        "m_spa=3,loss_threshold=0.1,weighted_pooling=null,input=empty_bags,shape=medium")
    assert pins == {"pooling": "mean", "ln_emb": (4, 8), "padding_idx": None,
                    "include_last_offset": True, "m_spa": 3, "loss_threshold": 0.1,
                    "weighted_pooling": None}
    assert inputs == ("empty_bags",) and shape == "medium"
    assert parse_focus("m_spa=[2,3]")[0] == {"m_spa": (2, 3)}
    assert parse_focus("quantize_bits=4,padding_idx=2")[0] == {"quantize_bits": 4,
                                                               "padding_idx": 2}


@pytest.mark.parametrize("text, words", [
    ("poolng=mean", ["poolng", "unknown knob", "pooling"]),
    ("pooling=avg", ["pooling=avg", "sum, mean, max"]),
    ("ln_emb=[a]", ["ln_emb", "integer"]),
    ("pooling", ["KNOB=VALUE"]),
    ("pooling=mean,pooling=max", ["given twice"]),
    ("input=holes", ["holes", "empty_bags"]),
    ("per_sample_weights=true,pooling=max", ["pooling='sum'", "per_sample_weights=False"]),
    ("weighted_pooling=fixed,pooling=mean", ["weighted_pooling", "pooling='sum'"]),
    ("quantize_bits=4,m_spa=3", ["4-bit", "even"]),
    ("input_layout=fixed,input=empty_bags", ["fixed-length", "input_layout=lists"]),
])
def test_an_impossible_focus_names_the_rule(text: str, words: list[str]) -> None:
    with pytest.raises(FocusError) as error:
        make_focus(text)
    message = str(error.value)
    assert "\n" not in message and all(word in message for word in words), message


@pytest.mark.parametrize("argv, words", [
    (["--focus", "per_sample_weights=true,pooling=max"], ["impossible", "pooling='sum'"]),
    (["--focus", "poolng=mean"], ["unknown knob"]),
    (["--preset", "criteo"], ["kaggle"]),
    (["--neighbours"], ["--config"]),
    (["--rows-scale", "0.5"], ["--preset"]),
    (["--preset", "kaggle", "--rows-scale", "1e-3", "--focus", "shape=tiny"],
     ["impossible", "shape=tiny", "medium"]),
    (["--focus", "shape=large,ln_emb=[4],m_spa=2"], ["impossible", "shape=large"]),
    (["--focus", "pooling=mean", "--schedule"], ["--schedule"]),
])
def test_the_cli_answers_an_impossible_focus_in_one_line_with_status_2(
        argv: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["run", "--corpus", str(tmp_path / "corpus"), "--budget", "1s", *argv])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.count("\n") == 0 and err.startswith("dlrm-fuzz: error:"), err
    assert all(word in err for word in words), err
    assert not (tmp_path / "corpus").exists()  # nothing written


def test_a_region_no_draw_lands_in_is_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # No pinned size rules it out, but a padding row 100 needs tables of 101
    # rows, past the tiny class: the probe draw finds nothing, quickly.
    status = main(["run", "--corpus", str(tmp_path / "c"), "--focus", "shape=tiny,padding_idx=100"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "no generated sample" in err, err


def test_a_bad_config_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**tiny_config().to_dict(), "ln_bot": [3, 5]}))
    assert main(["run", "--corpus", str(tmp_path / "c"), "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "ln_bot" in err and "embedding width" in err, err


# -- generation and shrinking stay inside -----------------------------------------------
_FOCUSES = ["pooling=mean", "per_sample_weights=true,input=empty_bags",
            "input_layout=stacked,input=batch_of_one,input=duplicate_index",
            "shape=medium,dtype=float16", "padding_idx=5,input=last_row",
            "qr_flag=true,qr_operation=concat,qr_threshold=3"]


@pytest.mark.parametrize("text", _FOCUSES)
def test_every_generated_sample_holds_the_focus(text: str) -> None:
    focus = make_focus(text)
    drawn = draw_samples(20, seed=3, focus=focus)
    assert len(drawn) == 20
    assert all(focus.holds(s) for s in drawn)
    for name, value in focus.pins:
        assert all(getattr(s.config, name) == value for s in drawn)
    # The knobs left free still vary (the projection keeps what it can).
    assert len({s.config.input_layout for s in drawn} | {s.config.index_dtype for s in drawn}) > 2


@pytest.mark.parametrize("text", _FOCUSES[:4])
def test_every_shrink_step_holds_the_focus(text: str) -> None:
    """A predicate that always holds lets the shrinker go as far as it can:
    it must never offer a candidate outside the region, the skeleton and
    the knobs-to-default pass included, and still make progress."""
    focus = make_focus(text)
    offered: list[Sample] = []

    def still_failing(candidate: Sample) -> bool:
        offered.append(candidate)
        return True

    for sample in draw_samples(3, seed=1, focus=focus):
        result = shrink(sample, still_failing, budget_s=30, max_steps=300, region=focus)
        assert result.steps_accepted > 0 or edits.size_key(sample)[:3] == (1, 1, 0)
        assert focus.holds(result.sample)
    assert offered and all(focus.holds(c) for c in offered)


def test_a_case_from_outside_the_region_shrinks_as_before() -> None:
    (sample,) = draw_samples(1, seed=0, focus=make_focus("pooling=sum,input=batch_of_one"))
    focus = make_focus("pooling=mean")
    result = shrink(sample, lambda s: True, budget_s=30, max_steps=50, region=focus)
    assert result.steps_accepted > 0


def test_the_coverage_counts_the_samples_inside_the_focus() -> None:
    focus = make_focus("pooling=max")
    coverage = Coverage(focus=focus)
    drawn = draw_samples(6, seed=2, focus=focus)
    for sample in drawn:
        coverage.add(sample, {})
    assert coverage.counts[FOCUS_ROW]["generated"] == 6
    assert coverage.counts["pooling=max"]["generated"] == 6
    assert set(INPUT_CLASSES) >= {"empty_bags", "batch_of_one", "duplicate_index", "last_row"}


# -- one given model: --config, --neighbours --------------------------------------------
def _given() -> DLRMConfig:
    return DLRMConfig(m_spa=4, ln_emb=(30, 7, 12), ln_bot=(3, 5, 4), ln_top=(10, 6, 1),
                      sigmoid_top=1)


def test_a_config_campaigns_samples_all_share_its_architecture() -> None:
    focus = make_focus(config=_given())
    drawn = draw_samples(15, seed=0, focus=focus)
    assert len(drawn) == 15 and all(s.config == _given() for s in drawn)
    assert len({s.seed for s in drawn}) > 1  # weights and batches are drawn


def test_a_config_with_a_focus_pins_both_and_shrinks_keeping_the_architecture() -> None:
    focus = make_focus("pooling=mean", config=_given())
    (sample,) = draw_samples(1, seed=4, focus=focus)
    assert sample.config.pooling == "mean" and sample.config.ln_emb == _given().ln_emb
    result = shrink(sample, lambda s: True, budget_s=30, max_steps=200, region=focus)
    assert result.sample.config == sample.config
    assert edits.size_key(result.sample) <= edits.size_key(sample)


def test_neighbours_keep_tables_and_widths_and_vary_the_free_knobs() -> None:
    focus = make_focus("index_dtype=int32", config=_given(), neighbours=True)
    drawn = draw_samples(25, seed=0, focus=focus)
    assert all(s.config.ln_emb == (30, 7, 12) and s.config.m_spa == 4 for s in drawn)
    assert all(s.config.ln_bot[:-1] == (3, 5) and s.config.ln_top[1:] == (6, 1) for s in drawn)
    assert all(s.config.index_dtype == "int32" for s in drawn)
    varied = {(s.config.pooling, s.config.arch_interaction_op, s.config.input_layout)
              for s in drawn}
    assert len(varied) > 3


def test_config_files_load_from_to_json_and_case_json(tmp_path: Path) -> None:
    from fuzz.model.focus import load_config

    plain, case = tmp_path / "c.json", tmp_path / "case.json"
    plain.write_text(_given().to_json())
    case.write_text(json.dumps({"config": _given().to_dict(), "seed": 3}))
    assert load_config(plain) == load_config(case) == _given()


# -- presets -----------------------------------------------------------------------------
def test_presets_are_upstreams_models() -> None:
    readme, kaggle, terabyte = (preset_config(name) for name in ("readme", "kaggle", "terabyte"))
    # dlrm_s_pytorch.py's defaults; its README debug run prints top MLP [8 4 2 1].
    assert (readme.m_spa, readme.ln_emb, readme.ln_bot, readme.ln_top) == \
        (2, (4, 3, 2), (4, 3, 2), (8, 4, 2, 1))
    # tools/visualize.py: Kaggle ln_top [367, 512, 256, 1], Terabyte [415, 512, 512, 256, 1].
    assert kaggle.ln_top == (367, 512, 256, 1) and kaggle.ln_bot == (13, 512, 256, 64, 16)
    assert terabyte.ln_top == (415, 512, 512, 256, 1) and terabyte.m_spa == 64
    assert kaggle.num_tables == terabyte.num_tables == 26
    assert max(kaggle.ln_emb) == 10131227 and max(terabyte.ln_emb) == 9994222
    assert all(c.sigmoid_top == len(c.ln_top) - 2 and c.upstream for c in (readme, kaggle, terabyte))
    assert set(PRESETS) == {"readme", "kaggle", "terabyte"}


def test_rows_scale_rounds_half_up_and_keeps_one_row() -> None:
    kaggle = preset_config("kaggle", 1e-3)
    assert kaggle.ln_emb[:4] == (1, 1, 10131, 2203) and min(kaggle.ln_emb) == 1
    assert sum(kaggle.ln_emb) == 33773
    assert scale_rows(tiny_config(ln_emb=(5, 15, 25)), 0.1).ln_emb == (1, 2, 3)
    assert preset_config("kaggle", 1e-3) == kaggle  # deterministic
    with pytest.raises(FocusError, match="padding row"):
        scale_rows(tiny_config(ln_emb=(50, 50, 50), padding_idx=20), 0.1)


def test_the_presets_command_lists_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["presets", "--rows-scale", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "kaggle: 26 tables, 33773 rows" in out and "dlrm_s_criteo_terabyte.sh" in out


# -- the real pipeline -------------------------------------------------------------------
@pytest.mark.pipeline
def test_the_kaggle_preset_scaled_down_runs_through_refbackend_and_iree_cpu() -> None:
    from fuzz.targets.catalog import TARGETS
    from fuzz.workers.execute import execute
    from oracles import Tolerance, Verdict, judge

    focus = make_focus(config=preset_config("kaggle", 1e-3))
    (sample,) = draw_samples(1, seed=0, focus=focus)
    reference = execute(TARGETS["eager-f64"], sample)
    eager = execute(TARGETS["eager"], sample)
    rule = Tolerance().for_precision(sample.config.dtype, sample.reduction_length())
    for name in ("refbackend", "iree-cpu"):
        outcome = judge(execute(TARGETS[name], sample), reference, eager, rule)
        assert outcome.verdict is Verdict.PASS, (name, outcome)


@pytest.mark.pipeline
@pytest.mark.slow
def test_a_focused_campaign_stores_and_shrinks_only_inside_the_focus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """About 25 s: pooling=mean (no linalg lowering today) on refbackend and
    IREE llvm-cpu. Every generated sample, every stored case and every
    candidate the shrinker offered holds the focus."""
    from fuzz.engine.campaign import Campaign, CampaignOptions
    from fuzz.store import corpus
    from fuzz.triage import shrink as shrink_module

    offered: list[Sample] = []
    real_offer = shrink_module._Reducer.offer

    def offer(self: Any, batch: list[Sample]) -> bool:
        offered.extend(batch)
        return bool(real_offer(self, batch))

    monkeypatch.setattr(shrink_module._Reducer, "offer", offer)
    focus = make_focus("pooling=mean")
    store = tmp_path / "corpus"
    report = Campaign(CampaignOptions(targets=("refbackend", "iree-cpu"), corpus_dir=store,
                                      budget_s=20, replay=False, report=False, workers=2,
                                      focus=focus)).run()
    assert report.samples > 0 and not report.harness_errors
    assert report.coverage.counts[FOCUS_ROW]["generated"] == report.samples
    assert report.coverage.counts["pooling=mean"]["generated"] == report.samples
    entries, junk = corpus.load(store)
    assert entries and not junk
    assert all(focus.holds(entry.sample) for entry in entries)
    assert offered and all(focus.holds(candidate) for candidate in offered)

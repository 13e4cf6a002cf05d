"""The scheduler (unit): cells that keep landing in the same known bucket are
offered less, never skipped more than ``every - 1`` times in a row, and run
again in full as soon as their outcome changes; whole program groups are
decided together."""

from __future__ import annotations

import pytest

from pathlib import Path

from fuzz.model.sample import Sample
from fuzz.engine.schedule import Scheduler
from fuzz.targets.catalog import TARGETS, Target
from tests.helpers import file_as_generated, tiny_sample

LINALG = [TARGETS[n] for n in ("iree-cpu", "refbackend", "iree-vmvx")]
TOSA = [TARGETS["iree-tosa"]]
KNOWN = {"tosa-bug", "tosa-bug-2", "linalg-bug"}


def _offer(scheduler: Scheduler, targets: list[Target], buckets: dict[str, str]) -> list[str]:
    sample = tiny_sample()
    chosen = scheduler.choose(sample, targets)
    scheduler.record(sample, chosen, {n: b for n, b in buckets.items()
                                      if n in {t.name for t in chosen}}, KNOWN)
    return [t.name for t in chosen]


def test_a_cell_in_the_same_known_bucket_is_run_less_but_regularly() -> None:
    scheduler = Scheduler(seed=1)
    runs = [_offer(scheduler, TOSA + LINALG, {"iree-tosa": "tosa-bug"}) for _ in range(200)]
    tosa_runs = sum("iree-tosa" in r for r in runs)
    assert all(len([n for n in r if n != "iree-tosa"]) == 3 for r in runs)  # linalg passes
    assert 200 / 8 <= tosa_runs <= 200 / 3, tosa_runs  # floor 1/8, but not every time
    gaps, last = [], -1
    for i, names in enumerate(runs):
        if "iree-tosa" in names:
            gaps.append(i - last)
            last = i
    assert max(gaps) <= 8  # tried at least every 8th offer


def test_a_changed_outcome_is_run_every_time_again() -> None:
    scheduler = Scheduler(seed=2)
    for _ in range(30):
        _offer(scheduler, TOSA, {"iree-tosa": "tosa-bug"})
    assert scheduler.chance(next(iter(scheduler.cells.values()))) < 1
    # The bug is fixed: the first run that sees it pass resets the cell.
    while "iree-tosa" not in _offer(scheduler, TOSA, {}):
        pass
    assert [_offer(scheduler, TOSA, {}) for _ in range(10)] == [["iree-tosa"]] * 10


def test_unknown_buckets_never_reduce_a_cell() -> None:
    scheduler = Scheduler(seed=3)
    runs = [_offer(scheduler, TOSA, {"iree-tosa": "brand-new"}) for _ in range(20)]
    assert runs == [["iree-tosa"]] * 20


def test_a_program_group_is_decided_as_one() -> None:
    scheduler = Scheduler(seed=4)
    buckets = {t.name: "linalg-bug" for t in LINALG}
    runs = [_offer(scheduler, LINALG, buckets) for _ in range(100)]
    assert {len(r) for r in runs} <= {0, 3}  # all of the group or none of it
    assert any(len(r) == 0 for r in runs)
    record = scheduler.cells[scheduler.cell(LINALG[0], tiny_sample())]
    assert record.offered == 100 and record.run == sum(len(r) == 3 for r in runs)
    ((group, cells, _, _),) = scheduler.allocation()  # the cell, and its repaired variant's
    assert group == "linalg-on-tensors|static" and cells == 2


def _distinct_samples() -> list:  # type: ignore[type-arg]
    """Samples with 30 different feature sets (30 cells per program group)."""
    import itertools

    from tests.helpers import tiny_config

    variants = [("sum", None), ("mean", None), ("max", None), ("sum", "fixed"), ("sum", "learned")]
    return [tiny_sample(tiny_config(dtype=d, index_dtype=i, pooling=pooling, weighted_pooling=w))
            for d, i, (pooling, w) in itertools.product(("float32", "float16", "bfloat16"),
                                                        ("int64", "int32"), variants)]


def test_new_cells_of_a_group_stuck_in_known_buckets_are_run_less() -> None:
    """Feature sets rarely repeat in a campaign: a cell never tried inherits
    its program group's streak, so a lowering that fails every DLRM in known
    ways (a different unsupported op from sample to sample) is skipped on new
    cells too (at least 1 in 4 still run, and never more than 7 skips in a
    row), while a group that passes every other sample runs every new cell."""
    scheduler = Scheduler(seed=5)
    samples = _distinct_samples()
    assert len({tuple(s.features()) for s in samples}) == 30
    tosa_runs, linalg_runs = [], []
    for i, sample in enumerate(samples):
        chosen = scheduler.choose(sample, TOSA + LINALG)
        names = {t.name for t in chosen}
        tosa_runs.append("iree-tosa" in names)
        linalg_runs.append(names >= {t.name for t in LINALG})
        buckets = {"iree-tosa": ("tosa-bug", "tosa-bug-2")[i % 2], **({t.name: "linalg-bug" for t in LINALG}
                                               if i % 2 else {})}
        scheduler.record(sample, chosen, {n: b for n, b in buckets.items() if n in names}, KNOWN)
    assert all(linalg_runs)  # pass, bug, pass, ...: never a streak
    assert 30 / 4 <= sum(tosa_runs) < 30 * 3 / 4, sum(tosa_runs)
    assert all(tosa_runs[:2])  # no streak yet
    assert "".join("x" if r else "." for r in tosa_runs).count("." * 8) == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="floor=0"):
        Scheduler(floor=0)
    with pytest.raises(ValueError, match="new_floor=2"):
        Scheduler(new_floor=2)
    with pytest.raises(ValueError, match="every=0"):
        Scheduler(every=0)


@pytest.mark.engine
def test_dispatch_puts_one_target_per_import_then_per_program_first() -> None:
    """Followers start after their leaders have filled the artifact cache:
    the first target of each shape mode (one export and import each), then
    the first of each output type (its backend pipeline), then the first of
    each compiled artifact (backend and flags), then the rest."""
    from fuzz.engine.campaign import dispatch_order
    from fuzz.targets.catalog import ROAD_TARGETS, TARGETS, available_targets, resolve_targets

    # The FX road's targets (the other roads: tests/test_roads.py).
    targets = resolve_targets([n for n in available_targets(TARGETS) if n not in ROAD_TARGETS])
    ordered = dispatch_order(targets)
    assert sorted(t.name for t in ordered) == sorted(t.name for t in targets)
    imports = {t.import_group for t in targets}
    programs = {t.program_group for t in targets}
    assert {t.import_group for t in ordered[:len(imports)]} == imports == {"static", "dynamic"}
    assert {t.program_group for t in ordered[:len(programs)]} == programs
    compiles = {t.compile_group for t in targets}
    assert {t.compile_group for t in ordered[:len(compiles)]} == compiles
    assert len(programs) < len(compiles) < len(ordered)
    names = [t.name for t in ordered]  # one vmfb: the local-sync driver runs it second
    assert names.index("iree-cpu-sync") >= len(compiles) > names.index("iree-cpu")


@pytest.mark.engine
def test_each_follower_waits_for_the_target_whose_cached_work_it_reuses_most() -> None:
    """The same artifact first (iree-cpu-sync runs iree-cpu's vmfb), else the
    same lowered program, else the same import (shape mode); each shape
    mode's first target waits for nothing."""
    from fuzz.engine.campaign import dispatch_order, leaders
    from fuzz.targets.catalog import ROAD_TARGETS, TARGETS, available_targets, resolve_targets

    ordered = dispatch_order(resolve_targets([n for n in available_targets(TARGETS)
                                              if n not in ROAD_TARGETS]))
    names = [t.name for t in ordered]
    follows = {name: None if lead is None else names[lead]
               for name, lead in zip(names, leaders(ordered))}
    assert follows["iree-cpu"] is None and follows["iree-cpu-dyn"] is None
    assert [n for n, lead in follows.items() if lead is None] == ["iree-cpu", "iree-cpu-dyn"]
    assert follows["iree-cpu-sync"] == "iree-cpu" and follows["iree-cpu-sync-dyn"] == "iree-cpu-dyn"
    assert follows["iree-torch-dyn"] == "iree-cpu-dyn"  # same export, another output type
    assert follows["iree-vmvx"] == "iree-cpu"  # same linalg program, another backend
    for name, lead in follows.items():
        assert lead is None or names.index(lead) < names.index(name)
    # The scheduler skipped linalg: the torch targets lead their shape modes.
    rest = dispatch_order([t for t in ordered
                           if getattr(t, "output_type", None) != "linalg-on-tensors"])
    assert [t.name for t, lead in zip(rest, leaders(rest)) if lead is None] == \
        ["iree-torch", "iree-torch-dyn"]


def _features_sample(**overrides: object) -> "Sample":
    from tests.helpers import tiny_config

    return tiny_sample(tiny_config(**overrides))


def test_a_feature_that_always_fails_a_group_the_same_known_way_holds_back_its_cells() -> None:
    """int32 indices always land in one known linalg bucket: after two such
    runs, feature sets with int32 run in linalg at most 1 time in 3 (but
    still regularly), while int64 samples of the same group always run."""
    scheduler = Scheduler(seed=5)
    ran = []
    for i in range(200):
        # Feature sets vary (36 of each index type), so most cells are new.
        int32 = i % 2 == 0
        sample = _features_sample(
            index_dtype="int32" if int32 else "int64", pooling=("sum", "mean", "max")[i % 3],
            dtype=("float32", "float16", "bfloat16")[(i // 3) % 3],
            arch_interaction_itself=bool((i // 9) % 2), ln_top=(14 if (i // 9) % 2 else 10, 1),
            padding_idx=None if (i // 18) % 2 else 0)
        chosen = scheduler.choose(sample, LINALG)
        scheduler.record(sample, chosen, {t.name: "int32-bug" for t in chosen} if int32 else {},
                         {"int32-bug"})
        ran.append((int32, bool(chosen)))
    assert all(run for int32, run in ran if not int32)  # the passing feature sets: every time
    int32_runs = [run for int32, run in ran if int32]
    assert all(int32_runs[:2]) and 100 / 8 <= sum(int32_runs) <= 100 / 3, sum(int32_runs)


def test_a_feature_that_once_passed_or_moved_is_never_held_back() -> None:
    """pooling=mean came along with the int32 bug twice, then passed once:
    it is not the culprit, and samples with it are always run again."""
    scheduler = Scheduler(seed=6)
    known = {"int32-bug", "other-bug"}
    for _ in range(2):
        sample = _features_sample(index_dtype="int32", pooling="mean")
        scheduler.record(sample, LINALG, {t.name: "int32-bug" for t in LINALG}, known)
    moved = _features_sample(index_dtype="int32", pooling="max")
    scheduler.record(moved, LINALG, {t.name: "int32-bug" for t in LINALG}, known)
    scheduler.record(moved, LINALG, {t.name: "other-bug" for t in LINALG}, known)
    passing = _features_sample(pooling="mean", dtype="bfloat16")  # (also ends the group's streak)
    scheduler.record(passing, LINALG, {}, known)
    group = LINALG[0].program_group
    assert not scheduler.features[(group, "pooling=mean")].doomed(scheduler.known)
    assert not scheduler.features[(group, "pooling=max")].doomed(scheduler.known)
    assert scheduler.features[(group, "index_dtype=int32")].runs == 4
    assert not scheduler.features[(group, "index_dtype=int32")].doomed(scheduler.known)
    for i in range(20):
        sample = _features_sample(pooling="mean", arch_interaction_itself=bool(i % 2),
                                  ln_top=(14 if i % 2 else 10, 1),
                                  dtype=("float32", "float16")[(i // 2) % 2])
        assert scheduler.choose(sample, LINALG) == LINALG


def test_groups_with_the_same_odds_are_skipped_together() -> None:
    """One draw per sample: two groups that always land in known buckets
    (TOSA and StableHLO) run at their own rate but are skipped on the same
    samples, so a shape mode's shared export and import is saved whenever
    both are skipped; a group that passes still runs every time."""
    stablehlo = [TARGETS["iree-stablehlo"]]
    scheduler = Scheduler(seed=7)
    runs = [_offer(scheduler, TOSA + stablehlo + LINALG,
                   {"iree-tosa": "tosa-bug", "iree-stablehlo": "tosa-bug-2"}) for _ in range(100)]
    held = [set(r) & {"iree-tosa", "iree-stablehlo"} for r in runs]
    assert all(len(h) in (0, 2) for h in held), held
    assert 100 / 8 <= sum(bool(h) for h in held) < 60
    assert all({t.name for t in LINALG} <= set(r) for r in runs)


def _int32_sample(seed: int = 7) -> Sample:
    """int32 indices and no other feature (no empty bags), so a repair of the
    doomed features is exactly ``index_dtype=int32``."""
    from fuzz.triage.edits import fill_empty_bags

    filled = fill_empty_bags(tiny_sample(_features_sample(index_dtype="int32").config, seed=seed))
    assert filled is not None and filled.features() == ["index_dtype=int32", "interaction=dot"]
    return filled


def test_a_doomed_feature_is_repaired_not_skipped() -> None:
    """int32 indices always land in one known linalg bucket: the int32
    original runs there at its fading rate, and every time it does not, the
    group gets the variant with int64 indices, which names the repair. No
    offer is thrown away: the group always gets one of the two."""
    scheduler = Scheduler(seed=8)
    known = {"int32-bug"}
    for _ in range(2):
        sample = _int32_sample()
        scheduler.record(sample, LINALG, {t.name: "int32-bug" for t in LINALG}, known)
    originals = repaired = 0
    for _ in range(100):
        sample = _int32_sample()
        plan = scheduler.plan(sample, LINALG)
        assert len(plan) == 1 and [t.name for t in plan[0].targets] == [t.name for t in LINALG]
        (part,) = plan
        if part.sample is sample:
            originals += 1
            assert part.repairs == ()
        else:
            repaired += 1
            assert part.repairs == ("index_dtype=int32",)
            assert isinstance(part.sample, Sample) and part.sample.config.index_dtype == "int64"
            assert "index_dtype=int32" not in part.sample.features()
            assert part.sample.batches[0].indices[0].dtype.name == "int64"
        # what the variant and the original do there: pass, and the known bug
        scheduler.record(part.sample, part.targets, {} if part.repairs else
                         {t.name: "int32-bug" for t in LINALG}, known)
    assert originals + repaired == 100 and 100 / 8 <= originals <= 100 / 3, originals


def test_a_sample_is_never_thrown_away_whole() -> None:
    """TOSA fails every sample the same known way and nothing about it can be
    repaired (the default dot interaction): its cell fades, but a sample
    offered to TOSA alone still goes there; next to a group that passes, the
    passing group takes it and TOSA is skipped."""
    from fuzz.triage.edits import fill_empty_bags

    plain = fill_empty_bags(tiny_sample())
    assert plain is not None and plain.features() == ["interaction=dot"]
    scheduler = Scheduler(seed=9)
    for _ in range(50):
        plan = scheduler.plan(plain, TOSA)
        assert [(p.sample, [t.name for t in p.targets]) for p in plan] == [(plain, ["iree-tosa"])]
        scheduler.record(plain, TOSA, {"iree-tosa": "tosa-bug"}, KNOWN)
    skipped = 0
    for _ in range(50):
        plan = scheduler.plan(plain, TOSA + LINALG)
        names = {t.name for part in plan for t in part.targets}
        assert {t.name for t in LINALG} <= names
        skipped += "iree-tosa" not in names
        for part in plan:
            scheduler.record(part.sample, part.targets, {"iree-tosa": "tosa-bug"}, KNOWN)
    assert skipped > 25


@pytest.mark.engine
def test_a_wrong_answer_behind_a_doomed_feature_is_found_on_the_repaired_variant(
        tmp_path: Path) -> None:
    """A target that refuses int32 indices and, past that, answers relu
    wrong: once int32 is doomed there, an int32 sample reaches compile and run
    as its int64 variant, the wrong answer is filed as a MISMATCH whose case
    is the variant and names the repair, and REPORT-facing text says so."""
    from fuzz.engine.campaign import Campaign, CampaignOptions
    from fuzz.store.corpus import load_entry
    from oracles.verdict import Verdict

    campaign = Campaign(CampaignOptions(targets=("fake-int32-then-wrong-relu",),
                                        corpus_dir=tmp_path / "corpus", workers=1, shrink=False,
                                        report=False, schedule=True))
    with campaign.session.open_pool() as pool:
        campaign.session.attach(pool)
        for seed in (1, 2):  # the known bug, twice: int32 is doomed there now
            (found,) = file_as_generated(campaign, _int32_sample(seed))
            assert found.verdict is Verdict.COMPILE_ERROR
        mismatches = []
        for seed in range(3, 13):
            campaign.generate.dispatch(_int32_sample(seed))
            while campaign.session.waiting:
                campaign.generate.drain()
            mismatches = [f for f in campaign.report.findings if f.verdict is Verdict.MISMATCH]
            if mismatches:
                break
    assert campaign.report.repaired >= 1 and campaign.report.unscheduled == 0
    (finding,) = mismatches
    entry = load_entry(finding.path)
    assert entry.repairs == ("index_dtype=int32",)
    assert entry.sample.config.index_dtype == "int64"
    assert entry.culprit is not None and "relu" in entry.culprit

"""The other roads into IREE (README "Roads into IREE"): iree-turbine, ONNX into
IREE and into torch-mlir alone, onnxruntime on the same file, and the
loop-free bag variant that lets the ONNX road past its ``onnx.Loop`` blocker.

Unit tests check the table, the owners and the loop-free bag against
``F.embedding_bag`` eagerly; two pipeline tests run the real roads on one
small DLRM (a shared artifact cache: one export per shape mode and form)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fuzz.targets.catalog import (BY_NAME_ONLY, DEFAULT_ROAD_CANDIDATES, ROAD_TARGETS, TARGETS,
                                  resolve_targets)
from oracles import Verdict, judge

STATIC_ROADS = ("turbine-iree-cpu", "onnx-iree-cpu", "onnx-iree-vmvx", "onnx-iree-vulkan",
                "onnx-refbackend", "onnxruntime")


def test_every_road_in_the_table_static_dynamic_and_loop_free() -> None:
    for name in STATIC_ROADS:
        forms = [name, f"{name}-dyn"]
        if name.startswith("onnx"):
            forms += [f"{name}-loopfree", f"{name}-loopfree-dyn"]
        for form in forms:
            assert form in TARGETS and form in ROAD_TARGETS
            assert "road " in TARGETS[form].description
            assert TARGETS[form].any_shape is form.endswith("-dyn")
        if name.startswith("onnx"):
            assert "loop-free" in TARGETS[f"{name}-loopfree"].description


def test_owners_of_each_road() -> None:
    cpu, ort, ref, turbine = resolve_targets(["onnx-iree-cpu-loopfree", "onnxruntime",
                                              "onnx-refbackend", "turbine-iree-cpu"])
    # An export failure is the exporter's whichever bag form it exported (the
    # variant's quantized bags are the plain form's: one bucket); a wrong answer
    # names the variant (upstream), never the model as written.
    assert [cpu.owner(s) for s in ("export", "import", "compile", "run")] == \
        ["torch.onnx", "torch-mlir:onnx", "iree:llvm-cpu", "iree:llvm-cpu"]
    assert cpu.upstream == "torch.onnx[loop-free]"
    assert ref.owner("export") == "torch.onnx"
    assert cpu.lowering_owner == ref.lowering_owner == "torch-mlir:onnx"
    assert ref.owner("run") == "torch-mlir:refbackend"
    assert [ort.owner(s) for s in ("export", "compile", "run")] == \
        ["torch.onnx", "onnxruntime", "onnxruntime"]
    assert ort.lowering_owner == "torch.onnx"
    # A file onnxruntime refuses as breaking the ONNX spec is the exporter's.
    from fuzz.targets.onnx_runtime import invalid_model
    assert invalid_model("[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. "
                         "Type Error: Type 'tensor(int32)' of input parameter (val_39) of "
                         "operator (GatherND) in node (node_GatherND_41) is invalid.")
    assert not invalid_model("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code")
    # turbine's compile errors are iree-torch's (one bucket): same backend owner.
    assert [turbine.owner(s) for s in ("export", "import")] == ["torch.export", "iree-turbine"]
    assert turbine.owner("compile") == TARGETS["iree-torch"].owner("compile")
    assert turbine.lowering_owner == TARGETS["iree-torch"].lowering_owner


def test_onnx_targets_share_one_export_per_shape_mode_and_form() -> None:
    group = {TARGETS[n].import_group for n in ("onnx-iree-cpu", "onnx-iree-vmvx",
                                               "onnx-refbackend", "onnxruntime")}
    assert len(group) == 1
    assert TARGETS["onnx-iree-cpu"].import_group != TARGETS["onnx-iree-cpu-loopfree"].import_group
    assert TARGETS["onnx-iree-cpu"].import_group != TARGETS["onnx-iree-cpu-dyn"].import_group
    # IREE's backends share one imported program, and one vmfb per backend.
    assert TARGETS["onnx-iree-cpu"].program_group == TARGETS["onnx-iree-vmvx"].program_group
    assert TARGETS["onnx-iree-cpu"].compile_group != TARGETS["onnx-iree-vmvx"].compile_group


def test_road_targets_run_by_name_or_by_their_group() -> None:
    """The default campaign runs three road targets (under their share of
    the time: ``fuzz.engine.roadshare``), not the plain ONNX target that stops
    at the bag's Loop on every sample; every road target can be named, and
    ``roads`` names the four that cover one road and owner each."""
    default = set(TARGETS) - BY_NAME_ONLY  # available_targets then drops what cannot run here
    assert default & ROAD_TARGETS == {"turbine-iree-cpu", "onnxruntime-loopfree-dyn",
                                      "onnx-iree-cpu-loopfree-dyn"}
    assert DEFAULT_ROAD_CANDIDATES <= ROAD_TARGETS and len(DEFAULT_ROAD_CANDIDATES) == 4
    assert resolve_targets(sorted(BY_NAME_ONLY))
    from fuzz.targets.catalog import FAKE_TARGETS, expand_groups

    # A table of fakes: asking real targets whether they run here probes devices.
    table = {name: FAKE_TARGETS[name] for name in ("fake-ok", "fake-raise")}
    assert expand_groups(["default", "roads", "fake-ok"], table) == \
        ["fake-ok", "fake-raise", *sorted(DEFAULT_ROAD_CANDIDATES)]
    assert expand_groups(["refbackend", "roads"], TARGETS)[0] == "refbackend"


def test_onnx_compile_failure_of_an_unconverted_op_is_the_import() -> None:
    from fuzz.targets.onnx_iree import unconverted_onnx_op

    line = ("error: failed to legalize operation 'torch.operator' that was explicitly marked "
            "illegal: %74:2 = \"torch.operator\"(%34) <{name = \"onnx.Loop\"}> ({...})")
    assert unconverted_onnx_op(line)
    assert not unconverted_onnx_op("error: failed to legalize operation 'arith.select'")


def test_onnxruntime_does_not_run_bfloat16() -> None:
    from fuzz.targets.onnx_runtime import unsupported_reason
    from tests.helpers import tiny_config

    assert unsupported_reason(tiny_config()) is None
    assert "bfloat16" in str(unsupported_reason(tiny_config(dtype="bfloat16")))


# -- the loop-free bag ---------------------------------------------------------

_BAG_CASES = [
    # (offsets, indices, weights?, include_last_offset, padding_idx, mode)
    ([0, 0, 2, 2], [1, 1, 3, 0, 0], False, False, None, "sum"),    # empty bags, duplicates
    ([0, 2, 2], [4, 4, 1, 2], True, False, None, "sum"),           # per-sample weights
    ([0, 1, 1, 4], [2, 3, 3, 0], False, True, None, "sum"),        # B+1 offsets, an empty bag
    ([0, 2, 6], [1, 0, 1, 1, 2, 3], True, True, None, "sum"),      # B+1, weighted
    ([0, 3, 3], [1, 1, 2, 1], False, False, 1, "sum"),             # padding row skipped
    ([0, 3, 3], [1, 1, 2, 1], False, False, 1, "mean"),            # mean skips padding too
    ([0, 0, 3], [0, 2, 4], False, False, None, "mean"),            # mean of an empty bag: 0
    ([0], [], False, False, None, "sum"),                          # no indices at all
]


def test_loop_free_bag_of_fixed_length_bags() -> None:
    """2-D indices (input_layout='fixed'): each row one bag."""
    import torch
    import torch.nn.functional as F

    from fuzz.targets.bags import pool

    weight = torch.from_numpy(np.random.default_rng(2).standard_normal((6, 2)))
    idx = torch.tensor([[0, 5, 5], [1, 2, 0]])
    for mode in ("sum", "mean"):
        np.testing.assert_allclose(pool(idx, weight, None, mode=mode).numpy(),
                                   F.embedding_bag(idx, weight, None, mode=mode).numpy(),
                                   rtol=1e-12)


@pytest.mark.parametrize("offsets, indices, weighted, last, padding, mode", _BAG_CASES)
def test_loop_free_bag_equals_embedding_bag(offsets: list[int], indices: list[int],
                                            weighted: bool, last: bool, padding: int | None,
                                            mode: str) -> None:
    import torch
    import torch.nn.functional as F

    from fuzz.targets.bags import pool

    rng = np.random.default_rng(0)
    weight = torch.from_numpy(rng.standard_normal((5, 3)))
    idx, off = torch.tensor(indices, dtype=torch.int64), torch.tensor(offsets, dtype=torch.int64)
    psw = torch.from_numpy(rng.standard_normal(len(indices))) if weighted else None
    want = F.embedding_bag(idx, weight, off, mode=mode, per_sample_weights=psw,
                           include_last_offset=last, padding_idx=padding)
    got = pool(idx, weight, off, mode=mode, per_sample_weights=psw,
               include_last_offset=last, padding_idx=padding)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_loop_free_model_equals_the_model_and_max_keeps_the_bag() -> None:
    """The whole DLRM in the loop-free form answers as the model does, on a
    sample with an empty bag, weighted pooling and 2-D fixed-length bags."""
    import torch

    from fuzz.model.dlrm import build, to_torch
    from fuzz.model.sample import Batch
    from fuzz.targets import bags
    from tests.helpers import tiny_config, tiny_sample

    for config in (tiny_config(), tiny_config(per_sample_weights=True, include_last_offset=True),
                   tiny_config(weighted_pooling="fixed"),
                   tiny_config(qr_flag=True, qr_threshold=15, qr_collisions=4)):
        batch = tiny_sample(tiny_config()).batches[0]  # table 0 has an empty bag
        rng = np.random.default_rng(1)
        batch = Batch.for_config(config, batch.dense, batch.offsets, batch.indices, tuple(
            rng.standard_normal(len(i)).astype(np.float32) for i in batch.indices))
        args = to_torch(batch.flat(), config)
        with torch.inference_mode():
            want = build(config, 3)(*args)
            got = bags.loop_free(build(config, 3))(*args)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert bags.supported(tiny_config())[0]
    ok, why = bags.supported(tiny_config(pooling="max"))
    assert not ok and "max" in why


def test_an_exported_graphs_bags_take_the_loop_free_form_too() -> None:
    """Localization re-exports the model's ATen graph (intermediates exposed)
    by the target's road: on a loop-free target its bag nodes must take the
    variant's form, as the target's program did, or the ONNX file holds the
    Loop the target never compiled (localization then always failed on it)."""
    import onnx
    import torch

    from fuzz.model.recipe import recipe
    from fuzz.targets import bags
    from fuzz.targets.onnx_export import export_module
    from tests.helpers import tiny_config, tiny_sample

    for config in (tiny_config(pooling="mean"),
                   tiny_config(padding_idx=0, weighted_pooling="fixed")):
        sample = tiny_sample(config)
        module, args, spec = recipe(config, sample.seed, True, sample.batches[0].flat(),
                                    lambda name, fn: fn())
        exported = torch.export.export(module, args, dynamic_shapes=spec)
        with torch.inference_mode():
            want = exported.module()(*args)
            got = bags.loop_free(exported.module())(*args)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        model = onnx.load_from_string(export_module(exported.module(), args, spec, bags.LOOP_FREE))
        assert "Loop" not in {node.op_type for node in model.graph.node}, config


# -- the real roads --------------------------------------------------------------

def _judged(names: list[str], cache_dir: Path) -> dict[str, tuple[object, object]]:
    from fuzz.targets.cache import ArtifactCache
    from fuzz.workers.execute import execute
    from tests.helpers import varied_sample

    sample = varied_sample()
    cache = ArtifactCache(cache_dir)
    reference, eager = (execute(TARGETS[n], sample) for n in ("eager-f64", "eager"))
    out = {}
    for name in names:
        result = execute(TARGETS[name], sample, cache=cache)
        out[name] = (judge(result, reference, eager), result)
    return out


@pytest.mark.pipeline
def test_loop_free_onnx_road_turbine_and_onnxruntime_match_eager(tmp_path: Path) -> None:
    judged = _judged(["onnxruntime-loopfree-dyn", "onnx-iree-cpu-loopfree-dyn",
                      "turbine-iree-cpu-dyn"], tmp_path)
    for name, (outcome, result) in judged.items():
        assert outcome.verdict is Verdict.PASS, (name, outcome)  # type: ignore[attr-defined]
        assert all(o is not None for o in result.outputs), name  # type: ignore[attr-defined]


@pytest.mark.pipeline
def test_onnx_loop_blocks_iree_and_torch_mlir_alike_as_one_key(tmp_path: Path) -> None:
    """The plain ONNX export's bag is an onnx.Loop: iree-compile and torch-mlir's
    own importer fail on it with one key (owner torch-mlir:onnx), while
    onnxruntime runs the same file right."""
    from fuzz.triage.findings import stage_owner
    from oracles.signature import error_key

    judged = _judged(["onnxruntime", "onnx-iree-cpu", "onnx-refbackend"], tmp_path)
    assert judged["onnxruntime"][0].verdict is Verdict.PASS  # type: ignore[attr-defined]
    keys = set()
    for name in ("onnx-iree-cpu", "onnx-refbackend"):
        outcome, result = judged[name]
        assert outcome.verdict is Verdict.LOWERING_UNSUPPORTED_OP, outcome  # type: ignore[attr-defined]
        assert outcome.op == "onnx.Loop"  # type: ignore[attr-defined]
        owner = stage_owner(TARGETS[name], result, outcome)  # type: ignore[arg-type]
        keys.add(error_key(outcome.verdict, owner, outcome.op, outcome.error))  # type: ignore[attr-defined]
    assert len(keys) == 1 and "torch-mlir:onnx" in keys.pop()


# -- blame across roads (fakes: observations as the engine makes them) ----------

def _observed(name: str, verdict: Verdict = Verdict.MISMATCH, cluster: int = 0,
              error: str = "off", stage: str = "run", culprit: str = "op:aten.mm.default",
              result: object = None) -> object:
    """An observation of ``name`` from the table: its owner, lowering and upstream."""
    from oracles import Observation, Outcome, Stage

    target = TARGETS[name]
    outcome = Outcome(name, verdict, Stage(stage), error)
    owner = target.owner(stage)
    if result is not None and getattr(result, "owner", None):
        owner = result.owner  # type: ignore[attr-defined]
    return Observation(outcome, owner, target.lowering_owner,
                       culprit if verdict is Verdict.MISMATCH else None, cluster,
                       getattr(target, "upstream", None))


def _owners(*observed: object) -> dict[str, str]:
    from oracles import blame

    return {b.target: b.owner for b in blame(list(observed))}  # type: ignore[arg-type]


def test_blame_onnxruntime_and_onnx_targets_wrong_alike_is_the_exporter() -> None:
    owners = _owners(_observed("onnxruntime"), _observed("onnx-refbackend"),
                     _observed("onnx-iree-cpu-dyn"))
    assert set(owners.values()) == {"torch.onnx"}
    # The loop-free variant names itself, never the exporter of the model as written.
    owners = _owners(_observed("onnxruntime-loopfree"), _observed("onnx-iree-cpu-loopfree"))
    assert set(owners.values()) == {"torch.onnx[loop-free]"}


def test_blame_onnx_targets_wrong_alike_onnxruntime_right_is_torch_mlir_onnx() -> None:
    owners = _owners(_observed("onnx-refbackend-loopfree"), _observed("onnx-iree-cpu-loopfree"),
                     _observed("iree-cpu", cluster=1))  # the FX road: other numbers
    assert owners["onnx-refbackend-loopfree"] == owners["onnx-iree-cpu-loopfree"] == \
        "torch-mlir:onnx"
    assert owners["iree-cpu"] == "iree:llvm-cpu"


def test_blame_wrong_on_one_road_target_is_its_backend_or_onnxruntime() -> None:
    assert _owners(_observed("onnx-iree-vmvx-loopfree")) == \
        {"onnx-iree-vmvx-loopfree": "iree:vmvx"}
    assert _owners(_observed("onnxruntime")) == {"onnxruntime": "onnxruntime"}
    # Different wrong numbers: two bugs, no exporter.
    owners = _owners(_observed("onnxruntime"), _observed("onnx-iree-cpu-loopfree", cluster=1))
    assert owners == {"onnxruntime": "onnxruntime", "onnx-iree-cpu-loopfree": "iree:llvm-cpu"}


def test_blame_wrong_only_on_turbine_is_turbines_with_iree_torch_the_backends() -> None:
    assert set(_owners(_observed("turbine-iree-cpu"), _observed("turbine-iree-cpu-dyn")).values()) \
        == {"iree-turbine"}
    # iree-torch computes the same wrong numbers: the shared torch-input backend.
    owners = _owners(_observed("turbine-iree-cpu"), _observed("iree-torch"))
    assert set(owners.values()) == {"iree:llvm-cpu(torch input)"}


def test_blame_turbine_compile_error_joins_iree_torchs_bucket() -> None:
    from oracles import blame

    line = "error: failed to legalize operation 'arith.foo'"
    blamed = blame([_observed("turbine-iree-cpu", Verdict.COMPILE_ERROR, error=line,
                              stage="compile"),
                    _observed("iree-torch", Verdict.COMPILE_ERROR, error=line,
                              stage="compile")])  # type: ignore[list-item]
    assert blamed[0].bucket == blamed[1].bucket
    alone = blame([_observed("turbine-iree-cpu", Verdict.COMPILE_ERROR, error=line,
                             stage="compile")])  # type: ignore[list-item]
    assert alone[0].bucket == blamed[0].bucket  # whichever ran beside it


def test_blame_the_onnx_loop_blocker_is_one_bucket_on_every_onnx_target() -> None:
    """The Loop failure, as iree-compile (moved to the import, owner
    torch-mlir:onnx) and torch-mlir's importer report it: one bucket, whatever
    subset of the ONNX targets ran."""
    from oracles import blame
    from oracles.results import Failure, Stage

    line = ("error: failed to legalize operation 'torch.operator' that was explicitly marked "
            "illegal: %74:2 = \"torch.operator\"(%34) <{name = \"onnx.Loop\"}> ({...})")
    moved = Failure(Stage.IMPORT, "CompilerToolError", line, owner="torch-mlir:onnx")
    every = [_observed(n, Verdict.LOWERING_UNSUPPORTED_OP, error=line, stage="import",
                       result=moved)
             for n in ("onnx-iree-cpu", "onnx-iree-vmvx", "onnx-iree-vulkan-dyn", "onnx-refbackend")]
    buckets = {b.bucket for b in blame(every)}  # type: ignore[arg-type]
    assert len(buckets) == 1
    for one in every:
        assert {b.bucket for b in blame([one])} == buckets  # type: ignore[list-item]
    assert {b.owner for b in blame(every)} == {"torch-mlir:onnx"}  # type: ignore[arg-type]


def test_findings_cluster_onnxruntime_with_the_onnx_targets() -> None:
    """Triage puts onnxruntime and an ONNX target with the same wrong numbers in
    one cluster (different lowerings, one exporter's file), not the FX road."""
    from fuzz.triage.findings import Triage
    from oracles import Outcome, Stage, TargetResult

    wrong = [np.array([[0.5]], np.float32)]
    names = ["onnxruntime", "onnx-iree-cpu", "iree-cpu"]
    results = {n: TargetResult(n, list(wrong)) for n in names}
    outcomes = {n: Outcome(n, Verdict.MISMATCH, Stage.RUN, "off") for n in names}
    clusters = Triage._clusters(None, names, {n: TARGETS[n] for n in names},  # type: ignore[arg-type]
                                results, outcomes)
    assert clusters["onnxruntime"] == clusters["onnx-iree-cpu"] != clusters["iree-cpu"]


# -- the road repro form -----------------------------------------------------------

LOOP = ("LOWERING_UNSUPPORTED_OP|torch-mlir:onnx|onnx.Loop|error: failed to legalize operation "
        "'torch.operator' that was explicitly marked illegal: name = \"onnx.Loop\"")


def _loop_entry(target: str = "onnx-iree-cpu") -> object:
    from fuzz.store.corpus import CorpusEntry
    from oracles.results import Stage
    from tests.helpers import tiny_sample

    return CorpusEntry(bucket="lowering_unsupported_op-test", signature=LOOP,
                       verdict=Verdict.LOWERING_UNSUPPORTED_OP, owner="torch-mlir:onnx",
                       target=target, sample=tiny_sample(), stage=Stage.IMPORT,
                       seen_on=("onnx-iree-cpu", "onnx-refbackend"), op="onnx.Loop")


def test_road_cases_take_the_road_form_on_their_own_road() -> None:
    from fuzz.reports.repro.road import road_of, road_target

    assert road_target(_loop_entry()) is TARGETS["onnx-iree-cpu"]  # type: ignore[arg-type]
    # torch-mlir's own ONNX road is reproduced where an ONNX user runs: IREE.
    assert road_target(_loop_entry("onnx-refbackend-dyn")) is TARGETS["onnx-iree-cpu-dyn"]  # type: ignore[arg-type]
    assert road_target(_loop_entry("iree-cpu")) is None  # type: ignore[arg-type]
    assert [road_of(TARGETS[n]) for n in ("onnxruntime", "turbine-iree-cpu", "onnx-iree-vulkan",
                                          "iree-torch")] == ["onnxruntime", "turbine", "onnx_iree",
                                                             None]


@pytest.mark.pipeline
@pytest.mark.parametrize("target, mismatch", [("onnxruntime-loopfree-dyn", True),
                                              ("turbine-iree-cpu", True),
                                              # ~33 s on lavapipe: the slow tier
                                              pytest.param("onnx-iree-vulkan-loopfree", False,
                                                           marks=pytest.mark.slow)])
def test_the_road_form_fills_for_each_road(tmp_path: Path, target: str, mismatch: bool) -> None:
    from fuzz.reports.repro import write_repro
    from fuzz.reports.repro.template import MARKERS
    from fuzz.store.corpus import CorpusEntry
    from oracles.results import Stage
    from tests.helpers import tiny_sample

    signature = "MISMATCH|onnxruntime|features:weighted_pooling" if mismatch else \
        "RUNTIME_ERROR|iree:vulkan-spirv|Error invoking function: <src>: INVALID_ARGUMENT"
    entry = CorpusEntry(bucket="x-test", signature=signature, verdict=Verdict(signature.split("|")[0]),
                        owner=signature.split("|")[1], target=target, sample=tiny_sample(),
                        stage=Stage.RUN, seen_on=(target,))
    repro = write_repro(tmp_path, entry, check=False)
    source = (tmp_path / "repro.py").read_text()
    assert repro.kind == "road" and MARKERS.search(source) is None
    compile(source, "repro.py", "exec")
    from tests.test_repro import imported_modules

    imported = imported_modules(tmp_path / "repro.py")
    assert not any(name.startswith("torch_mlir") for name in imported), imported
    road = {"onnxruntime": "onnxruntime", "turbine": "iree.turbine",
            "onnx-iree": "iree.compiler.tools.import_onnx.__main__"}
    assert road[next(k for k in road if target.startswith(k))] in imported, imported


# -- one export or lowering bug, one bucket on every road --------------------------

def test_the_exporters_own_failure_is_keyed_by_its_exception_not_its_advice() -> None:
    """torch.onnx's error text opens with the step and advice every failure of
    that step shares; the key must come from the exception it summarizes."""
    from fuzz.targets.onnx_export import exception_summary

    text = ("Failed to convert the exported program to an ONNX model. \x1b[96mThis is step "
            "3/3\x1b[0m of exporting the model to ONNX. Next steps:\n- If there is a missing "
            "ONNX function, implement it and register it.\n\n## Exception summary\n\n<class "
            "'DispatchError'>: No ONNX function found for <OpOverload(op='quantized.x')>\n\n"
            "(Refer to the full stack trace above for more information.)")
    assert exception_summary(text) == ("<class 'DispatchError'>: No ONNX function found for "
                                       "<OpOverload(op='quantized.x')>")
    assert exception_summary("plain text") == "plain text"


def _keys(names: list[str], sample: object, cache_dir: Path) -> dict[str, str]:
    """Each target's failure key on ``sample``, with the owner blame would give it."""
    from fuzz.targets.cache import ArtifactCache
    from fuzz.triage.findings import stage_owner
    from fuzz.workers.execute import execute
    from oracles.signature import error_key

    cache = ArtifactCache(cache_dir)
    reference, eager = (execute(TARGETS[n], sample) for n in ("eager-f64", "eager"))  # type: ignore[arg-type]
    keys = {}
    for name in names:
        result = execute(TARGETS[name], sample, cache=cache)  # type: ignore[arg-type]
        outcome = judge(result, reference, eager)
        owner = stage_owner(TARGETS[name], result, outcome)
        keys[name] = error_key(outcome.verdict, owner, outcome.op, outcome.error)
    return keys


@pytest.mark.pipeline
def test_a_torch_export_failure_is_one_key_on_the_fx_turbine_and_onnx_roads(
        tmp_path: Path) -> None:
    """A qint8 MLP fails torch.export: the FX road's non-strict call, turbine's
    strict one and the ONNX exporter's first step are one bug, owned by torch.export."""
    from tests.helpers import tiny_config, tiny_sample

    sample = tiny_sample(tiny_config(quantize_mlp="qint8"))
    keys = _keys(["iree-cpu-dyn", "turbine-iree-cpu", "onnx-iree-cpu",
                  "onnx-iree-cpu-loopfree-dyn"], sample, tmp_path)
    assert len(set(keys.values())) == 1, keys
    assert keys["iree-cpu-dyn"].startswith("EXPORT_ERROR|torch.export|"), keys


@pytest.mark.pipeline
def test_an_op_without_a_torch_mlir_lowering_is_one_key_on_the_fx_and_turbine_roads(
        tmp_path: Path) -> None:
    """4-bit quantized bags reach IREE on turbine's road (its import does not
    check torch-mlir's backend contract) and stop in torch-mlir's own lowering on
    the FX road: the missing lowering is one key, torch-mlir's."""
    from tests.helpers import tiny_config, tiny_sample

    sample = tiny_sample(tiny_config(quantize_bits=4))
    keys = _keys(["iree-torch", "turbine-iree-cpu"], sample, tmp_path)
    assert len(set(keys.values())) == 1, keys
    assert keys["iree-torch"].startswith("LOWERING_UNSUPPORTED_OP|torch-mlir"), keys


@pytest.mark.pipeline
def test_a_hang_on_a_road_is_reproduced_by_a_supervised_child(tmp_path: Path) -> None:
    """A TIMEOUT on turbine's road: the road form runs its stages in a child of
    itself (a process cannot report its own hang) and exits 1 when the child is
    still busy after the fuzzer's limit, here less than the stages take."""
    from fuzz.reports.repro import write_repro
    from oracles.results import Stage
    from tests.helpers import tiny_config, tiny_sample
    from tests.test_repro import make_entry

    signature = "TIMEOUT|iree:llvm-cpu(torch input)|no answer within Ns (stage compile); worker killed"
    entry = make_entry(tiny_sample(tiny_config()), signature, "turbine-iree-cpu",
                       ("turbine-iree-cpu",), stage=Stage.COMPILE,
                       error="no answer within 0.5s (stage compile); worker killed")
    repro = write_repro(tmp_path, entry, timeout_s=300)
    assert repro.kind == "road" and "HANG = 0.5" in (tmp_path / "repro.py").read_text()
    assert repro.exit_code == 1 and "compile hung: no answer within 0.5 s" in repro.output, repro


@pytest.mark.pipeline
def test_a_file_onnxruntime_finds_invalid_is_the_exporters_export_error(tmp_path: Path) -> None:
    """With int32 indices the exporter writes the loop-free bag's gather as a
    GatherND on int32 indices, which the ONNX spec does not allow: onnxruntime
    refuses the file, and the fault is filed as the exporter's."""
    from tests.helpers import tiny_config, tiny_sample

    sample = tiny_sample(tiny_config(index_dtype="int32"))
    (key,) = _keys(["onnxruntime-loopfree-dyn"], sample, tmp_path).values()
    assert key.startswith("EXPORT_ERROR|torch.onnx|") and "GatherND" in key, key


@pytest.mark.pipeline
@pytest.mark.slow
def test_localization_takes_the_loop_free_road_on_a_loop_free_target() -> None:
    """The instrumented program compiles and runs by the loop-free ONNX road
    (it failed on the onnx.Loop before): a healthy sample is "nothing to
    localize", judged on every intermediate."""
    from fuzz.triage.localize import OWN_PROGRAM_MATCHES, first_divergent_op
    from tests.helpers import tiny_config, tiny_sample

    found = first_divergent_op(TARGETS["onnx-iree-cpu-loopfree"],
                               tiny_sample(tiny_config(sigmoid_top=0)), 0)
    assert found.note == OWN_PROGRAM_MATCHES, found
    assert found.details["intermediates"] > 0


# -- the roads' share of a campaign ------------------------------------------

def _share(share: float, names: list[str]) -> tuple[object, list[object]]:
    from fuzz.engine.records import CampaignReport
    from fuzz.engine.roadshare import RoadShare

    targets = [TARGETS[name] for name in names]
    report = CampaignReport()
    return RoadShare(report, share, targets), targets  # type: ignore[arg-type]


def test_road_targets_get_a_sample_only_while_under_their_share() -> None:
    """The roads run while their stage seconds are at most the share of all
    targets' seconds; over it, a sample goes to the other targets only (and is
    counted); once the others have caught up, the roads get one again."""
    roads, targets = _share(0.25, ["iree-cpu", "refbackend", "turbine-iree-cpu",
                                   "onnxruntime-loopfree-dyn"])
    report = roads.report  # type: ignore[attr-defined]
    assert roads.targets_for(targets) == targets  # type: ignore[attr-defined]
    report.target_seconds.update({"iree-cpu": 1.0, "refbackend": 1.0, "turbine-iree-cpu": 2.0,
                                  "onnxruntime-loopfree-dyn": 2.0})  # roads: 4 of 6 s
    assert [t.name for t in roads.targets_for(targets)] == ["iree-cpu", "refbackend"]  # type: ignore
    assert report.road_samples_left_out == 1
    report.target_seconds["iree-cpu"] = 11.0  # roads: 4 of 16 s, a quarter
    assert roads.targets_for(targets) == targets  # type: ignore[attr-defined]
    assert report.road_samples == {"turbine-iree-cpu": 2, "onnxruntime-loopfree-dyn": 2}
    assert report.summary()["roads"]["left_out"] == 1  # type: ignore[index]


def test_roads_alone_or_share_one_run_every_sample() -> None:
    import pytest

    alone, targets = _share(0.1, ["turbine-iree-cpu", "onnxruntime-loopfree-dyn"])
    alone.report.target_seconds.update({"turbine-iree-cpu": 9.0})  # type: ignore[attr-defined]
    assert alone.targets_for(targets) == targets  # type: ignore[attr-defined]
    everything, targets = _share(1.0, ["iree-cpu", "turbine-iree-cpu"])
    everything.report.target_seconds.update({"turbine-iree-cpu": 9.0})  # type: ignore
    assert everything.targets_for(targets) == targets  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="road_share=0"):
        _share(0.0, ["iree-cpu"])

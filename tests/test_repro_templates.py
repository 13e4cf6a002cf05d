"""The repro templates (``fuzz/reports/repro/templates/``): each is Python that
parses and type-checks as it stands, each form fills to a script that
compiles with no marker left, and a slot the writer forgets is our bug, not
a broken script. Unit tier: no compiler runs (the forms are written
unchecked; the one-op failure forms are filled from a hand-made op)."""

from __future__ import annotations

import ast
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from fuzz.reports.repro import write_repro
from fuzz.reports.repro.graph import _op_failure_script, _OpModule
from fuzz.reports.repro.template import MARKERS, TEMPLATES, fill
from fuzz.targets.catalog import TARGETS, CompiledTarget
from oracles.results import Stage
from tests.helpers import tiny_sample
from tests.test_repro import (INT32, VULKAN_EMPTY, WEIGHTED, empty_table_sample, int32_entry, make_entry,
                              one_table, weighted_entry)

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "fuzz" / "reports" / "repro" / TEMPLATES
FORMS = ("single_op", "op_failure", "model", "road", "road_op")
PARTS = ("prelude", "attempt", "vulkan_host", "model_program", "judge", "ending", "iree_load",
         "supervised", "road_stages", "vulkan_device")


def test_the_templates_are_the_forms_and_their_parts() -> None:
    assert sorted(p.stem for p in FOLDER.glob("*.py")) == sorted(FORMS + PARTS)
    assert not (FOLDER / "__init__.py").exists()  # data, never imported: a template runs as a script


@pytest.mark.parametrize("name", FORMS + PARTS)
def test_a_template_parses_and_compiles_as_it_stands(name: str) -> None:
    source = (FOLDER / f"{name}.py").read_text()
    ast.parse(source)
    compile(source, f"{name}.py", "exec")


def _mypy(package: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "-p", package], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.engine  # runs mypy in a subprocess
def test_the_templates_type_check(tmp_path: Path) -> None:
    """mypy reads the templates as the package's own code (pyproject's
    ``packages = ["fuzz", ...]`` takes them in as a namespace package), and
    sees a type error in one, even in the model form's last stage (shown on a
    copy: mypy reads no further than an exit, so a template keeps its exits last)."""
    done = _mypy("fuzz.reports.repro.templates", ROOT)
    assert done.returncode == 0 and "no issues found" in done.stdout, done.stdout + done.stderr
    copy = tmp_path / "copied" / TEMPLATES
    copy.mkdir(parents=True)
    (copy.parent / "__init__.py").write_text("")
    for path in FOLDER.glob("*.py"):
        (copy / path.name).write_text(path.read_text())
    judged = "    bad += judged(b, got, inputs)\n"
    model = (copy / "model.py").read_text()
    assert model.count(judged) == 1
    (copy / "model.py").write_text(model.replace(judged, judged + "    bad = bad + 'a wrong answer'\n"))
    broken = _mypy(f"copied.{TEMPLATES}", tmp_path)
    assert broken.returncode == 1 and "model.py" in broken.stdout and "[operator]" in broken.stdout, broken.stdout


def test_the_templates_ship_with_the_package() -> None:
    shipped = resources.files("fuzz.reports.repro").joinpath(TEMPLATES)
    assert sorted(p.name for p in shipped.iterdir() if p.name.endswith(".py")) == \
        sorted(f"{name}.py" for name in FORMS + PARTS)


def _entries() -> dict[str, object]:
    sample = tiny_sample(one_table(weighted_pooling="fixed"))
    features = WEIGHTED.replace("op:", "features:")
    return {
        "single-op": lambda: weighted_entry(sample),
        "single-op-refbackend": lambda: make_entry(sample, WEIGHTED, "refbackend", ("refbackend",),
                                                   culprit="op:aten.embedding_bag.padding_idx[per_sample_weights]"),
        "model-mismatch": lambda: make_entry(sample, features, "iree-cpu", ("iree-cpu",)),
        "model-mismatch-dyn-inputs": lambda: make_entry(
            tiny_sample(one_table(weighted_pooling="fixed", weights="inputs", dtype="float16")), features,
            "iree-cpu-dyn", ("iree-cpu-dyn",)),
        "model-refbackend": lambda: make_entry(sample, features, "refbackend", ("refbackend",)),
        "model-lowering": lambda: int32_entry(tiny_sample(one_table(index_dtype="int32"))),
        "model-vulkan-run": lambda: make_entry(empty_table_sample(), VULKAN_EMPTY, "iree-vulkan-dyn",
                                               ("iree-vulkan-dyn",)),
        "model-hang": lambda: make_entry(tiny_sample(one_table()), "TIMEOUT|iree:llvm-cpu|no answer within Ns "
                                         "(stage compile)", "iree-cpu", ("iree-cpu",), stage=Stage.COMPILE,
                                         error="no answer within 300s (stage compile)"),
        "model-crash": lambda: make_entry(tiny_sample(one_table()), "CRASH|iree:llvm-cpu|worker died", "iree-cpu",
                                          ("iree-cpu",), numbers={"signal": 11}),
    }


@pytest.mark.parametrize("which", sorted(_entries()))
def test_each_form_fills_to_python_with_no_marker_left(tmp_path: Path, which: str) -> None:
    entry = _entries()[which]()  # type: ignore[operator]
    repro = write_repro(tmp_path, entry, check=False)
    assert repro.kind == ("single-op" if which.startswith("single") else "model")
    source = (tmp_path / "repro.py").read_text()
    compile(source, "repro.py", "exec")
    assert MARKERS.search(source) is None, MARKERS.search(source)
    assert "@stub" not in source and "${" not in source and "from ." not in source


@pytest.mark.parametrize("lower, target", [(False, "iree-cpu-dyn"), (True, "iree-tosa")])
def test_the_one_op_failure_form_fills_to_python_with_no_marker_left(lower: bool, target: str) -> None:
    compiled = TARGETS[target]
    assert isinstance(compiled, CompiledTarget)
    op = _OpModule("aten.gather.default", ["ARGS = [", "    np.array([1.0], np.float32),", "]"],
                   ["class Op(torch.nn.Module):", "    def forward(self, a0):", "        return a0 + 1"], {}, [], [])
    passed = "lowering passed" if lower else "export passed"
    source = _op_failure_script(int32_entry(tiny_sample(one_table())), compiled, op, title="it fails",
                                stage=Stage.IMPORT, lower=lower, passed=passed)
    compile(source, "repro.py", "exec")
    assert MARKERS.search(source) is None
    assert ("fx.export_and_import" in source) == lower and "import iree" not in source
    assert ("dynamic_shapes" in source) == compiled.dynamic
    assert f"SIGNATURE = {INT32!r}" in source and f"print('{passed}: fixed')" in source


def test_a_slot_the_writer_forgets_is_our_bug() -> None:
    with pytest.raises(KeyError, match="slot 'title' is not filled"):
        fill("op_failure", {})
    with pytest.raises(ValueError, match="section 'fx' is kept or dropped by a bool"):
        fill("prelude", {"fx": "yes"})

"""The regrouped package (issue 21): old module paths keep working for one
release with a DeprecationWarning naming the new path; the packages' own
faces import without one. Unit tier: no compiler, no workers."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fuzz._moved import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_module_path_forwards_and_warns(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        stand_in = importlib.import_module(old)
    real = importlib.import_module(new)
    names = getattr(real, "__all__", [])
    assert names, f"{new} declares no __all__"
    for name in names:
        assert getattr(stand_in, name) is getattr(real, name)


def test_old_names_of_modules_that_became_packages_forward_and_warn() -> None:
    from fuzz.model import dlrm
    from fuzz.triage import findings
    with pytest.warns(DeprecationWarning, match="fuzz.model.build moved to fuzz.model.dlrm"):
        from fuzz.model import build
    assert build is dlrm.build
    with pytest.warns(DeprecationWarning, match="fuzz.triage.Finding moved"):
        from fuzz.triage import Finding
    assert Finding is findings.Finding
    with pytest.raises(ImportError):
        from fuzz.model import no_such_name  # noqa: F401


@pytest.mark.engine
def test_the_faces_and_the_entry_points_import_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from fuzz.cli import main
        from fuzz.model import DLRMConfig, Sample  # noqa: F401
        from fuzz.targets import Target, resolve_targets  # noqa: F401
    assert callable(main)
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "fuzz",
                           "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "run" in done.stdout, done.stderr


def test_a_plugin_written_against_the_old_paths_still_loads(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "old_plugin.py").write_text(
        "from fuzz.targets import EagerTarget\n"
        "from fuzz.pipeline import Timer\n"
        "def make():\n    return [EagerTarget('old-plugin-eager', 'from the old paths')]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fuzz.pipeline", raising=False)
    from fuzz.targets.plugins import load_plugins
    with pytest.warns(DeprecationWarning):
        loaded = load_plugins(["old_plugin:make"])
    assert "old-plugin-eager" in loaded


def _public_definitions_without_docstring() -> list[str]:
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    missing: list[str] = []

    def walk(body: list[ast.stmt], where: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_"):
                if ast.get_docstring(node) is None:
                    missing.append(f"{where}:{node.lineno} {node.name}")
                if isinstance(node, ast.ClassDef):
                    walk(node.body, where)

    for package in ("fuzz", "strategies", "oracles"):
        for path in sorted((root / package).rglob("*.py")):
            walk(ast.parse(path.read_text()).body, str(path.relative_to(root)))
    return missing


def test_every_public_definition_says_why_it_exists() -> None:
    assert _public_definitions_without_docstring() == []


def test_every_package_declares_its_public_surface() -> None:
    import pkgutil

    import fuzz
    for info in pkgutil.iter_modules(fuzz.__path__, "fuzz."):
        if info.ispkg:
            module = importlib.import_module(info.name)
            assert isinstance(getattr(module, "__all__", None), list), info.name
            assert module.__doc__, info.name


@pytest.mark.engine
def test_the_installed_package_holds_every_module_of_the_checkout(tmp_path: Path) -> None:
    """What ``pip install`` ships is what the checkout holds: every module of
    fuzz, strategies and oracles imports in a fresh interpreter that cannot see
    the checkout (``-I``, another folder). A subpackage left out of the build
    (it happened to ``fuzz/reports/repro/``) fails here, not in a user's
    environment. The repro templates are package data the writer reads:
    they must be there too."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    templates = root / "fuzz" / "reports" / "repro" / "templates"  # data: scripts, never imported
    wanted = sorted(".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
                    for package in ("fuzz", "strategies", "oracles")
                    for p in (root / package).rglob("*.py")
                    if p.name != "__main__.py" and templates not in p.parents)
    script = ("import importlib, json, sys\n"
              "from importlib import resources\n"
              "missing = []\n"
              "for name in json.loads(sys.argv[1]):\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except ModuleNotFoundError as exc:\n"
              "        if exc.name and exc.name.split('.')[0] in ('fuzz', 'strategies', 'oracles'):\n"
              "            missing.append(name)\n"
              "shipped = resources.files('fuzz.reports.repro').joinpath('templates')\n"
              "print(json.dumps([missing, sorted(p.name for p in shipped.iterdir()) if shipped.is_dir() "
              "else []]))\n")
    import json
    done = subprocess.run([sys.executable, "-I", "-c", script, json.dumps(wanted)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    missing, shipped = json.loads(done.stdout.strip().splitlines()[-1])
    assert missing == []
    assert set(shipped) >= {p.name for p in templates.glob("*.py")}  # the repro templates, as package data


_ROOTS = ("fuzz", "strategies", "oracles")
_HEAVY_ROOTS = ("torch", "torch_mlir", "iree")


def _module_names(root: Path) -> dict[str, Path]:
    templates = root / "fuzz" / "reports" / "repro" / "templates"  # scripts, not modules
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for package in _ROOTS for p in (root / package).rglob("*.py") if templates not in p.parents}


def _imported(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The modules an import statement loads (``from a import b`` loads ``a.b`` when that is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def _top_level_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    found: set[str] = set()
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        for node in ast.walk(statement):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "level", 0) == 0:
                found.update(_imported(node, modules))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
    return found


def _in_function_project_imports(root: Path) -> list[str]:
    """Project imports inside functions that neither keep torch / torch-mlir /
    IREE lazy (the module they load imports one of those at its top,
    directly or through the project) nor say why they are there (a
    ``# lazy: <reason>`` comment on the line)."""
    modules = _module_names(root)
    tops = {name: _top_level_imports(path, modules) for name, path in modules.items()}
    heavy: dict[str, bool] = {}

    def is_heavy(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in heavy:
            heavy[name] = any(i.split(".")[0] in _HEAVY_ROOTS
                              or (i in modules and i not in seen and is_heavy(i, seen | {name}))
                              for i in tops.get(name, ()))
        return heavy[name]

    offenders = []
    for name, path in modules.items():
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                loaded = [m for m in _imported(node, modules) if m.split(".")[0] in _ROOTS]
                if loaded and not any(is_heavy(m) for m in loaded) \
                        and "# lazy:" not in lines[node.lineno - 1]:
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return offenders


def test_project_imports_sit_at_the_module_top_unless_they_keep_torch_lazy() -> None:
    """Issue 21: an import inside a function hides an arrow of the house.
    Only one that keeps torch / torch-mlir / IREE out of a module's import
    stays inside, or one that says why (``# lazy: ...``)."""
    assert _in_function_project_imports(Path(__file__).resolve().parents[1]) == []


def test_the_import_check_sees_a_function_level_import(tmp_path: Path) -> None:
    (tmp_path / "fuzz").mkdir()
    (tmp_path / "fuzz" / "heavy.py").write_text("import torch\n")
    (tmp_path / "fuzz" / "light.py").write_text("X = 1\n")
    (tmp_path / "fuzz" / "user.py").write_text(
        "def f():\n    from fuzz import light\n    from fuzz.heavy import thing\n"
        "    from fuzz.light import X  # lazy: a test says why\n")
    assert _in_function_project_imports(tmp_path) == ["fuzz/user.py:2: from fuzz import light"]

"""The lab's layout: no file under ``benchmarks/`` imports a private name of the library
but its shared helpers (``braindecode_pars._util``, versioned beside the lab), and no
script imports another script (what two scripts share is in ``benchmarks/lib``).

The two counts, from the repository's root::

    python -m pytest -p no:xdist -q benchmarks/tests/test_lab_layout.py
"""

import ast

import pytest

from .conftest import ROOT

PACKAGE = "braindecode_pars"
LAB = ROOT / "benchmarks"
#: The library's private helpers the lab may import (the argument checks, the seeding
#: of a block): the package's every layer shares them, and the lab is versioned with it.
SHARED = f"{PACKAGE}._util"


def _private(module, names=()):
    """Whether an import of ``names`` from ``module`` reaches a private library name: a
    module path segment or a name with a leading underscore (dunders aside), the
    ``_util`` of :data:`SHARED` aside."""
    if module.split(".")[0] != PACKAGE:
        return False
    shared = module == SHARED or module.startswith(f"{SHARED}.")
    parts = module.split(".")[2 if shared else 1 :] + list(names)
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts)


def _imports(source, package):
    """Every module an import of ``source`` (a file of the package ``package``, as
    ``benchmarks.lib``) reaches, with the names it imports: ``(module, names)``, relative
    imports resolved."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            found.append((module, tuple(a.name for a in node.names)))
    return found


def private_imports(source, package="benchmarks"):
    """The private library names that ``source`` imports, as ``module: names``."""
    return [
        f"{module}: {', '.join(names)}" if names else module
        for module, names in _imports(source, package)
        if _private(module, names)
    ]


def script_imports(source, scripts, package="benchmarks"):
    """The scripts (``benchmarks/<name>.py``, by name) that ``source`` imports: as
    ``name``, ``benchmarks.name``, or a name imported from ``benchmarks``."""
    found = []
    for module, names in _imports(source, package):
        parts = module.split(".")
        if len(parts) == 1 and parts[0] in scripts:  # beside it on sys.path
            found.append(parts[0])
        elif len(parts) == 2 and parts[0] == "benchmarks" and parts[1] in scripts:
            found.append(parts[1])
        elif module == "benchmarks":
            found += [n for n in names if n in scripts]
    return found


def lab_files():
    """Every Python file under ``benchmarks/``, and the package it belongs to."""
    return {
        path: ".".join(path.parent.relative_to(ROOT).parts) for path in sorted(LAB.rglob("*.py"))
    }


SCRIPTS = {p.stem for p in LAB.glob("*.py") if p.stem != "__init__"}


@pytest.mark.parametrize(
    "source, found",
    [
        (f"from {PACKAGE}.hub.folders import _run_state", [f"{PACKAGE}.hub.folders: _run_state"]),
        (f"from {PACKAGE}._util.checks import check_option", []),
        (f"from {PACKAGE}._jobs.lock import folder_lock", [f"{PACKAGE}._jobs.lock: folder_lock"]),
        (f"from {PACKAGE}._util.checks import _private", [f"{PACKAGE}._util.checks: _private"]),
        (f"import {PACKAGE}.pretraining._split", [f"{PACKAGE}.pretraining._split"]),
        (f"from {PACKAGE} import __version__, PARS", []),
        ("from benchmarks.lib.paper_datasets import subjects_of", []),
    ],
)
def test_the_private_import_finder_finds_a_planted_one(source, found):
    assert private_imports(f"def f():\n    {source}\n") == found


@pytest.mark.parametrize(
    "source, found",
    [
        ("from bench_gpu import synchronize", ["bench_gpu"]),
        ("import bench_dev_tasks as dev", ["bench_dev_tasks"]),
        ("from benchmarks.bench_pair_decoder import SIZES", ["bench_pair_decoder"]),
        ("from benchmarks import bench_gpu, lib", ["bench_gpu"]),
        ("from ..bench_gpu import synchronize", ["bench_gpu"]),
        ("from benchmarks.lib.steps import SIZES", []),
        ("from .steps import SIZES", []),
    ],
)
def test_the_script_import_finder_finds_a_planted_one(source, found):
    assert "bench_gpu" in SCRIPTS and "lab" in SCRIPTS  # the scripts are found
    assert script_imports(source, SCRIPTS, package="benchmarks.lib") == found


def test_lab_count_private_library_imports_none():
    files = lab_files()
    assert LAB / "lib" / "protocols.py" in files and LAB / "tests" / "conftest.py" in files
    found = {
        str(p.relative_to(ROOT)): names
        for p, package in files.items()
        if (names := private_imports(p.read_text(), package))
    }
    assert found == {}


def test_lab_count_scripts_importing_a_script_none():
    """The scripts and ``benchmarks/lib`` import no script (the tests may: they test them)."""
    files = {p: pkg for p, pkg in lab_files().items() if p.parent in (LAB, LAB / "lib")}
    assert LAB / "bench_gpu.py" in files and LAB / "lib" / "steps.py" in files
    found = {
        str(p.relative_to(ROOT)): names
        for p, package in files.items()
        if (names := script_imports(p.read_text(), SCRIPTS, package))
    }
    assert found == {}


def _package_layout():
    """The package's layout test (``tests/test_layout.py``): its finder of private
    attributes, shared rather than copied."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_package_layout", ROOT / "tests" / "test_layout.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lab_private_attributes():
    """``path: [(line, reach)]`` for each private attribute of the library a lab file
    reaches at run time (``module._name``, reassigned or read; patched by keyword; in
    a script held in a string; a private name of the library on any object)."""
    layout = _package_layout()
    files = lab_files()
    foreign = layout._private_names(sorted(layout.ROOT.rglob("*.py")))
    foreign -= layout._private_names(files, attributes=False)  # the lab's own names
    return {
        str(p.relative_to(ROOT)): found
        for p, package in files.items()
        if (found := layout.private_attributes(p.read_text(), foreign, package))
    }


def test_lab_count_private_library_attributes_none():
    """16 in 3 files before issue 80 (the review's 13 in 5 at 2476ecf)."""
    assert lab_private_attributes() == {}

"""The documentation: every name it shows imports from where it shows it, every public
name is on an API page, and the pages build as ``make docs`` builds them, a warning
failing the build, with every example of the gallery run (at the reduced size
``BRAINDECODE_PARS_QUICK_EXAMPLES=1`` gives: ``make test`` runs each example once, here),
in a copy of the sources in a temporary folder, so that the tree stays as it was."""

import ast
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import braindecode_pars

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("plot_*.py"))
#: What a docs build writes into its source folder (``make docs`` does, the test does not)
BUILD_OUTPUTS = ("_build", "auto_examples", "generated", "sg_execution_times.rst")
API_PAGES = [DOCS / "api.rst", *sorted((DOCS / "api").glob("*.rst"))]
PAGES = sorted(
    p for p in DOCS.rglob("*.rst") if not set(p.relative_to(DOCS).parts) & set(BUILD_OUTPUTS)
)
#: Every file whose code or references a reader follows: the pages, the README, the
#: examples, and the note conf.py writes into the models' docstrings
SOURCES = [*PAGES, ROOT / "README.md", *sorted((ROOT / "examples").glob("*.py")), DOCS / "conf.py"]
#: Other packages that a page with a current module may name (a page without one may
#: name any dotted path outside this package): not checked here
EXTERNAL = ("braindecode.", "mne.", "numpy.", "sklearn.", "skorch.", "torch.", "moabb.")


def resolve(dotted):
    """The object ``dotted`` names, as ``from a.b import c`` finds it: the longest prefix
    that imports as a module, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def current_modules(text):
    """``(position, module)`` of each ``currentmodule`` directive of a page."""
    pattern = r"^\.\. (?:py:)?(?:currentmodule|module|automodule):: (\S+)"
    return [(m.start(), m[1]) for m in re.finditer(pattern, text, flags=re.MULTILINE)]


def module_at(text, position):
    """The page's current module at ``position`` (None before any)."""
    before = [module for start, module in current_modules(text) if start < position]
    return before[-1] if before else None


def autosummary_entries(page):
    """``(full dotted name, entry as written)`` of every ``.. autosummary::`` entry of
    ``page``, each read in the page's current module."""
    text = page.read_text()
    entries = []
    for block in re.finditer(r"^( *)\.\. autosummary::\n((?:\1 {3}[^\n]*\n|\n)+)", text, re.M):
        module = module_at(text, block.start())
        for line in block[2].splitlines():
            entry = line.strip()
            if not entry or entry.startswith(":"):
                continue
            entry = entry.lstrip("~")
            entries.append((f"{module}.{entry}" if module else entry, entry))
    return entries


def documented():
    """The full dotted names the API pages document, and the modules they introduce."""
    names = {full for page in API_PAGES for full, _ in autosummary_entries(page)}
    modules = {module for page in API_PAGES for _, module in current_modules(page.read_text())}
    return names, modules


ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|data|exc|obj|mod):`(?:[^`<]*<)?~?([\w.]+)>?`")


def references(path):
    """``(role, target as written, full dotted name or None)`` of every Python reference
    of ``path``: the full name reads a relative target in the page's current module, and
    is None for another package's object."""
    text = path.read_text()
    found = []
    for match in ROLE.finditer(text):
        role, target = match[1], match[2]
        module = module_at(text, match.start()) if path.suffix == ".rst" else None
        if target.startswith("braindecode_pars"):
            full = target
        elif module and not target.startswith(EXTERNAL):
            full = f"{module}.{target}"
        elif "." not in target:
            full = target  # a bare name outside any module, which links nowhere
        else:
            full = None
        found.append((role, target, full))
    return found


IMPORT = re.compile(
    r"^[ \t]*(?:from (braindecode_pars[\w.]*) import (\([^)]*\)|[^\n]+)"
    r"|import (braindecode_pars[\w.]*))",
    re.MULTILINE,
)


def imports(path):
    """``(module, [names])`` of every import of the package written in ``path``'s code
    (a page's code blocks, the README's, an example's)."""
    found = []
    for match in IMPORT.finditer(path.read_text()):
        if match[3]:
            found.append((match[3], []))
            continue
        code = re.sub(r"#[^\n]*", "", match[2]).strip().strip("()")
        names = [n.split(" as ")[0].strip() for n in code.split(",")]
        found.append((match[1], [n for n in names if n]))
    return found


def public_packages():
    """Every public subpackage of the package, nested ones included (no ``_`` part)."""
    found = []
    for info in pkgutil.walk_packages(braindecode_pars.__path__, "braindecode_pars."):
        if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")):
            found.append(info.name)
    return found


#: The package's public one-file modules, each with its own API page's entries
ONE_FILE_MODULES = ("braindecode_pars.metrics", "braindecode_pars.viz")
ONE_FILE_MODULES += ("braindecode_pars.moabb", "braindecode_pars.oeb")


def public_names(module_name):
    """A module's contract: its ``__all__``, or, without one, the functions and classes
    it defines whose names do not start with ``_``."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if n != "__version__"]
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and callable(obj)
        and getattr(obj, "__module__", None) == module_name
    ]


# -- What the pages show ------------------------------------------------------------


def test_the_parsers_find_what_a_page_holds(tmp_path):
    page = tmp_path / "page.rst"
    page.write_text(
        ".. currentmodule:: braindecode_pars\n\n.. autosummary::\n   :toctree: ../generated/\n\n"
        "   PARSProbe\n   io.read_windows\n\nText :func:`~hub.load_encoder` and "
        ":class:`torch.nn.Module`.\n\n.. code-block:: python\n\n"
        "   from braindecode_pars.io import (\n       Windows,  # the reader's output\n"
        "       read_windows,\n   )\n   import braindecode_pars.viz\n"
    )
    assert autosummary_entries(page) == [
        ("braindecode_pars.PARSProbe", "PARSProbe"),
        ("braindecode_pars.io.read_windows", "io.read_windows"),
    ]
    assert references(page) == [
        ("func", "hub.load_encoder", "braindecode_pars.hub.load_encoder"),
        ("class", "torch.nn.Module", None),
    ]
    assert imports(page) == [
        ("braindecode_pars.io", ["Windows", "read_windows"]),
        ("braindecode_pars.viz", []),
    ]
    bare = tmp_path / "bare.rst"
    bare.write_text(":class:`PARSProbe`, :class:`pyriemann.estimation.Covariances`")
    assert references(bare) == [
        ("class", "PARSProbe", "PARSProbe"),  # links nowhere: the test reports it
        ("class", "pyriemann.estimation.Covariances", None),
    ]
    assert resolve("braindecode_pars.io.read_windows") is braindecode_pars.io.read_windows
    with pytest.raises(AttributeError):
        resolve("braindecode_pars.io.no_such_name")


@pytest.mark.parametrize("page", API_PAGES, ids=lambda p: p.stem)
def test_every_api_entry_imports_from_where_the_page_shows_it(page):
    missing = []
    for full, entry in autosummary_entries(page):
        try:
            resolve(full)
        except (ImportError, AttributeError) as error:
            missing.append(f"{entry} ({full}): {error}")
    assert not missing, f"{page.name} shows names that do not import:\n" + "\n".join(missing)


def test_each_object_has_one_page():
    # autosummary writes a page per entry: one object under two names would be two pages
    # and two descriptions of one object (a warning that fails the build)
    seen = {}
    for page in API_PAGES:
        for full, _ in autosummary_entries(page):
            obj = resolve(full)
            if isinstance(obj, str | int | float | tuple | dict):  # constants: by name
                continue
            assert id(obj) not in seen, f"{full} and {seen[id(obj)]} are one object"
            seen[id(obj)] = full


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_reference_names_a_documented_object(path):
    """A reference to the package imports, and links: it names the path of an object's
    API page (a method or attribute, of a documented class), or a module an API page
    introduces. A dotted name of the package written as code imports."""
    names, modules = documented()
    wrong = []
    for role, target, full in references(path):
        if full is None:
            continue
        try:
            resolve(full)
        except (ImportError, AttributeError):
            wrong.append(f":{role}:`{target}`: {full} does not import")
            continue
        if role == "mod":
            linked = full in modules
        elif role in ("meth", "attr"):
            linked = full in names or full.rpartition(".")[0] in names
        else:
            linked = full in names
        if not linked:
            wrong.append(f":{role}:`{target}`: {full} is on no API page")
    # a dotted name written as code (``braindecode_pars.io.read_windows``) imports too,
    # but on the changelog, which names what was renamed or removed
    text = path.read_text() if path.name != "changelog.rst" else ""
    for target in re.findall(r"``(braindecode_pars(?:\.\w+)+)(?:\(\))?``", text):
        try:
            resolve(target)
        except (ImportError, AttributeError):
            wrong.append(f"``{target}`` does not import")
    assert not wrong, f"{path.relative_to(ROOT)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_the_docs_show_runs_from_a_public_module(path):
    wrong = []
    for module, names in imports(path):
        statement = f"from {module} import {', '.join(names)}" if names else f"import {module}"
        if any(part.startswith("_") for part in module.split(".") + names):
            wrong.append(f"{statement}: a private name")
            continue
        try:
            exec(compile(ast.parse(statement), str(path), "exec"), {})
        except ImportError as error:
            wrong.append(f"{statement}: {error}")
    assert not wrong, f"{path.relative_to(ROOT)}:\n" + "\n".join(wrong)


# -- What the pages must show -------------------------------------------------------


@pytest.mark.parametrize("module", ["braindecode_pars", *public_packages(), *ONE_FILE_MODULES])
def test_every_public_name_is_on_an_api_page(module):
    """Each name of a subpackage's ``__all__`` (and of the root's, and each public
    function and class of the one-file modules) is on an API page: under that name, or,
    for an object another page documents (a root name, say), as that object."""
    names, _ = documented()
    # classes and functions by identity; a constant (a string, say) by its name alone
    objects = {id(obj) for obj in map(resolve, names) if callable(obj)}
    package = importlib.import_module(module)
    missing = [
        name
        for name in public_names(module)
        if f"{module}.{name}" not in names
        and not (callable(getattr(package, name)) and id(getattr(package, name)) in objects)
    ]
    assert not missing, f"{module}: on no API page: {missing}"


def test_the_api_index_lists_every_api_page():
    text = (DOCS / "api.rst").read_text()
    toctree = text[text.index(".. toctree::") :]
    listed = re.findall(r"^   (api/\w+)$", toctree, flags=re.MULTILINE)
    assert sorted(listed) == sorted(f"api/{p.stem}" for p in API_PAGES[1:])
    for entry in listed:
        assert f":doc:`{entry}`" in text, f"{entry}: not in the index's table"


# -- The build ----------------------------------------------------------------------


def tree_state(folder):
    """Every file under ``folder`` (ignored ones included) with its size and mtime."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def copy_sources(destination):
    """The docs and examples copied into ``destination`` (without build outputs), beside
    links to the rest of the checkout (the pages include benchmark results)."""
    ignore = shutil.ignore_patterns(*BUILD_OUTPUTS, "__pycache__")
    for name in ("docs", "examples"):
        shutil.copytree(ROOT / name, destination / name, ignore=ignore)
    for entry in ROOT.iterdir():
        if entry.name not in ("docs", "examples", ".git", ".venv"):
            (destination / entry.name).symlink_to(entry)


@pytest.mark.slow
def test_the_docs_build_without_a_warning_and_run_every_example(tmp_path):
    pytest.importorskip("sphinx_gallery", reason="needs the [docs] extra (make install has it)")
    before = tree_state(DOCS), tree_state(ROOT / "examples")
    sources = tmp_path / "src"
    sources.mkdir()
    copy_sources(sources)
    env = {**os.environ, "BRAINDECODE_PARS_QUICK_EXAMPLES": "1", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
    command += ["-d", str(tmp_path / "doctrees"), "docs", str(tmp_path / "html")]
    done = subprocess.run(command, cwd=sources, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"sphinx-build exited {done.returncode}:\n{done.stderr[-6000:]}"
    assert len(EXAMPLES) >= 4
    for name in EXAMPLES:
        page = (tmp_path / "html" / "auto_examples" / f"{name}.html").read_text()
        assert "sphx-glr-script-out" in page, f"{name}: no output of its run on its page"
        assert f"sphx_glr_{name}_001.png" in page, f"{name}: no figure on its page"
    # the build read its own copy: nothing under docs/ or examples/ changed, ignored
    # files included
    assert (tree_state(DOCS), tree_state(ROOT / "examples")) == before

""".ci/changed.py's digests, records and time bound, in clones of the repository and in
small repositories built here: what a group's check imports is in its digest, the pins
and the Python version are in every group's, a failure of the script runs the group,
and a record too old or of a commit the clone lacks is due. The repository itself is
only read."""

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHANGED = ROOT / ".ci" / "changed.py"
GROUPS = ("gallery", "faults", "device", "kernels")
#: the report's exit status: run the group, skip it, the script failed
RUN, SKIP, FAILED = 0, 10, 2

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _load(root=None):
    """.ci/changed.py as a module, its root ``root`` (default: the repository's)."""
    spec = importlib.util.spec_from_file_location("ci_changed", CHANGED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if root is not None:
        module.ROOT = Path(root)
        module.RECORD = Path(root) / ".ci" / "checked.json"
    return module


def _git(repo, *args):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def _ask(repo, *args):
    """(exit status, stdout, stderr) of ``.ci/changed.py *args`` in ``repo``."""
    done = subprocess.run(
        [sys.executable, str(Path(repo) / ".ci" / "changed.py"), *args],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def _write(repo, files):
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


#: A small repository: a package whose ``stopping`` module the faults group's test
#: imports, a module nothing imports, the gated targets, the pins.
SMALL = {
    "Makefile": "".join(
        f"{t}:\n\techo {t}\n" for t in ("docs-check", "test-faults", "test-device", "test-kernels")
    ),
    "constraints.txt": "torch==2.11.0\n",
    "pyproject.toml": "[project]\nname = 'p'\n",
    "setup.cfg": "[tool:pytest]\n",
    "braindecode_pars/__init__.py": "",
    "braindecode_pars/pretraining/__init__.py": "",
    "braindecode_pars/pretraining/stopping.py": "x = 1\n",
    "braindecode_pars/metrics.py": "x = 1\n",
    "benchmarks/__init__.py": "",
    "benchmarks/tests/__init__.py": "",
    "benchmarks/tests/test_f.py": "import pytest\n"
    "from braindecode_pars.pretraining import stopping\n\n"
    "pytestmark = pytest.mark.faults\n",
}


@pytest.fixture
def small(tmp_path):
    """:data:`SMALL` with this checkout's .ci/changed.py, committed."""
    repo = tmp_path / "small"
    _write(repo, SMALL)
    (repo / ".ci").mkdir()
    shutil.copy(CHANGED, repo / ".ci" / "changed.py")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "a")
    return repo


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A clone of this repository (its last commit) with this checkout's .ci/changed.py,
    every group recorded there."""
    repo = tmp_path_factory.mktemp("clone") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True, capture_output=True)
    shutil.copy(CHANGED, repo / ".ci" / "changed.py")
    for group in GROUPS:
        assert _ask(repo, "--record", group)[0] == 0
    return repo


def _touched(repo, name):
    """Context: ``name`` in ``repo`` with a line added, then as it was."""
    import contextlib

    @contextlib.contextmanager
    def touch():
        path = repo / name
        before = path.read_bytes()
        path.write_bytes(before + b"\n# touched\n")
        try:
            yield
        finally:
            path.write_bytes(before)

    return touch()


@pytest.mark.slow  # a clone, and the closures of four groups computed eleven times
def test_in_a_clone_an_edit_runs_the_groups_whose_checks_import_it(clone):
    assert {g: _ask(clone, g)[0] for g in GROUPS} == dict.fromkeys(GROUPS, SKIP)
    # the gallery's PhysioNet-MI example fine-tunes the multichannel classifier, the
    # device check's loops train it: both run (the review found every group skipped)
    with _touched(clone, "braindecode_pars/models/multichannel.py"):
        codes = {g: _ask(clone, g) for g in GROUPS}
    for group in ("gallery", "device"):
        code, out, _ = codes[group]
        assert code == RUN and "differ from those of its last full check" in out, (group, out)
    # a pin moves: every group runs (the review found only the kernels')
    with _touched(clone, "constraints.txt"):
        assert {g: _ask(clone, g)[0] for g in GROUPS} == dict.fromkeys(GROUPS, RUN)
    # a file no check imports (a benchmark's results page): none runs
    with _touched(clone, "benchmarks/results/flops.md"):
        assert {g: _ask(clone, g)[0] for g in GROUPS} == dict.fromkeys(GROUPS, SKIP)
    # the records say where the checks passed
    records = json.loads((clone / ".ci" / "checked.json").read_text())
    head = _git(clone, "rev-parse", "HEAD").strip()
    for group in GROUPS:
        r = records[group]
        assert r["commit"] == head and isinstance(r["dirty"], bool)
        assert r["python"] == f"Python {sys.version}" and r["platform"] and r["pip"]
        assert r["torch"] == metadata.version("torch")


def test_the_pins_the_metadata_and_the_python_version_are_in_every_digest(small):
    for group in GROUPS:
        assert _ask(small, "--record", group)[0] == 0
    assert {g: _ask(small, g)[0] for g in GROUPS} == dict.fromkeys(GROUPS, SKIP)
    for name in ("constraints.txt", "pyproject.toml", "setup.cfg"):
        with _touched(small, name):
            assert {g: _ask(small, g)[0] for g in GROUPS} == dict.fromkeys(GROUPS, RUN), name
    # a group's Makefile recipe (what its check runs) is in its digest, and its alone
    makefile = (small / "Makefile").read_text()
    (small / "Makefile").write_text(makefile.replace("echo test-faults", "echo faults!"))
    assert {g: _ask(small, g)[0] for g in GROUPS} == {**dict.fromkeys(GROUPS, SKIP), "faults": RUN}
    (small / "Makefile").write_text(makefile)
    # another Python's minor version: another digest
    changed = _load(small)
    files = changed.closure("faults")
    before = changed.digest("faults", files)
    changed.python_version = lambda: "3.99"
    assert changed.digest("faults", files) != before


@pytest.mark.parametrize(
    "text",
    [
        "{\n",  # cut short
        '<<<<<<< HEAD\n{"faults": {}}\n=======\n{}\n>>>>>>> other\n',  # a merge's conflict
        '["faults"]\n',  # not an object of records
    ],
    ids=["truncated", "conflict", "list"],
)
def test_a_corrupt_record_file_runs_the_groups(small, text):
    assert _ask(small, "--record", "faults")[0] == 0
    (small / ".ci" / "checked.json").write_text(text)
    code, out, err = _ask(small, "faults")
    assert code not in (RUN, SKIP) and code == FAILED
    assert "failed" in err and "checked.json" in err and "the group must run" in err
    if "<<<<<<<" in text:
        assert "conflict markers" in err
    # recording again starts the file anew, saying what it dropped
    code, out, err = _ask(small, "--record", "faults")
    assert code == 0 and "written anew" in err
    assert _ask(small, "faults")[0] == SKIP


def _gated(repo, group, target):
    """What .ci/run's ``gated`` does for ``group`` in ``repo`` (its make step stubbed):
    its output and stderr."""
    script = (ROOT / ".ci" / "run").read_text()
    body = script[script.index("gated() {") : script.index("\n}\n", script.index("gated() {")) + 3]
    venv = repo / ".venv" / "bin"
    venv.mkdir(parents=True, exist_ok=True)
    if not (venv / "python").exists():
        (venv / "python").symlink_to(sys.executable)
    stub = 'step() { echo "RAN $1"; }\n'
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{stub}{body}\ngated {group} {target}\necho END"],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.rstrip().endswith("END"), done
    return done.stdout, done.stderr


def test_ci_runs_a_group_when_the_script_says_so_or_fails_and_skips_it_only_when_told(small):
    assert "RAN test-faults" in _gated(small, "faults", "test-faults")[0]  # no record
    _ask(small, "--record", "faults")
    out, _ = _gated(small, "faults", "test-faults")
    assert "RAN" not in out and "make test-faults: skipped" in out
    (small / ".ci" / "checked.json").write_text("<<<<<<< HEAD\n")
    out, err = _gated(small, "faults", "test-faults")
    assert "RAN test-faults" in out and "failed (exit 2)" in err
    # the script gone altogether (python's exit status 2): run
    os.remove(small / ".ci" / "changed.py")
    out, err = _gated(small, "faults", "test-faults")
    assert "RAN test-faults" in out and "failed" in err


def test_a_record_of_a_commit_the_clone_lacks_is_due(small, tmp_path):
    assert _ask(small, "--record", "faults")[0] == 0
    _git(small, "add", ".ci/checked.json")
    _git(small, "commit", "-q", "-m", "record")
    assert _ask(small, "faults")[0] == SKIP
    # a shallow clone holds the record but not the commit it names
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{small}", str(shallow))
    code, out, _ = _ask(shallow, "faults")
    assert code == RUN and "not in this clone's history" in out
    # a record naming a commit git never had
    path = small / ".ci" / "checked.json"
    data = json.loads(path.read_text())
    data["faults"]["commit"] = "0123456789" * 4
    path.write_text(json.dumps(data))
    code, out, _ = _ask(small, "faults")
    assert code == RUN and "due" in out
    # and one without a commit
    del data["faults"]["commit"]
    path.write_text(json.dumps(data))
    assert _ask(small, "faults")[0] == RUN


def test_a_group_runs_once_its_record_is_as_old_as_its_bound(small):
    bound = _load().DUE_AFTER["kernels"]
    assert _ask(small, "--record", "kernels")[0] == 0
    for i in range(bound - 1):
        _git(small, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    code, out, _ = _ask(small, "kernels")
    assert code == SKIP and f"({bound - 1} commits ago)" in out
    _git(small, "commit", "-q", "--allow-empty", "-m", "last")
    code, out, _ = _ask(small, "kernels")
    assert code == RUN and f"is {bound} commits old" in out


def test_the_records_say_the_environment_and_whether_the_tree_was_dirty(small):
    _ask(small, "--record", "faults")
    r = json.loads((small / ".ci" / "checked.json").read_text())["faults"]
    assert r["dirty"] is False and r["commit"] == _git(small, "rev-parse", "HEAD").strip()
    assert r["python"] == f"Python {sys.version}"
    assert set(r) >= {"sha256", "files", "date", "pip", "platform", "torch"}
    # the record file itself does not make the tree dirty; another edit does
    _ask(small, "--record", "gallery")
    assert json.loads((small / ".ci" / "checked.json").read_text())["gallery"]["dirty"] is False
    (small / "braindecode_pars" / "metrics.py").write_text("x = 3\n")
    _ask(small, "--record", "gallery")
    assert json.loads((small / ".ci" / "checked.json").read_text())["gallery"]["dirty"] is True


def test_the_closure_follows_imports_parents_named_modules_and_paths(tmp_path):
    """Each way a check reaches a file, and prose that names files without reaching
    them."""
    repo = tmp_path / "graph"
    files = {
        "Makefile": "test-kernels:\n\techo\n",
        "pkg/__init__.py": "from .sub import thing\n",
        "pkg/sub/__init__.py": "thing = 1\n",
        "pkg/sub/deep.py": "from ..rel import x\nfrom . import sibling\n",
        "pkg/sub/sibling.py": "",
        "pkg/rel.py": "x = 1\n",
        "pkg/cli.py": "",
        "pkg/patched.py": "def f(): pass\n",
        "pkg/child.py": "",
        "pkg/data.json": "{}\n",
        "pkg/message.py": '"""Run ``lab/run.py``."""\nHINT = "python -m lab.run"\n',
        "pkg/unreached.py": "",
        "lab/__init__.py": "",
        "lab/run.py": "",
        "tests/__init__.py": "",
        "tests/conftest.py": "import pkg.message\n",
        "tests/helper_script.py": "",
        "tests/test_k.py": (
            '"""Prose: pkg/unreached.py and ``pkg.cli`` are named here only."""\n'
            "import pytest\n"
            "from pkg.sub import deep\n"
            "pytestmark = pytest.mark.kernels\n"
            "def test_a(mocker):\n"
            "    import subprocess, sys\n"
            "    subprocess.run([sys.executable, '-m', 'pkg.cli'])\n"
            "    mocker.patch('pkg.patched.f')\n"
            "    subprocess.run([sys.executable, '-c', 'import pkg.child'])\n"
            "    subprocess.run([sys.executable, 'helper_script.py'])\n"
            "    open('pkg/data.json')\n"
        ),
        "tests/test_other.py": "import pkg.unreached\n",  # not marked: not an entry
    }
    _write(repo, files)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    changed = _load(repo)
    changed.DATA = {}
    changed.PACKAGE = "pkg"
    got = set(changed.closure("kernels"))
    reached = {
        "tests/test_k.py", "tests/conftest.py", "tests/__init__.py",  # entry, conftest
        "pkg/sub/deep.py", "pkg/sub/__init__.py", "pkg/__init__.py",  # import, parents
        "pkg/rel.py", "pkg/sub/sibling.py",  # relative imports
        "pkg/cli.py", "pkg/patched.py", "pkg/child.py",  # named by strings
        "tests/helper_script.py", "pkg/data.json",  # paths
        "pkg/message.py",  # through conftest
    }  # fmt: skip
    assert reached <= got, reached - got
    # prose in docstrings, a module nothing imports, an unmarked test, and the lab that a
    # package's message names (the installed package cannot run it)
    assert not got & {"pkg/unreached.py", "tests/test_other.py", "lab/run.py"}, got


def test_the_closures_of_this_repository_cover_what_the_review_found_missed():
    """Each group's digest holds the modules whose edit the outside review showed
    skipped every group, the package's data, and the device check's CUDA tests."""
    changed = _load()
    tracked = changed.tracked_files()
    closures = {g: set(changed.closure(g, tracked)) for g in GROUPS}
    for name in (
        "models/multichannel.py",
        "_util/atomic.py",
        "pretraining/checkpoints.py",
        "models/pretext/base.py",
        "_util/device_defaults.py",
    ):
        for group, files in closures.items():
            assert f"braindecode_pars/{name}" in files, (group, name)
    # every data file of the package is hashed with the module that reads it
    data = [p for p in tracked if p.startswith("braindecode_pars/") and not p.endswith(".py")]
    for path in data:
        assert any(path.startswith(d + "/") for ds in changed.DATA.values() for d in ds), path
    # the device check's tests part runs these files by name
    tree = ast.parse((ROOT / "benchmarks" / "device_check.py").read_text())
    cuda = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CUDA_TESTS"
    )[0]
    listed = {Path(p).name for p in changed.GROUPS["device"].paths}
    assert set(cuda) <= listed
    # the files each group's digest listed by hand before stay in it
    assert {"braindecode_pars/pretraining/stopping.py", "benchmarks/bench_faults.py",
            "benchmarks/lib/stop_trigger.py"} <= closures["faults"]  # fmt: skip
    assert {"braindecode_pars/models/pair/__init__.py", "tests/internals/_interpreted.py",
            "tests/internals/test_pair_decoders.py"} <= closures["kernels"]  # fmt: skip
    assert {"benchmarks/bench_gpu.py", "benchmarks/bench_loop_trace.py",
            "benchmarks/lib/device_steps.py"} <= closures["device"]  # fmt: skip

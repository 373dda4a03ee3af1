"""CI's choices (.ci/run, .ci/changed.py): the docs' gallery, the lab's fault harness, the
device check's dry run and the Triton kernels run when what their checks import changed
since their full check last passed, and the paths that decide it exist.
(tests/internals/test_ci_changed.py tests the import closure, the records and the time
bound in clones.)"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHANGED = ROOT / ".ci" / "changed.py"


def _load():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_changed", CHANGED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    """A git repository holding .ci/changed.py, a Makefile with the gated targets, a
    package whose ``pretraining.stopping`` the faults group's test imports (and which
    imports a ``helper`` module that is not there yet), a module nothing imports, and an
    example, committed."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    (tmp_path / ".ci").mkdir()
    shutil.copy(CHANGED, tmp_path / ".ci" / "changed.py")
    files = {
        "Makefile": "".join(f"{t}:\n\techo {t}\n" for t in
                            ("docs-check", "test-faults", "test-device", "test-kernels")),
        "constraints.txt": "torch==2.11.0\n",
        "braindecode_pars/__init__.py": "",
        "braindecode_pars/pretraining/__init__.py": "",
        "braindecode_pars/pretraining/stopping.py": "from . import helper\nx = 1\n",
        "braindecode_pars/metrics.py": "x = 1\n",
        "benchmarks/__init__.py": "",
        "benchmarks/tests/__init__.py": "",
        "benchmarks/tests/test_f.py": "import pytest\n"
        "from braindecode_pars.pretraining import stopping\n\n"
        "pytestmark = pytest.mark.faults\n",
        "examples/plot_a.py": "x = 1\n",
    }  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    return tmp_path


def _ask(repo, *args):
    done = subprocess.run(
        [sys.executable, str(repo / ".ci" / "changed.py"), *args],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip
    return done.returncode, done.stdout


#: .ci/changed.py's exit status: run the group, skip it
RUN, SKIP = 0, 10


def test_a_group_runs_until_recorded_and_again_when_its_files_change(repo):
    code, out = _ask(repo, "faults")
    assert code == RUN and "no full check recorded" in out  # never checked: run it
    assert _ask(repo, "--record", "faults")[0] == 0
    code, out = _ask(repo, "faults")
    assert code == SKIP and "unchanged since its full check" in out
    # a file the group's tests do not import changes: still unchanged; the other group
    # was never run
    (repo / "braindecode_pars" / "metrics.py").write_text("x = 2\n")
    assert _ask(repo, "faults")[0] == SKIP
    assert _ask(repo, "gallery")[0] == RUN
    # a byte of a module the group's test imports changes: run it again, saying since when
    (repo / "braindecode_pars" / "pretraining" / "stopping.py").write_text(
        "from . import helper\nx = 2\n"
    )
    code, out = _ask(repo, "faults")
    assert code == RUN and "differ from those of its last full check" in out
    # the module it imports appears: it counts once tracked (the commit CI is given)
    _ask(repo, "--record", "faults")
    (repo / "braindecode_pars" / "pretraining" / "helper.py").write_text("y = 1\n")
    assert _ask(repo, "faults")[0] == SKIP  # untracked: not part of the commit CI is given
    _git(repo, "add", ".")
    assert _ask(repo, "faults")[0] == RUN
    assert "braindecode_pars/pretraining/helper.py" in _ask(repo, "--files", "faults")[1]


def test_every_path_of_a_group_exists_in_this_checkout():
    """A renamed or deleted file would leave its group's check blind to it."""
    changed = _load()
    for group, spec in changed.GROUPS.items():
        for path in (*spec.tests, *spec.paths, *changed.COMMON):
            assert (ROOT / path).exists(), f"{group}: {path} is not in the checkout"


def test_ci_runs_the_readme_command_then_the_guards_each_when_it_must():
    script = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme
    steps = [line.split()[1] for line in script.splitlines() if line.startswith("step ")]
    assert steps[:3] == ["test", "test-slow", "test-lab"]
    changed = _load()
    gated = [line.split()[1:] for line in script.splitlines() if line.startswith("gated ")]
    assert gated == [
        [g, changed.GROUPS[g].target] for g in ("gallery", "faults", "device", "kernels")
    ]
    # each target runs its group's marked tests, then records the group
    markers = (ROOT / "setup.cfg").read_text()
    for group, spec in changed.GROUPS.items():
        body = changed.recipe(spec.target)
        assert f"-m {spec.marker}" in body or f'-m "{spec.marker}' in body, (group, body)
        assert body.splitlines()[-1].strip() == f"$(PY) .ci/changed.py --record {group}"
        assert f"\n    {spec.marker}: " in markers, f"{spec.marker} is not a declared marker"


#: What every landing must still run (issue 89): the pass of .ci/run that runs it (its
#: marker expression: Makefile's test, test-slow, test-lab), the file and the test.
GUARDS = [
    # exact resume in one process, with and without DataLoader workers
    ("test", "tests/internals/test_pretrain_stop.py",
     "test_a_view_stopped_at_a_step_and_resumed_ends_with_the_weights_never_stopped"),
    # the disk-order resume
    ("test", "tests/internals/test_disk_order.py",
     "test_a_disk_order_run_stopped_within_an_epoch_resumes_to_the_weights_never_stopped"),
    # one torchrun exact resume after a whole-job SIGTERM
    ("serial", "tests/test_distributed.py",
     "test_a_torchrun_job_stopped_by_sigterm_and_run_again_ends_with_the_weights_never_stopped"),
    # the whole-job signals to a store build and to a pretraining run
    ("serial", "tests/test_whole_job_signals.py",
     "test_sigterm_to_every_process_of_a_store_build_leaves_none_and_the_build_resumes"),
    ("serial", "tests/test_whole_job_signals.py",
     "test_sigterm_to_every_process_of_a_pretraining_run_leaves_none_and_the_run_resumes"),
    # the privacy end to end
    ("slow", "tests/test_identity.py", "test_store_pretrain_and_export_name_no_one"),
    # the fault harness on recorded trials
    ("lab", "benchmarks/tests/test_fault_records.py", ""),
]  # fmt: skip

#: Each pass of .ci/run: its folder and marker expression (the Makefile's)
PASSES = {
    "test": ("tests", "not serial and not slow"),
    "slow": ("tests", "slow and not serial and not gallery and not extended and not kernels"),
    "serial": ("tests", "serial and not extended"),
    "lab": ("benchmarks/tests", "not serial and not faults and not device and not extended"),
}


def _marks(node):
    """The marker names of ``pytest.mark.NAME`` expressions under ``node``."""
    import ast

    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
    }


def _markers(file, test):
    """The markers of ``test`` in ``file`` (its decorators and the module's
    ``pytestmark``), read from the source; every test of the file when ``test`` is
    empty, as {name: markers}."""
    import ast

    tree = ast.parse((ROOT / file).read_text())
    module = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module |= _marks(node.value)
    found = {
        node.name: module | set().union(*(_marks(d) for d in node.decorator_list))
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }
    return found if not test else {test: found[test]}


def _selected(expression, markers):
    """Whether a test of ``markers`` is selected by ``-m expression`` (names, and, not)."""
    names = {n: n in markers for n in expression.split() if n not in ("and", "or", "not")}
    return eval(expression, {"__builtins__": {}}, names)


def test_the_guards_every_landing_needs_are_in_the_passes_ci_runs():
    makefile = (ROOT / "Makefile").read_text()
    assert _selected("slow and not serial", {"slow"}) and not _selected("not slow", {"slow"})
    for name, (folder, expression) in PASSES.items():
        assert f'-m "{expression}"' in makefile, f"{name}: the Makefile runs another selection"
        for where, file, test in GUARDS:
            if where == name:
                assert file.startswith(folder + "/"), (file, name)
                for found, markers in _markers(file, test).items():
                    assert _selected(expression, markers), f"{file}::{found} not in {name}"
    # the reading of the markers: a test marked serial and extended, and one in a file
    # whose pytestmark says faults
    assert _markers("tests/internals/test_threads.py",
                    "test_a_second_busy_process_lowers_the_idle_cores")[
        "test_a_second_busy_process_lowers_the_idle_cores"] == {"serial", "extended"}  # fmt: skip
    faults = _markers("benchmarks/tests/test_store_faults.py", "")
    assert faults and all({"serial", "slow", "faults"} <= m for m in faults.values())

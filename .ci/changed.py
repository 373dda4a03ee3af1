"""Whether a gated group's check must run: its inputs changed, or its record is too old.

Four checks are too long for every landing: the lab's fault harness run for real (``make
test-faults``: signals, kills and full disks to ``store`` and ``pretrain`` in processes of
their own, about 8 minutes), the docs built with every example of the gallery run
(``make docs-check``, about 2.5 minutes), the GPU device check's dry run on the CPU
(``make test-device``, about 3.5 minutes) and the pair operator's Triton kernels run
under Triton's interpreter and compiled for an H100 (``make test-kernels``, about 1
minute). Each target, once it passes, records the digest of its group's inputs and the
environment it passed on in ``.ci/checked.json`` (committed with the change); ``.ci/run``
asks this script about each group and runs the group's check when it must.

What a group's digest covers
----------------------------
Not a hand list of files but what the check imports and executes, found from the import
graph (:func:`closure`):

- the entry points: the test files under the group's folders that carry its pytest
  marker (the tests its target selects) and their ``conftest.py`` files; the Python files
  among the group's hand-listed paths (the gallery's ``docs/conf.py`` and examples, the
  device check's CUDA test files);
- from each Python file reached, every import followed statically (``ast``): ``import
  a.b``, ``from a.b import c`` (``c`` may be a submodule), relative imports, imports
  inside functions; a module's parent packages, whose ``__init__.py`` an import runs;
  and, from string constants, the repository modules they name (``-m braindecode_pars.cli``,
  ``mock.patch("braindecode_pars.x.f")``, ``import`` lines of code run with ``-c``) and the
  repository files they name as paths (relative to the root or to the file);
- from the hand-listed text files (the docs' pages), the modules they name
  (``.. automodule:: braindecode_pars.io``) and the files they include;
- the data a module reads (:data:`DATA`: the shipped weights with the package, the
  bundled recordings with ``datasets/bundled.py``).

Every repository file reached (tracked by git: what a fresh clone holds) is hashed, path
and bytes, with the group's hand-listed files, its Makefile target's recipe, and, for
every group, ``constraints.txt``, ``pyproject.toml``, ``setup.cfg`` and the Python version
(major.minor) of the interpreter that runs this script. The closure over-approximates
(an import inside a branch never taken counts), which errs towards running a check.

The time bound
--------------
A group whose inputs do not change still runs once its record is older than
:data:`DUE_AFTER` commits: ``git rev-list --count RECORD..HEAD`` on main. Git holds no
marker of a landing; a landing is one session's work pushed to main, 10 to 30 commits,
so the count of commits is the measure of landings at hand. The bounds, 40 commits for
the kernels (1 minute), 60 for the gallery (2.5 minutes), 80 for the device dry run (3.5
minutes) and 100 for the fault harness (8 minutes), make each group run at least once
in every 10 landings of 10 commits or more (every 2 to 4 landings of 30), the cheap ones
more often; groups recorded at one commit come due 20 commits, usually a landing, apart,
so that a landing takes one group's minutes more than the 15 that always run, not all
four groups' 15. A record whose commit this clone does not hold (a shallow clone, a
rewritten history) is due. CI does not write records: a group that came due runs on
every landing until its target passes and its record is committed.

Usage::

    python .ci/changed.py faults            # say whether and why; exit 0: run it, 10: skip it
    python .ci/changed.py --record faults   # after its full check passed (the Makefile's)
    python .ci/changed.py --files faults    # the files its digest covers

Exit status of the report: 0 when the group must run (changed, never recorded, due),
10 when it may be skipped, anything else when this script failed (a corrupt or
conflicted ``.ci/checked.json``, git missing...), which ``.ci/run`` reads as "run it".
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import json
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / ".ci" / "checked.json"

#: The report's exit status: the group must run, may be skipped; any other status is a
#: failure of this script, which ``.ci/run`` reads as "run it".
RUN, SKIP, FAILED = 0, 10, 2


class Group(NamedTuple):
    """A gated group: its Makefile target, the pytest marker of its tests, the folders
    whose test files carrying that marker are entry points, and the paths (files or
    folders) hashed whole, whose Python files are entry points and whose text files are
    read for the modules and files they name."""

    target: str
    marker: str
    tests: tuple[str, ...]
    paths: tuple[str, ...] = ()


GROUPS = {
    # the docs' pages and the examples the gallery runs (sphinx imports docs/conf.py,
    # the modules the pages document and every example)
    "gallery": Group("docs-check", "gallery", ("tests",), ("docs", "examples")),
    # the fault harness's tests, which import the harness, which launches the package
    "faults": Group("test-faults", "faults", ("benchmarks/tests",)),
    # the device check's dry run: its test, the script that runs it on a GPU machine and
    # the CUDA test files its tests part runs by name (benchmarks/device_check.py's
    # CUDA_TESTS, which tests/internals/test_ci_changed.py compares with this list)
    "device": Group(
        "test-device",
        "device",
        ("benchmarks/tests",),
        (
            "benchmarks/device_check.sh",
            "tests/internals/test_pair_fused.py",
            "tests/internals/test_training_steps.py",
            "tests/test_pretrainer.py",
        ),
    ),
    # the pair operator's Triton kernels: the tests marked kernels and what they import
    "kernels": Group("test-kernels", "kernels", ("tests",)),
}

#: The package (the docs' pages document its modules).
PACKAGE = "braindecode_pars"

#: In every group's digest: the pins, the package's metadata and pytest's settings.
COMMON = ("constraints.txt", "pyproject.toml", "setup.cfg")

#: The data a module reads, hashed with the group when the module is in its closure:
#: the weights that ship with the package, the recordings ``bundled_data_path`` finds in
#: a checkout.
DATA = {
    "braindecode_pars/__init__.py": ("braindecode_pars/weights",),
    "braindecode_pars/datasets/bundled.py": ("data",),
}

#: A group is due when its record is this many commits old or older (the module's
#: docstring says why these numbers).
DUE_AFTER = {"kernels": 40, "gallery": 60, "device": 80, "faults": 100}

#: Text files read for the modules they name and the files their directives include.
TEXT = (".rst", ".txt", ".md")

#: the nodes whose first statement, a string, is their docstring
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
_IMPORT_LINE = re.compile(r"(?:^|[\s;])(?:from|import)\s+(" + _DOTTED + r"|[A-Za-z_]\w*)")
_EXTENSIONS = "py|txt|json|md|rst|sh|sbatch|npz|npy|csv|toml|cfg|yaml|yml|safetensors"
_PATH = re.compile(r"(?:\.{1,2}/)*(?:[\w.-]*[\w-]/[\w./-]*\w|[\w-]+\.(?:" + _EXTENSIONS + r")\b)")
#: an rst directive's argument or option value (``.. literalinclude:: path``)
_DIRECTIVE = re.compile(r"^\s*(?:\.\. [\w:-]+::|:[\w-]+:)[ \t]+(\S+)", re.M)


def _git(*args):
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def tracked_files():
    """The files git tracks (what a fresh clone's tree holds), as POSIX paths."""
    return frozenset(p for p in _git("ls-files", "-z").split("\0") if p)


def _under(tracked, path):
    """The tracked files at ``path`` (a file) or under it (a folder), sorted."""
    return sorted(p for p in tracked if p == path or p.startswith(path.rstrip("/") + "/"))


class _Graph:
    """Resolves module names and paths against the tracked files."""

    def __init__(self, tracked):
        self.tracked = tracked
        #: the repository's top-level packages (the names a string may name)
        self.top = {
            p.split("/")[0] for p in tracked if p.count("/") == 1 and p.endswith("/__init__.py")
        }

    def module(self, dotted, base=""):
        """The file of module ``dotted`` with ``base`` (a folder) on ``sys.path``."""
        stem = "/".join(filter(None, (base, dotted.replace(".", "/"))))
        for name in (stem + ".py", stem + "/__init__.py"):
            if name in self.tracked:
                return name
        return None

    def is_package(self, folder):
        return folder not in ("", ".") and f"{folder}/__init__.py" in self.tracked

    def bases(self, path):
        """The folders on ``sys.path`` when ``path`` runs: the root, and the first
        folder above its package (pytest's rootdir-less insertion, a script's own)."""
        folder = str(PurePosixPath(path).parent)
        while self.is_package(folder):
            folder = str(PurePosixPath(folder).parent)
        return [""] if folder == "." else ["", folder]

    def parents(self, path):
        """The ``__init__.py`` of each package that holds ``path``, innermost first."""
        folder = PurePosixPath(path).parent
        while self.is_package(str(folder)):
            if f"{folder}/__init__.py" != path:
                yield f"{folder}/__init__.py"
            folder = folder.parent

    def absolute(self, dotted, path, names=()):
        """The files ``import dotted`` (``from dotted import names``) runs from
        ``path``: the module, its parent packages, and each name that is a submodule."""
        found = []
        for base in dict.fromkeys(self.bases(path)):
            parts = dotted.split(".")
            for i in range(1, len(parts) + 1):
                hit = self.module(".".join(parts[:i]), base)
                if hit is None:
                    break
                found.append(hit)
            else:
                for name in names:
                    hit = self.module(f"{dotted}.{name}", base)
                    if hit:
                        found.append(hit)
            if found:
                return found
        return found

    def relative(self, level, dotted, path, names=()):
        """The files ``from .{dotted} import names`` runs from ``path``."""
        folder = PurePosixPath(path).parent
        for _ in range(level - 1):
            folder = folder.parent
        base = str(folder)
        found = []
        if dotted:
            parts = dotted.split(".")
            for i in range(1, len(parts) + 1):
                hit = self.module(".".join(parts[:i]), base)
                if hit is None:
                    return found
                found.append(hit)
        for name in names:
            hit = self.module(".".join(filter(None, (dotted, name))), base)
            if hit:
                found.append(hit)
        return found

    def modules(self, text, path):
        """The repository modules that ``text`` names: dotted names under a top-level
        package (their longest prefix that is a module, with its parents), and names
        after ``from`` or ``import`` (code run with ``python -c``)."""
        found = []
        for m in re.finditer(_DOTTED, text):
            parts = m.group().split(".")
            if parts[0] not in self.top:
                continue
            for i in range(len(parts), 0, -1):
                hit = self.absolute(".".join(parts[:i]), path)
                if hit:
                    found += hit
                    break
        for m in _IMPORT_LINE.finditer(text):
            if m.group(1).split(".")[0] in self.top:
                found += self.absolute(m.group(1), path)
        return found

    def files(self, names, path):
        """The tracked files among ``names``: paths relative to the root or to
        ``path``'s folder; a bare file name relative to ``path``'s folder only."""
        here = PurePosixPath(path).parent
        found = []
        for name in names:
            for start in (PurePosixPath(), here) if "/" in name else (here,):
                hit = _normal(start / name)
                if hit in self.tracked:
                    found.append(hit)
        return found

    def documented(self, text, path):
        """The package's modules a docs page makes autodoc import: the package's dotted
        names it holds, and its ``autosummary`` entries under its ``currentmodule``."""
        found = []
        for m in re.finditer(_DOTTED, text):
            if m.group().split(".")[0] == PACKAGE:
                found += self.modules(m.group(), path)
        current = None
        for line in text.splitlines():
            directive = re.match(r"\s*\.\. (?:py:)?currentmodule::\s*(\S+)", line)
            if directive:
                current = directive.group(1)
            elif current and re.fullmatch(r"\s+~?[A-Za-z_][\w.]*\s*", line):
                found += self.modules(f"{current}.{line.strip().lstrip('~')}", path)
        return found

    def edges(self, path):
        """What the tracked file ``path`` leads to: ``(run, read)``, the files it
        imports or runs (followed in turn) and the files it reads (hashed only).

        A Python file: its imports, its parent packages, and from its string constants
        (docstrings aside, which are prose) the modules they name and the paths they
        name (a Python file run, another file read), within the package for a module
        of the package (which, installed, cannot reach the lab). A text file (:data:`TEXT`): the
        package's modules it documents (autodoc imports them) and the files its
        directives include."""
        text = _read(path)
        if not path.endswith(".py"):
            if not path.endswith(TEXT):
                return [], []
            return self.documented(text, path), self.files(_DIRECTIVE.findall(text), path)
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError):
            return [], []  # hashed as it is; its check will fail on it
        run, read = list(self.parents(path)), []
        inside = path.startswith(PACKAGE + "/")
        prose = set()  # the docstrings' ids; ast.walk meets a node before its body
        for node in ast.walk(tree):
            if isinstance(node, _DOCUMENTED) and node.body and isinstance(node.body[0], ast.Expr):
                prose.add(id(node.body[0].value))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    run += self.absolute(alias.name, path)
            elif isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names if a.name != "*"]
                if node.level:
                    run += self.relative(node.level, node.module or "", path, names)
                else:
                    run += self.absolute(node.module, path, names)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in prose
                and len(node.value) < 5000
                and ("." in node.value or "/" in node.value or "import" in node.value)
            ):
                for hit in self.modules(node.value, path) + self.files(
                    _PATH.findall(node.value), path
                ):
                    if inside and not hit.startswith(PACKAGE + "/"):
                        continue  # a message naming the lab: the package cannot run it
                    (run if hit.endswith(".py") else read).append(hit)
        return run, read


def _normal(path):
    """``path`` with ``..`` and ``.`` folded, as a POSIX string ('' outside the root)."""
    parts = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if not parts:
                return ""
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def _read(path):
    try:
        return (ROOT / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _marked(path, marker):
    """Whether the test file ``path`` carries ``pytest.mark.<marker>`` anywhere."""
    text = _read(path)
    if not re.search(rf"\bmark\s*\.\s*{marker}\b", text):
        return False
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return True  # unreadable: count it in
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == marker
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
        for n in ast.walk(tree)
    )


def entry_points(group, tracked):
    """The group's entry points: its marked test files and their ``conftest.py`` files,
    and its hand-listed files (sorted)."""
    spec = GROUPS[group]
    found = set()
    for folder in spec.tests:
        for name in _under(tracked, folder):
            base = PurePosixPath(name).name
            if base.startswith("test_") and base.endswith(".py") and _marked(name, spec.marker):
                found.add(name)
    for path in spec.paths:
        found.update(_under(tracked, path))
    for name in list(found):
        folder = PurePosixPath(name).parent
        while str(folder) != ".":
            if f"{folder}/conftest.py" in tracked:
                found.add(f"{folder}/conftest.py")
            folder = folder.parent
    if "conftest.py" in tracked:
        found.add("conftest.py")
    return sorted(found)


def closure(group, tracked=None):
    """The tracked files the group's check imports, runs or reads (sorted): the
    closure of :func:`entry_points` over :meth:`_Graph.edges`, with :data:`DATA` and
    :data:`COMMON`."""
    tracked = tracked_files() if tracked is None else tracked
    graph = _Graph(tracked)
    run, read = set(), set()
    todo = entry_points(group, tracked)
    while todo:
        path = todo.pop()
        if path in run or path not in tracked:
            continue
        run.add(path)
        more, data = graph.edges(path)
        todo.extend(p for p in more if p not in run)
        read.update(data)
        for folder in DATA.get(path, ()):
            read.update(_under(tracked, folder))
    read.update(p for p in COMMON if p in tracked)
    return sorted(run | read)


def recipe(target):
    """The recipe lines of the Makefile's ``target`` (what its check runs)."""
    lines = _read("Makefile").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{target}:")), None)
    if start is None:
        raise KeyError(f"the Makefile has no target {target!r}")
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        body.append(line)
    return "\n".join(body)


def python_version():
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def digest(group, files=None):
    """SHA-256 of the group's inputs: each file of :func:`closure` (path and bytes), its
    Makefile recipe and the Python version; and how many files."""
    files = closure(group) if files is None else files
    h = hashlib.sha256()
    h.update(f"python {python_version()}\0".encode())
    h.update(f"make {GROUPS[group].target}\0{recipe(GROUPS[group].target)}\0".encode())
    for name in files:
        path = ROOT / name
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"(missing)")
        h.update(b"\0")
    return h.hexdigest(), len(files)


def read_record():
    """The records, {group: record}; an absent file is no record. A file that is not a
    JSON object of objects (a merge's conflict markers) raises ``ValueError``."""
    if not RECORD.is_file():
        return {}
    text = RECORD.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        marker = "; it holds git's conflict markers" if "\n<<<<<<<" in "\n" + text else ""
        raise ValueError(f"{RECORD.relative_to(ROOT)} is not JSON ({error}){marker}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{RECORD.relative_to(ROOT)} is not an object of records")
    return data


def commits_since(commit):
    """The commits on HEAD's history since ``commit``, or None when this clone does not
    hold ``commit`` (a shallow clone, a rewritten history)."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return None
    try:
        _git("cat-file", "-e", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        return None
    return int(_git("rev-list", "--count", f"{commit}..HEAD").strip())


def changed(group):
    """``(True, why)`` when the group must run (its digest differs from its record's,
    it has no record, or the record is due), else ``(False, why)``."""
    seen = read_record().get(group)
    if seen is None:
        return True, f"{group}: no full check recorded in {RECORD.name}"
    now, n = digest(group)
    commit = str(seen.get("commit", "?"))
    where = f"at {commit[:7]}, {seen.get('date', '?')}"
    if seen.get("sha256") != now:
        why = f"{group}: its {n} files differ from those of its last full check ({where})"
        then = str(seen.get("python", "")).split()[1:2]  # "Python 3.12.3 (main, ...)"
        if then and not then[0].startswith(python_version() + "."):
            why += f"; that ran on Python {then[0]}, this is {platform.python_version()}"
        return True, why
    count = commits_since(commit)
    if count is None:
        return True, (
            f"{group}: due: the commit of its last full check ({where}) is not in this "
            "clone's history (a shallow clone?)"
        )
    if count >= DUE_AFTER[group]:
        return True, (
            f"{group}: due: its {n} files are unchanged but its last full check ({where}) "
            f"is {count} commits old (it runs at least every {DUE_AFTER[group]})"
        )
    return False, f"{group}: unchanged since its full check {where} ({count} commits ago)"


def environment():
    """What a record says of where its check passed: Python (``python -VV``), pip,
    the platform, torch's version if installed, the commit and whether the tree held
    uncommitted changes (other than the records)."""
    try:
        pip = metadata.version("pip")
    except metadata.PackageNotFoundError:
        pip = None
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    status = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    dirty = [line[3:] for line in status if line[3:] != str(RECORD.relative_to(ROOT))]
    return {
        "commit": _git("rev-parse", "HEAD").strip(),
        "dirty": bool(dirty),
        "python": f"Python {sys.version}",  # as `python -VV` says it
        "pip": pip,
        "platform": platform.platform(),
        "torch": torch,
    }


def record(group):
    """Record the group's digest and environment in :data:`RECORD` (after its check
    passed). A corrupt record file is replaced, saying so: its groups then run."""
    now, n = digest(group)
    try:
        data = read_record()
    except ValueError as error:
        print(f"{error}: written anew; the other groups' records are dropped", file=sys.stderr)
        data = {}
    data[group] = {
        "sha256": now,
        "files": n,
        "date": datetime.date.today().isoformat(),
        **environment(),
    }
    RECORD.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    dirty = " (uncommitted changes in the tree)" if data[group]["dirty"] else ""
    return f"{group}: recorded the digest of {n} files in {RECORD.relative_to(ROOT)}{dirty}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("group", choices=sorted(GROUPS))
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--record", action="store_true", help="record the group's digest")
    what.add_argument("--files", action="store_true", help="list the files of its digest")
    args = parser.parse_args(argv)
    if args.record:
        print(record(args.group))
        return 0
    if args.files:
        print("\n".join(closure(args.group)))
        return 0
    try:
        must, why = changed(args.group)
    except Exception as error:  # any failure runs the group: say so, and why
        print(
            f"{args.group}: .ci/changed.py failed ({type(error).__name__}: {error}); "
            "the group must run",
            file=sys.stderr,
        )
        return FAILED
    print(why)
    return RUN if must else SKIP


if __name__ == "__main__":
    sys.exit(main())

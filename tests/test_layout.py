"""The package's layout: no import cycle between its modules, even through lazy imports."""

import ast
import importlib.util
from pathlib import Path

PACKAGE = "braindecode_pars"
#: The package's folder, found without importing (running) it.
ROOT = Path(importlib.util.find_spec(PACKAGE).submodule_search_locations[0]).resolve()


def _module_name(path, root=ROOT):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([PACKAGE, *parts])


def _modules():
    """Every module of the package: name -> (path, is a package ``__init__``)."""
    return {
        _module_name(path): (path, path.name == "__init__.py")
        for path in sorted(ROOT.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _resolve(name, modules):
    """``name`` if it is a module of the package, else the nearest package that is."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module, path, is_package, modules):
    """The package modules that ``module`` imports, at module level or in a function.

    ``from X import a`` depends on ``X.a`` when that is a submodule, else on ``X``
    (whose ``__init__`` defines or re-exports ``a``).
    """
    base = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                source = ".".join(anchor + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{alias.name}" for alias in node.names]
            names = [n if n in modules else source for n in names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules) if name.startswith(PACKAGE) else None
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph():
    modules = _modules()
    return {
        name: _imports(name, path, is_package, modules)
        for name, (path, is_package) in modules.items()
    }


def find_cycle(graph):
    """One cycle of ``graph`` as a list of nodes (first == last), or None."""
    state = {}  # 1: on the current path, 2: done
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_the_graph_is_complete():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    graph = import_graph()
    assert "braindecode_pars.hub" in graph["braindecode_pars"]
    assert "braindecode_pars.hub.folders" in graph["braindecode_pars.pretraining.checkpoints"]
    assert "braindecode_pars.io.windowing" in graph["braindecode_pars.datasets.eegmat"]


def test_no_module_of_the_package_imports_itself_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, "Import cycle: " + " -> ".join(cycle)


def _layer(module):
    """The subpackage or top-level module of the package that ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def layer_graph(graph):
    """``graph`` collapsed to the package's layers (subpackages and top-level modules):
    a layer depends on another when one of its modules imports one of the other's. The
    root ``__init__``, which re-exports every layer, stands outside them."""
    layers = {}
    for module, targets in graph.items():
        if module == PACKAGE:
            continue
        own = _layer(module)
        layers.setdefault(own, set()).update(
            _layer(t) for t in targets if t != PACKAGE and _layer(t) != own
        )
    return layers


def test_no_subpackage_or_top_level_module_imports_another_back():
    # the collapse finds a cycle that no two modules make: a.x -> b.y and b.z -> a.w
    modules = {f"{PACKAGE}.a.x": {f"{PACKAGE}.b.y"}, f"{PACKAGE}.b.z": {f"{PACKAGE}.a.w"}}
    assert find_cycle(modules) is None
    assert find_cycle(layer_graph(modules)) in (
        [f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.a"],
        [f"{PACKAGE}.b", f"{PACKAGE}.a", f"{PACKAGE}.b"],
    )
    layers = layer_graph(import_graph())
    assert f"{PACKAGE}.features" in layers[f"{PACKAGE}.estimators"]  # the graph is complete
    assert f"{PACKAGE}.io" in layers[f"{PACKAGE}.features"]
    cycle = find_cycle(layers)
    assert cycle is None, "Import cycle between layers: " + " -> ".join(cycle)


def test_the_hub_does_not_import_pretraining():
    assert not any(m.startswith("braindecode_pars.pretraining") for m in _closure("hub"))


def _closure(name):
    graph = import_graph()
    seen, todo = set(), [f"{PACKAGE}.{name}"]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_dependencies_are_ranges_that_hold_the_tested_set_of_constraints_txt():
    """pyproject declares ranges (installable beside a cluster's torch); constraints.txt
    pins the tested set, torch and torchaudio of one release, inside those ranges."""
    import tomllib
    from packaging.requirements import Requirement

    root = Path(__file__).parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            pins[req.name.lower().replace("_", "-")] = next(iter(req.specifier)).version
    for text in declared:
        req = Requirement(text)
        assert not any(spec.operator == "==" for spec in req.specifier), text
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name]), f"{pins[name]} is outside {text}"
    assert pins["torch"].split("+")[0] == pins["torchaudio"].split("+")[0]


def _literal_lists_of(names, path):
    """Line numbers of the tuples, lists, sets and dict keys in ``path`` that name three or
    more of ``names``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [key for key in node.keys if key is not None]
        else:
            continue
        strings = {i.value for i in items if isinstance(getattr(i, "value", None), str)}
        if len(strings & set(names)) >= 3:
            found.append(node.lineno)
    return found


def test_the_encoder_settings_are_listed_once_in_models_encoder_config(tmp_path):
    from braindecode_pars.models.encoder_config import PatchEncoderConfig

    fields = PatchEncoderConfig.fields()
    # the finder finds a list
    sample = tmp_path / "sample.py"
    sample.write_text('KEYS = ("emb_dim", "depth", "n_heads")\nSIZE = {"emb_dim": 1, "depth": 2}\n')
    assert _literal_lists_of(fields, sample) == [1]
    config = ROOT / "models" / "encoder_config.py"
    lists = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(ROOT.rglob("*.py"))
        if path != config and (lines := _literal_lists_of(fields, path))
    }
    assert lists == {}


#: The one list the pretraining settings may share their names with: a pretext model's
#: record of the settings it was built with (constructor argument -> attribute), which
#: covers every model's own settings (decoders, losses), not a run's.
_PRETEXT_RECORD = ROOT / "models" / "pretext" / "base.py"


def test_the_pretraining_settings_are_listed_once_in_pretraining_config():
    from braindecode_pars.pretraining.config import PretrainConfig

    fields = PretrainConfig.fields()
    config = ROOT / "pretraining" / "config.py"
    lists = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(ROOT.rglob("*.py"))
        if path not in (config, _PRETEXT_RECORD) and (lines := _literal_lists_of(fields, path))
    }
    assert lists == {}
    # the paper's optimisation is written once, in PAPER: no other module of the package
    # spells the paper's learning rate and batch size together
    paper = [
        str(path.relative_to(ROOT))
        for path in sorted(ROOT.rglob("*.py"))
        if path != config and "lr=1e-4, batch_size=512" in path.read_text()
    ]
    assert paper == []


#: The package's layers, lowest first: a module may import from its own layer or a lower
#: one, never a higher one (docs/architecture.rst says what each holds). Layers on one
#: line do not import each other.
LAYERS = [
    ("_util", "_jobs", "weights"),
    ("models",),
    ("hub",),
    ("io",),
    ("store", "datasets"),
    ("pretraining",),
    ("features",),
    ("estimators",),
    ("metrics", "viz"),
    ("demo", "moabb", "oeb"),
    ("cli",),
]


def _rank(layer):
    name = layer.removeprefix(f"{PACKAGE}.")
    return next(i for i, group in enumerate(LAYERS) if name in group)


def test_layout_count_import_cycles_every_arrow_points_down_the_layers():
    layers = layer_graph(import_graph())
    assert {_layer(m).removeprefix(f"{PACKAGE}.") for m in layers} == {
        name for group in LAYERS for name in group
    }  # every layer is ranked
    up = sorted(
        f"{a} -> {b}" for a, targets in layers.items() for b in targets if _rank(b) >= _rank(a)
    )
    assert up == []


def test_layout_count_shadowed_modules_no_module_is_shadowed_by_a_name_of_its_package():
    """``import braindecode_pars.x.y as m`` gives the module ``y``: no name that the package
    ``x`` binds (a function re-exported under the module's name, say) hides it."""
    import importlib
    import pkgutil
    import types

    import braindecode_pars

    # the finder finds a shadowed module
    fake = types.ModuleType("pkg")
    fake.run = types.ModuleType("pkg.run")
    fake.pretrain = lambda: None  # a function named as the module pkg.pretrain
    shadowed = [n for n, m in [("run", fake.run)] if getattr(fake, n) is not m]
    assert shadowed == [] and not isinstance(fake.pretrain, types.ModuleType)

    found = []
    for info in pkgutil.walk_packages(braindecode_pars.__path__, f"{PACKAGE}."):
        if info.name.endswith("__main__"):  # running it is what importing it does
            continue
        module = importlib.import_module(info.name)
        parent, _, leaf = info.name.rpartition(".")
        if getattr(importlib.import_module(parent), leaf, None) is not module:
            found.append(info.name)
    assert len(found) == 0, found


def public_names():
    """Every name in the ``__all__`` of the package's subpackages, by subpackage."""
    import importlib

    names = {}
    for init in sorted(ROOT.glob("*/__init__.py")):
        name = init.parent.name
        if name.startswith("_"):
            continue
        names[name] = list(getattr(importlib.import_module(f"{PACKAGE}.{name}"), "__all__", []))
    return names


def test_layout_count_public_names_at_most_60_in_the_subpackages():
    names = public_names()
    assert "write_window_store" in names["store"]  # found
    total = sum(len(v) for v in names.values())
    assert total <= 60, names
    import importlib

    constants = [
        f"{package}.{n}"
        for package, listed in names.items()
        for n in listed
        if n.isupper() and not callable(getattr(importlib.import_module(f"{PACKAGE}.{package}"), n))
    ]
    assert constants == ["hub.DEFAULT_ENCODER"]  # dataset constants stay module attributes


def cli_flags():
    """The command line's flags (``--help`` aside), by command."""
    import argparse

    from braindecode_pars.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        command: [
            o
            for a in parser._actions
            if not isinstance(a, argparse._HelpAction)
            for o in a.option_strings
            if o.startswith("--")
        ]
        for command, parser in sub.choices.items()
    }


def test_layout_count_cli_flags_at_most_41():
    """The redesign's 40, and ``store --subject-from`` (what groups recordings into
    people; a header's patient code only on request)."""
    flags = cli_flags()
    assert set(flags) == {"store", "pretrain", "demo", "export"}
    assert "--out" in flags["store"]  # found
    assert sum(len(v) for v in flags.values()) <= 41, {k: len(v) for k, v in flags.items()}


def _private(module, names=()):
    """Whether an import of ``names`` from ``module`` reaches a private library name."""
    if not module.startswith(PACKAGE):
        return False
    parts = module.split(".")[1:] + [n for n in names if n != "__version__"]
    return any(p.startswith("_") for p in parts)


def private_imports(path):
    """The private library names that the Python file ``path`` imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [a.name for a in node.names]
            if _private(node.module, names):
                found.append(f"{node.module}: {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if _private(a.name)]
    return found


TESTS = Path(__file__).parent


def test_layout_count_test_private_imports_at_most_5_files_outside_tests_internals(tmp_path):
    sample = tmp_path / "t.py"
    sample.write_text(
        f"from {PACKAGE}._jobs import lock\nfrom {PACKAGE}.io.windows import _read\n"
        f"import {PACKAGE}.pretraining._split\nfrom {PACKAGE} import __version__\n"
    )
    assert len(private_imports(sample)) == 3  # the finder finds them
    files = {
        str(p.relative_to(TESTS)): found
        for p in sorted(TESTS.rglob("*.py"))
        if "internals" not in p.relative_to(TESTS).parts and (found := private_imports(p))
    }
    assert len(files) <= 5, files


def atomic_writes(path):
    """Line numbers of the renames over a file in ``path``: ``os.replace``, ``os.rename``,
    ``shutil.move``, and ``.replace(target)`` or ``.rename(target)`` called on a temporary
    path (its expression names a tmp or temp file), each the end of an atomic write."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func, receiver = node.func.attr, node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in ("os", "shutil"):
            if func in ("replace", "rename", "move"):
                found.append(node.lineno)
        elif func in ("replace", "rename") and len(node.args) == 1 and not node.keywords:
            if any(word in ast.unparse(receiver).lower() for word in ("tmp", "temp")):
                found.append(node.lineno)
    return found


def test_layout_count_atomic_writes_none_outside_the_one_helper(tmp_path):
    sample = tmp_path / "t.py"
    sample.write_text(
        "import os\nos.replace(tmp, path)\npath.with_suffix('.tmp').rename(p)\n"
        "dataclasses.replace(config, lr=1)\nraw.annotations.rename(names)\n"
    )
    assert atomic_writes(sample) == [2, 3]  # the finder finds them, and only them
    helper = ROOT / "_util" / "atomic.py"
    assert helper.exists()
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted(ROOT.rglob("*.py"))
        if p != helper and (lines := atomic_writes(p))
    }
    assert found == {}


def test_layout_count_stop_signals_one_class_of_that_name():
    found = [
        str(p.relative_to(ROOT))
        for p in sorted(ROOT.rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ClassDef) and node.name == "StopSignals"
    ]
    assert len(found) <= 1, found


# --- Who reaches what is private (issue 80) -------------------------------------------
#
# What users may rely on is another rule, the ``__all__``s and the API pages
# (tests/test_docs.py, ``-k public_rule``); this one is the package's own. A
# ``_``-prefixed segment of a path is private to the package that holds it:
# ``io/_inputs.py`` and ``io.windows._labels_of`` to ``io``, ``models.pair._x`` to
# ``models``; ``_util`` and ``_jobs``, held by the root, are the package's shared private
# helpers, open to every layer.

#: The layers every module may import private names from: the package's own helpers.
SHARED = ("_util", "_jobs")


#: Public methods of a named tuple, named with a leading ``_`` not to clash with fields.
NAMEDTUPLE_METHODS = ("_replace", "_asdict", "_fields", "_make", "_field_defaults")


def _is_private(name):
    if name in NAMEDTUPLE_METHODS:
        return False
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _source_of(node, base):
    """The absolute module an ``ImportFrom`` reads from, relative imports resolved from
    ``base`` (the package the importing module is in)."""
    if not node.level:
        return node.module or ""
    anchor = base.split(".")
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _owner(parts):
    """The package that owns the first ``_``-prefixed segment of ``parts`` (a dotted
    path inside the package, as a list), or None when no segment is private."""
    for i, part in enumerate(parts):
        if _is_private(part):
            return parts[:i]
    return None


def _reaches_private(importer, target):
    """Whether the module ``importer`` reaching ``target`` (a dotted path in the package)
    crosses into another subpackage's private names."""
    parts = target.split(".")[1:]
    owner = _owner(parts)
    if owner is None or (not owner and parts[0] in SHARED):
        return False
    # a private name of a module is its package's: the owner is the first segment, the
    # layer; ``_util``/``_jobs`` segments inside a layer stay that layer's
    layer = parts[0] if parts else ""
    return _layer(importer) != f"{PACKAGE}.{layer}"


def cross_package_private_imports(root=ROOT):
    """``module: what`` for each import of a private name of another subpackage."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join([PACKAGE, *parts])
        base = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                source = _source_of(node, base)
                targets = [f"{source}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.startswith(f"{PACKAGE}.") and _reaches_private(module, target):
                    found.append(f"{module}: {target}")
    return found


def test_layout_count_cross_package_private_imports_none(tmp_path):
    sample = tmp_path / "pkg"
    for folder in ("a", "b", "_util"):
        (sample / folder).mkdir(parents=True)
    (sample / "a" / "m.py").write_text(
        f"from {PACKAGE}.b.n import _x, y\nfrom ..b import _n\nfrom .k import _z\n"
        f"from {PACKAGE}._util.s import t\nfrom {PACKAGE}.b import __version__\n"
    )
    assert cross_package_private_imports(sample) == [
        f"{PACKAGE}.a.m: {PACKAGE}.b.n._x",
        f"{PACKAGE}.a.m: {PACKAGE}.b._n",
    ]  # the finder finds them, relative imports resolved, and only them
    assert cross_package_private_imports() == []  # 43 before issue 80


def _package_bindings(tree, base):
    """Names a file binds to the package's modules and objects by its imports."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom):
            source = _source_of(node, base)
            bound.update({a.asname or a.name: f"{source}.{a.name}" for a in node.names})
    return {name: path for name, path in bound.items() if path.startswith(f"{PACKAGE}.")}


def _private_names(paths, attributes=True):
    """The private names ``paths`` define: functions, classes, assignments, and unless
    ``attributes`` is false, attributes assigned (``self._rng = ...``)."""
    names = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found = node.name
            elif not attributes and isinstance(node, ast.Attribute):
                continue
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                found = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found = node.id
            else:
                continue
            if _is_private(found):
                names.add(found)
    return names


def private_attributes(source, foreign, base="", reaches=lambda target: True):
    """``(line, reach)`` for each private attribute ``source`` reaches at run time:
    ``x._name``, ``setattr(x, "_name", ...)`` (and ``getattr``, ``monkeypatch.setattr``),
    a call that patches by keyword (``patch(module, _name=...)``), and the same in code
    held in a string (a script run in a subprocess). Counted when ``x`` is bound to an
    import of the package (and ``reaches`` its path), or ``_name`` is one of ``foreign``,
    private names the package defines and the scanned code does not; ``self`` and
    ``cls`` aside."""
    tree = ast.parse(source)
    bound = _package_bindings(tree, base)
    found = []

    def count(line, receiver, name):
        if not _is_private(name) or receiver in ("self", "cls"):
            return
        root = receiver.split(".")[0]
        if not receiver.replace(".", "").replace("_", "").isalnum():  # a call's result...
            root = None  # ...is no module: only its name can tell
        if root in bound:
            target = f"{bound[root]}{receiver[len(root) :]}.{name}"
            if reaches(target):
                found.append((line, f"{receiver}.{name}"))
        elif root and receiver.startswith(f"{PACKAGE}."):
            if reaches(f"{receiver}.{name}"):
                found.append((line, f"{receiver}.{name}"))
        elif name in foreign:
            found.append((line, f"{receiver}.{name}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            count(node.lineno, ast.unparse(node.value), node.attr)
        elif isinstance(node, ast.Call) and node.args:
            first = ast.unparse(node.args[0])
            func = ast.unparse(node.func)
            second = node.args[1] if len(node.args) > 1 else None
            if func.endswith(("setattr", "getattr", "delattr", "hasattr")) and isinstance(
                getattr(second, "value", None), str
            ):
                count(node.lineno, first, second.value)
            if first.split(".")[0] in bound:
                for keyword in node.keywords:
                    if keyword.arg:
                        count(node.lineno, first, keyword.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if f"import {PACKAGE}" in node.value or f"from {PACKAGE}" in node.value:
                try:
                    inner = private_attributes(node.value, foreign, base, reaches)
                except SyntaxError:
                    continue
                found += [(node.lineno, reach) for _, reach in inner]
    return found


def _package_private_attributes():
    """``path:line reach`` for each private attribute of another subpackage that a module
    of the package reaches (``_util`` and ``_jobs`` are shared)."""
    by_layer = {}
    for path in sorted(ROOT.rglob("*.py")):
        by_layer.setdefault(path.relative_to(ROOT).parts[0].removesuffix(".py"), []).append(path)
    names = {layer: _private_names(paths) for layer, paths in by_layer.items()}
    found = []
    for layer, paths in by_layer.items():
        if layer in SHARED:
            continue
        foreign = set().union(*(v for k, v in names.items() if k != layer and k not in SHARED))
        foreign -= names[layer]
        for path in paths:
            module = _module_name(path)
            base = module if path.name == "__init__.py" else module.rpartition(".")[0]
            found += [
                f"{path.relative_to(ROOT)}:{line} {reach}"
                for line, reach in private_attributes(
                    path.read_text(), foreign, base, lambda t, m=module: _reaches_private(m, t)
                )
            ]
    return found


def test_layout_count_private_attributes_of_another_subpackage_none_in_the_package():
    sample = (
        f"from {PACKAGE}.io import windows\nimport {PACKAGE}.store.write as write\n"
        "windows._labels_of(y)\nwrite._finish_step = f\nsetattr(windows, '_x', 1)\n"
        "patch(windows, _read=f)\nview._rng = None\nself._rng = None\nwindows.read_windows\n"
        f"CODE = 'from {PACKAGE}.store import write\\nwrite._finish_step = f'\n"
    )
    assert sorted(line for line, _ in private_attributes(sample, {"_rng"})) == [3, 4, 5, 6, 7, 10]
    assert _package_private_attributes() == []  # 1 before issue 80


def test_layout_count_private_attributes_in_tests_outside_tests_internals():
    files = [
        p for p in sorted(TESTS.rglob("*.py")) if "internals" not in p.relative_to(TESTS).parts
    ]
    foreign = _private_names(sorted(ROOT.rglob("*.py"))) - _private_names(files, False)
    found = {
        str(p.relative_to(TESTS)): reaches
        for p in files
        if (reaches := private_attributes(p.read_text(), foreign))
    }
    assert sum(map(len, found.values())) <= MAX_TEST_PRIVATE_ATTRIBUTES, found


#: Private attributes of the package that tests outside ``tests/internals/`` reach (45
#: before issue 80, 34 after its first steps): a test that needs one lives in
#: ``tests/internals/``.
MAX_TEST_PRIVATE_ATTRIBUTES = 0

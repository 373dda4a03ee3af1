"""The package's layout: no import cycle between its modules, even through lazy imports."""

import ast
import importlib.util
from pathlib import Path

PACKAGE = "braindecode_pars"
#: The package's folder, found without importing (running) it.
ROOT = Path(importlib.util.find_spec(PACKAGE).submodule_search_locations[0]).resolve()


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
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
    assert "braindecode_pars.hub" in graph["braindecode_pars.training.checkpoints"]
    assert "braindecode_pars.datasets.windowing" in graph["braindecode_pars.datasets.eegmat"]


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
    assert f"{PACKAGE}.probe" in layers[f"{PACKAGE}.estimators"]  # the graph is complete
    assert f"{PACKAGE}.datasets" in layers[f"{PACKAGE}.probe"]
    cycle = find_cycle(layers)
    assert cycle is None, "Import cycle between layers: " + " -> ".join(cycle)


def test_the_hub_does_not_import_training():
    assert not any(m.startswith("braindecode_pars.training") for m in _closure("hub"))


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


#: The layers whose modules are kept to one idea each, at most 500 lines.
_SIZED = ("models", "training", "hub")


def _sized_modules():
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if path.relative_to(ROOT).parts[0].removesuffix(".py") in _SIZED
    ]


def test_model_training_and_hub_modules_hold_at_most_500_lines():
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in _sized_modules()}
    assert Path("training/pretrain.py") in sizes and Path("hub.py") in sizes  # found
    assert {str(p): n for p, n in sizes.items() if n > 500} == {}


def test_no_module_of_the_package_holds_more_than_500_lines():
    sizes = {p.relative_to(ROOT): len(p.read_text().splitlines()) for p in ROOT.rglob("*.py")}
    assert Path("estimators/finetuner.py") in sizes  # found
    assert {str(p): n for p, n in sizes.items() if n > 500} == {}


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
    from braindecode_pars.models import PatchEncoderConfig

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
_PRETEXT_RECORD = ROOT / "models" / "pretext.py"


def test_the_pretraining_settings_are_listed_once_in_training_config():
    from braindecode_pars.training.config import PretrainConfig

    fields = PretrainConfig.fields()
    config = ROOT / "training" / "config.py"
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


def test_the_benchmarks_import_no_private_name_of_the_demo():
    """The benchmarks use the demo's public names (``braindecode_pars.demo``), so the
    lab code does not pin the package's private API there; the finder sees a private one."""

    def private_imports(source):
        found = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                f"{PACKAGE}.demo"
            ):
                found += [a.name for a in node.names if a.name.startswith("_")]
                found += [node.module] if "._" in node.module else []
        return found

    assert private_imports(f"from {PACKAGE}.demo.low_label import _fit_predict") == ["_fit_predict"]
    benchmarks = Path(__file__).parents[1] / "benchmarks"
    scripts = sorted(benchmarks.rglob("*.py"))
    assert benchmarks / "lib" / "protocols.py" in scripts  # found
    found = {str(p.relative_to(benchmarks)): private_imports(p.read_text()) for p in scripts}
    assert {name: names for name, names in found.items() if names} == {}

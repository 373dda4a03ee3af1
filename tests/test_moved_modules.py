"""Modules that moved (issue 80) still load what was saved under their old paths: a
pickled estimator names the module of each class it holds, and a model card written by
``export`` before the move imports ``load_pretext_model`` from ``hub.io``."""

import importlib
import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import braindecode_pars  # noqa: F401 (installs the old paths)

#: Old path -> new path under ``braindecode_pars.``, written out here rather than read
#: from the package.
MOVED = [
    ("hub.io", "hub.folders"),
    ("io.sklearn", "io.estimator_inputs"),
    ("features.transformers", "features.blocks"),
    ("models.pair.attention", "models.pair.tables"),
    ("io.resample", "io._resample"),
    ("pretraining.run", "pretraining._run"),
    ("features.baselines", "features._baselines"),
    ("io.labelled", "io._labelled"),
    ("pretraining.views", "pretraining._views"),
]


@pytest.mark.parametrize(("old", "new"), MOVED, ids=[old for old, _ in MOVED])
def test_an_old_path_imports_the_new_module_and_says_where_it_went(old, new):
    old, new = f"braindecode_pars.{old}", f"braindecode_pars.{new}"
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"'{old}' moved to '{new}'"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the module keeps its own spec
    assert importlib.util.find_spec(new).name == new


def test_a_pickle_that_names_an_old_module_loads_the_same_class():
    from braindecode_pars.features import BandPowerFeatures

    data = pickle.dumps(BandPowerFeatures(sfreq=100.0, bands=[("theta", 4.0, 8.0)]), protocol=0)
    old = data.replace(
        b"braindecode_pars.features.blocks", b"braindecode_pars.features.transformers"
    )
    assert old != data  # the pickle names the module, now under its old path
    sys.modules.pop("braindecode_pars.features.transformers", None)
    with pytest.warns(DeprecationWarning, match="features.transformers"):
        loaded = pickle.loads(old)
    assert (
        type(loaded) is BandPowerFeatures
        and loaded.bands == [("theta", 4.0, 8.0)]
        and loaded.sfreq == 100.0
    )


def test_a_pickled_estimator_names_its_own_class_not_the_input_helpers_it_inherits():
    """The input checks and mixins moved out of ``io.estimator_inputs`` (issue 80)
    without an old path to keep: a pickle names an object's class, not its bases."""
    from braindecode_pars import PARSClassifier, PARSProbe
    from braindecode_pars.features import BandPowerFeatures

    for estimator in (PARSProbe(), PARSClassifier(), BandPowerFeatures(sfreq=100.0)):
        data = pickle.dumps(estimator, protocol=0)
        assert b"_inputs" not in data and b"estimator_inputs" not in data, type(estimator)
        assert type(pickle.loads(data)) is type(estimator)


def test_a_path_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("braindecode_pars.hub.nothing")


def test_an_old_cards_import_runs_in_a_fresh_process():
    code = (
        "from braindecode_pars.hub.io import load_pretext_model\n"
        "print(load_pretext_model.__module__)"
    )
    env = {"PYTHONPATH": str(Path(__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "braindecode_pars.hub.folders"


def test_low_label_results_recorded_before_a_move_are_added_to_not_refused(tmp_path):
    """A low-label settings file names each method's classes by module path; one
    written before a module moved still matches the same settings today."""
    import json

    from braindecode_pars.demo.low_label import check_settings, describe, settings_path
    from braindecode_pars.features import band_power_pipeline

    out = tmp_path / "results.csv"
    common = {"subjects": [1, 2]}
    methods = {"floor": describe(band_power_pipeline())}
    text = json.dumps(methods)
    assert "braindecode_pars.features.blocks.BandPowerFeatures" in text  # described by path
    old = text.replace("features.blocks", "features.transformers")
    old = old.replace("io.estimator_inputs", "io.sklearn")
    assert old != text  # the file names the old paths
    settings_path(out).write_text(json.dumps({**common, "methods": json.loads(old)}))
    check_settings(out, common, methods, done=["floor"])  # the same settings: no error
    recorded = json.loads(settings_path(out).read_text())
    assert "features.transformers" not in json.dumps(recorded)  # and recorded as today
    other = {"floor": describe(band_power_pipeline(C=0.5))}
    with pytest.raises(ValueError, match="other settings.*method 'floor'"):
        check_settings(out, common, other, done=["floor"])  # a real change is still refused

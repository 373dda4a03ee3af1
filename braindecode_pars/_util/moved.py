"""Modules that moved, still importable under their old paths.

What was saved before a module moved may name its old path: a pickled estimator
(``joblib.dump``) names the module of each class it holds, such as the probe's
``EncoderFeatures``, and a model card written by ``export`` shows the import of
``load_pretext_model`` from ``braindecode_pars.hub.io``. :data:`MOVED` maps each old
path to the module it is now; :class:`MovedModules`, put on ``sys.meta_path`` when the
package is imported, answers an import of an old path with the module itself (the same
object, so ``pickle`` finds the same classes), with a ``DeprecationWarning`` that names
the new path. A description recorded as JSON reads as today through
:func:`current_paths` (the low-label protocol's settings file).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Old module path -> the module it is now (issue 80: names that say what a thing is).
MOVED = {
    "braindecode_pars.hub.io": "braindecode_pars.hub.folders",
    "braindecode_pars.io.sklearn": "braindecode_pars.io.estimator_inputs",
    "braindecode_pars.features.transformers": "braindecode_pars.features.blocks",
    "braindecode_pars.models.pair.attention": "braindecode_pars.models.pair.tables",
    "braindecode_pars.io.resample": "braindecode_pars.io._resample",
    "braindecode_pars.pretraining.run": "braindecode_pars.pretraining._run",
    "braindecode_pars.features.baselines": "braindecode_pars.features._baselines",
    "braindecode_pars.io.labelled": "braindecode_pars.io._labelled",
    "braindecode_pars.pretraining.views": "braindecode_pars.pretraining._views",
}


def current_paths(obj):
    """``obj`` (JSON: dicts, lists, strings...) with each dotted path under an old module
    path of :data:`MOVED` rewritten to its new one: what a description recorded before
    a move (a class's ``module.qualname``) reads as today."""
    if isinstance(obj, str):
        for old, new in MOVED.items():
            if obj == old or obj.startswith(old + "."):
                return new + obj[len(old) :]
        return obj
    if isinstance(obj, list):
        return [current_paths(v) for v in obj]
    if isinstance(obj, dict):
        return {current_paths(k): current_paths(v) for k, v in obj.items()}
    return obj


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each old path of :data:`MOVED` and loads it as the module it is now."""

    def __init__(self, moved):
        self.moved = dict(moved)
        self._specs = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = self.moved[spec.name]
        warnings.warn(
            f"The module '{spec.name}' moved to '{new}'; import it from there (or from its "
            "package). The old path will be removed in a future release.",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__  # the import machinery replaces it
        return module

    def exec_module(self, module):
        # the module ran when it was imported under its own name; give it its spec back
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)


def install():
    """Put a :class:`MovedModules` finder of :data:`MOVED` on ``sys.meta_path``, once."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules(MOVED))

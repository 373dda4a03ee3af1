"""The low-label protocol: k labelled subjects, fixed test subjects, many draws.

For each ``k`` and each seed, ``k`` subjects are drawn from a pool of labelled
subjects (each seed its own draw), every method is fitted on their windows and
scored on the windows of fixed test subjects that no fit ever trains on.
Rows are appended to a CSV file as they finish, so an interrupted run resumes
where it stopped. Beside the CSV, ``<name>.settings.json`` records what produced its
rows (each method's parameters, the subjects, a fingerprint of the data), so that a
run with other settings is refused instead of being passed off as the old rows.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score
from sklearn.utils.validation import has_fit_parameter

from braindecode_pars._util.atomic import atomic_write, write_atomic
from braindecode_pars._util.checks import check_int
from braindecode_pars._util.progress import progress as progress_bar
from braindecode_pars.estimators.classifier import PARSClassifier
from braindecode_pars.estimators.finetuner import PARSFineTuner
from braindecode_pars.estimators.pretrainer import PARSPretrainer
from braindecode_pars.models.encoder_config import (
    ENCODER_SIZES,
    NORMALIZATION_SETTINGS,
    PatchEncoderConfig,
)

logger = logging.getLogger(__name__)

#: Columns of the results table.
_COLUMNS = ("method", "k", "seed", "subjects", "balanced_accuracy", "kappa", "seconds")


def _fit_predict(clf, X, y, groups, train, test):
    """Fit ``clf`` on the ``train`` windows and predict the ``test`` ones, handing each
    side its ``groups`` where the estimator takes them (``PARSFineTuner``: the
    validation split in ``fit``; the aligned probe, ``PARSProbe(align="groups")``,
    aligns each group of both sides on its own windows)."""
    fit_kwargs = {"groups": groups[train]} if has_fit_parameter(clf, "groups") else {}
    clf.fit(X[train], y[train], **fit_kwargs)
    if "groups" in inspect.signature(clf.predict).parameters:
        return clf.predict(X[test], groups=groups[test])
    return clf.predict(X[test])


def scratch_classifier(size=None, *, sfreq=None, random_state=None, verbose=0, **head):
    """A new encoder of ``size`` under the neural head, every weight trained (the paper's
    supervised baseline).

    Parameters
    ----------
    size : dict | PatchEncoderConfig | None
        The new encoder's settings (``emb_dim``, ``depth``, ...; those left out: the
        small size's, ``ENCODER_SIZES["small"]``); None: the small size.
    sfreq, random_state, verbose
        The classifier's; ``verbose`` also the head's unless ``head`` sets it.
    **head
        :class:`~braindecode_pars.PARSFineTuner` parameters (``max_epochs``, ``lr``,
        ``strategy`` ...).

    Returns
    -------
    clf : PARSClassifier
        The small size: ``PARSClassifier(encoder=None, head=PARSFineTuner(encoder=None))``,
        whose head draws the new encoder's weights and then its own from the seed, as
        the classifier trained from scratch always drew them (the same predictions as
        ``PARSFineTuner`` alone). Another size:
        ``PARSClassifier(encoder=PARSPretrainer(max_epochs=0, **size), head=...)``, whose
        encoder stage draws the encoder from the seed and the head its own weights from
        the seed afresh (other draws than the same size drew before the estimators were
        composed).
    """
    head = {"verbose": verbose, **head}
    small = PatchEncoderConfig(**ENCODER_SIZES["small"])
    given = size.asdict() if isinstance(size, PatchEncoderConfig) else dict(size or {})
    config = PatchEncoderConfig.of({**small.asdict(), **given})
    encoder = None
    if config != small:
        size = {k: v for k, v in config.asdict().items() if k not in NORMALIZATION_SETTINGS}
        encoder = PARSPretrainer(max_epochs=0, **size, verbose=0)
    return PARSClassifier(
        encoder=encoder,
        head=PARSFineTuner(encoder=None, **head),
        sfreq=sfreq,
        random_state=random_state,
        verbose=verbose,
    )


def _neural_head(clf):
    """The :class:`~braindecode_pars.PARSFineTuner` that ``clf`` trains (itself, or the
    head of a :class:`~braindecode_pars.PARSClassifier`), None for any other classifier
    (a probe, a floor): the head whose best epoch a validation set can choose."""
    if isinstance(clf, PARSClassifier):
        clf = getattr(clf, "head_", clf.head)
    return clf if isinstance(clf, PARSFineTuner) else None


def _training_history(clf):
    """The epochs a fitted classifier trained (skorch's ``history_`` of its neural head),
    None where it trained none (a probe, a floor)."""
    head = _neural_head(clf)
    return None if head is None else getattr(head, "history_", None)


def draw_subjects(pool, k, seed, spread=False):
    """``k`` subjects of ``pool`` for draw ``seed`` (the same seed, the same subjects).

    ``spread=False``: an independent random draw per seed. ``spread=True``: draw
    ``seed`` takes the ``seed``-th block of ``k`` subjects of one fixed random order of
    the pool (wrapping around), so that draws overlap as little as the pool allows:
    with a small pool, independent draws keep returning the same subjects.
    """
    pool = sorted(pool)
    if k > len(pool):
        raise ValueError(f"'k'={k} labelled subjects asked for, but the pool holds {len(pool)}.")
    if spread:
        order = np.random.default_rng(0).permutation(pool)
        return sorted(int(order[(seed * k + j) % len(pool)]) for j in range(k))
    rng = np.random.default_rng(seed)
    return sorted(int(s) for s in rng.choice(pool, size=k, replace=False))


def _run_low_label(
    X,
    y,
    subjects,
    methods,
    test_subjects,
    pool_subjects,
    *,
    ks=(1, 2, 4, 8),
    seeds=(0, 1, 2, 3, 4),
    out=None,
    progress=True,
    histories=None,
    spread=False,
):
    """Fit every method on k labelled subjects and score it on the test subjects.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times)
    y : ndarray, shape (n_windows,)
    subjects : ndarray, shape (n_windows,)
        The subject of every window.
    methods : dict of str -> estimator
        scikit-learn classifiers (cloned for every fit; a ``random_state``
        parameter, where there is one, is set to the seed). ``fit`` gets
        ``groups=subjects`` of the training windows when it accepts it.
    test_subjects, pool_subjects : sequence of int
        Disjoint: the subjects scored on, and those labelled subjects are drawn from.
        ``k`` equal to the pool size means all of them: the same subjects for every
        seed, so the spread over seeds is that of the fits alone.
    ks, seeds : sequences of int
    out : str | Path | None
        CSV file the rows are appended to; existing rows are kept and not run again.
        The settings are recorded beside it (:func:`check_settings`): a method whose
        parameters changed under the same name, other subjects or other data raise a
        ``ValueError`` before any fit.
    spread : bool
        How subjects are drawn (see :func:`draw_subjects`).
    histories : dict | None
        If given, the training history of every fitted estimator that trains epochs
        (the ``history_`` of a ``PARSFineTuner``, alone or as the head of a
        ``PARSClassifier``; epochs without their batches) is stored in it under
        ``(method, k, seed)``.

    Returns
    -------
    results : pandas.DataFrame
        One row per method, k and seed: balanced accuracy and Cohen's kappa on the
        test subjects, the subjects drawn, the seconds the fit and scoring took.
    """
    test_subjects, pool_subjects = list(test_subjects), list(pool_subjects)
    overlap = sorted(set(test_subjects) & set(pool_subjects))
    if overlap:
        raise ValueError(f"Subjects {overlap} are both test and labelled subjects.")
    for k in ks:
        check_int("ks", k, 1)
    subjects = np.asarray(subjects)
    test = np.isin(subjects, test_subjects)
    if not test.any():
        raise ValueError("No window belongs to the test subjects.")
    done = pd.DataFrame(columns=list(_COLUMNS))
    if out is not None and Path(out).is_file():
        done = pd.read_csv(out)
    if out is not None:
        check_settings(
            out,
            {
                "test_subjects": sorted(int(s) for s in test_subjects),
                "pool_subjects": sorted(int(s) for s in pool_subjects),
                "spread": bool(spread),
                "data": _data_fingerprint(X, y, subjects),
            },
            {name: describe(est) for name, est in methods.items()},
            done=done["method"].unique(),
        )
    keys = {(r.method, int(r.k), int(r.seed)) for r in done.itertuples()}
    jobs = []
    for k in ks:
        for seed in seeds:
            for name in methods:
                if (name, k, seed) not in keys:
                    jobs.append((k, seed, name))
    rows = done.to_dict("records")
    for k, seed, name in progress_bar(jobs, desc="low-label fits", enabled=progress):
        drawn = draw_subjects(pool_subjects, k, seed, spread)
        train = np.isin(subjects, drawn)
        clf = clone(methods[name])
        if "random_state" in clf.get_params():
            clf.set_params(random_state=seed)
        start = time.perf_counter()
        pred = _fit_predict(clf, X, y, subjects, train, test)
        history = _training_history(clf)
        if histories is not None and len(history or []):
            histories[(name, k, seed)] = [
                {key: v for key, v in row.items() if key != "batches"} for row in history
            ]
        row = {
            "method": name,
            "k": k,
            "seed": seed,
            "subjects": " ".join(map(str, drawn)),
            "balanced_accuracy": balanced_accuracy_score(y[test], pred),
            "kappa": cohen_kappa_score(y[test], pred),
            "seconds": time.perf_counter() - start,
        }
        logger.info(
            "%s, k=%d, seed %d: balanced accuracy %.3f", name, k, seed, row["balanced_accuracy"]
        )
        rows.append(row)
        if out is not None:
            rows = _save_row(out, row, rows)
    return pd.DataFrame(rows, columns=list(_COLUMNS))


def describe(obj):
    """A JSON description of a setting, the same in every process: estimators by their
    class and public parameters (recursively), torch modules by their class and a hash
    of their weights, arrays by a hash, files and folders (a ``Path``, or a string
    with a ``/`` naming one that exists) by their name and a hash of their contents
    (where they lie does not matter), sets sorted, classes and module-level functions
    by their qualified name."""
    import torch

    if isinstance(obj, Path) or (isinstance(obj, str) and "/" in obj and os.path.exists(obj)):
        return _describe_path(Path(obj))
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, list | tuple):
        return [describe(v) for v in obj]
    if isinstance(obj, set | frozenset):  # a set's order changes with the hash seed
        return sorted((describe(v) for v in obj), key=lambda d: json.dumps(d, sort_keys=True))
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in obj.items()}
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType):
        name = getattr(obj, "__qualname__", repr(obj))
        return "<local function>" if "<" in name else f"{obj.__module__}.{name}"
    if isinstance(obj, torch.nn.Module):
        parts = [part for k, v in obj.state_dict().items() for part in (k, _bytes(v))]
        return {"class": describe(type(obj)), "weights": _digest(*parts)}
    if isinstance(obj, np.ndarray | torch.Tensor):
        return {"array": list(obj.shape), "sha1": _digest(_bytes(obj))}
    if hasattr(obj, "get_params"):
        params = {k: v for k, v in obj.get_params(deep=False).items() if not k.startswith("_")}
        return {"class": describe(type(obj)), "params": describe(params)}
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))  # no address: it differs per run


def _describe_path(path):
    """A file or folder by its name and the hash of its contents (where it lies on
    this machine does not matter); a path that does not exist by its name."""
    if not path.exists():
        return str(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    size = sum(file.stat().st_size for file in files)
    if size > 2**30:  # not an encoder: its size stands for its contents
        return {"path": path.name, "bytes": size}
    names = [str(file.relative_to(path) if path.is_dir() else file.name) for file in files]
    parts = [part for name, f in zip(names, files, strict=True) for part in (name, f.read_bytes())]
    return {"path": path.name, "sha1": _digest(*parts)}


def _bytes(array):
    """An array's or tensor's values as bytes (tensors in float32, from any device)."""
    if hasattr(array, "detach"):
        array = array.detach().cpu().float().numpy()
    return np.ascontiguousarray(array).tobytes()


def _digest(*parts):
    """The first 16 hex digits of the SHA-1 of ``parts`` (strings or bytes), in turn."""
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
    return digest.hexdigest()[:16]


def _data_fingerprint(X, y, subjects):
    """A short hash of the windows, labels and subjects of a run."""
    arrays = [np.ascontiguousarray(part) for part in (X, y, subjects)]
    return _digest(*(p for a in arrays for p in (str((a.shape, a.dtype.str)), _bytes(a))))


def settings_path(out):
    """The settings file beside the results CSV ``out``."""
    out = Path(out)
    return out.with_name(out.stem + ".settings.json")


def check_settings(out, common, methods, done=()):
    """Refuse to add to the results ``out`` when its rows came from other settings.

    ``common`` (subjects, data) must equal what the settings file records; each
    method in ``done`` (the methods that have rows in ``out``) must have the
    description recorded for it. The record then takes this run's methods (several
    runs may add methods to one file). A CSV without a settings file (written before
    there were any) is taken as it is.
    """
    path = settings_path(out)
    recorded = json.loads(path.read_text()) if path.is_file() else None

    def same(a, b):  # as JSON text: NaN equals NaN, and key order does not matter
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    if recorded is not None:
        changed = [k for k in common if not same(recorded.get(k), common[k])]
        changed += [
            f"method {name!r}"
            for name, desc in methods.items()
            if name in set(done) & set(recorded.get("methods", {}))
            and not same(recorded["methods"][name], desc)
        ]
        if changed:
            raise ValueError(
                f"The results in 'out'={str(out)!r} were made with other settings "
                f"(these differ: {', '.join(changed)}; recorded in {path}); their rows "
                "would be kept as this run's. Write to another 'out', or delete both "
                "files to start again."
            )
        methods = {**recorded.get("methods", {}), **methods}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({**common, "methods": methods}, indent=1))


def _save_row(out, row, rows):
    """Add ``row`` to what the CSV ``out`` holds now, so rows another run wrote
    since this one started are kept (two runs may add to one file); returns every
    row. Two writes in the same instant can still lose one row, which a resumed
    run refits."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.is_file():
        rows = pd.read_csv(out).to_dict("records") + [row]
    frame = pd.DataFrame(rows, columns=list(_COLUMNS))
    frame = frame.drop_duplicates(["method", "k", "seed"], keep="last")
    with atomic_write(out, newline="") as f:  # a reader never sees half a file
        frame.to_csv(f, index=False)
    return frame.to_dict("records")


def _summarize(results):
    """Mean and standard deviation over seeds per method and k."""
    grouped = results.groupby(["method", "k"], sort=False)
    table = grouped[["balanced_accuracy", "kappa"]].agg(["mean", "std", "count"])
    return table


def _format_summary(results, chance=0.5):
    """The summary as a text table, methods as rows and k as columns."""
    ks = sorted(results["k"].unique())
    names = results["method"].unique()
    width = max([22, *(len(str(name)) + 2 for name in names)])
    head = f"{'method':<{width}}" + "".join(f"{f'k={k}':>15}" for k in ks)
    timed = "seconds" in results
    if timed:
        head += f"{'s per fit':>11}"
    lines = [head, "balanced accuracy, mean ± std over draws" + (", mean seconds" if timed else "")]
    for name in names:
        cells = []
        for k in ks:
            sel = results[(results.method == name) & (results.k == k)]["balanced_accuracy"]
            std = sel.std() if len(sel) > 1 else 0.0
            cells.append(f"{sel.mean():>8.3f}±{std:.3f}" if len(sel) else f"{'-':>14}")
        line = f"{name:<{width}}" + "".join(f"{c:>15}" for c in cells)
        if timed:
            line += f"{results[results.method == name]['seconds'].mean():>11.1f}"
        lines.append(line)
    lines.append(f"chance: balanced accuracy {chance:.3f}")
    return "\n".join(lines)


def _plot_label_efficiency(results, metric="balanced_accuracy", chance=None, ax=None):
    """The paper's Fig. 3 for these results: metric against labelled subjects, ± std."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    for name in results["method"].unique():
        sel = results[results.method == name].groupby("k")[metric]
        mean, std = sel.mean(), sel.std().fillna(0)
        ax.plot(mean.index, mean.values, marker="o", label=name)
        ax.fill_between(mean.index, mean - std, mean + std, alpha=0.2)
    if chance is not None:
        ax.axhline(chance, color="k", lw=0.8, ls="--", label="chance")
    ax.set_xscale("log", base=2)
    ks = sorted(results["k"].unique())
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("labelled subjects")
    ax.set_ylabel(metric.replace("_", " "))
    ax.legend(fontsize=8)
    return ax

"""The paper's experiments as protocols over any recipe (paper section 3, appendix A.4).

- :func:`label_efficiency` (Fig. 3): fine-tune on ``n`` training patients chosen by
  the seed, evaluate on the fixed test patients, for every method, ``n`` and seed;
- :func:`transfer` (Table 1): fine-tune on each dataset's train split, evaluate on its
  test split, mean ± std over seeds, with each dataset's metrics;
- :func:`leave_one_subject_out_protocol` (Fig. 5): per-subject kappa on EESM17;
- :func:`ablation` (Fig. 4): pretrain PARS under each configuration (patches and
  masking ratio, sampling, decoder), fine-tune, evaluate.

A method is a saved encoder (or ``None``: training from scratch). Every protocol
writes one row per finished job to ``results.csv`` at once; run again, it skips the
jobs already there, so an interrupted run resumes. ``run_experiment`` reads the
whole set-up from a configuration (a JSON file for the command line).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from braindecode.datasets import BaseConcatDataset, EEGWindowsDataset
from tqdm.auto import tqdm

from benchmarks.lib.paper_datasets import load_recipe, subject_column, subjects_of
from braindecode_pars._util.checks import check_option
from braindecode_pars._util.seeding import isolated_random_state
from braindecode_pars.datasets.eesm17 import ChannelNoise
from braindecode_pars.demo.low_label import (
    check_settings,
    describe,
    scratch_classifier,
    settings_path,
)
from braindecode_pars.estimators.classifier import PARSClassifier
from braindecode_pars.estimators.finetuner import PARSFineTuner
from braindecode_pars.estimators.pretrainer import PARSPretrainer
from braindecode_pars.estimators.probe import PARSProbe
from braindecode_pars.metrics import scores
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.pretraining import SingleChannelWindows, run_pretraining
from braindecode_pars.store.write import write_window_store

logger = logging.getLogger(__name__)

PROTOCOLS = ("label_efficiency", "transfer", "loso", "ablation")


class ResultsLog:
    """Rows of a protocol in a CSV file, written after every job (atomically).

    ``settings`` (a dict: the methods' encoders, estimator parameters, the data's
    summary; not the key "methods", which the settings file keeps for itself)
    is recorded beside the CSV (``results.settings.json``, see
    :func:`~braindecode_pars.demo.low_label.check_settings`); a log whose
    rows were made with other settings is refused before any job runs, so a rerun
    never takes stale rows for its own.
    """

    def __init__(self, path, key_columns, settings=None):
        self.path = Path(path)
        self.key_columns = list(key_columns)
        self.rows = pd.read_csv(self.path).to_dict("records") if self.path.is_file() else []
        self._done = {self._key(r) for r in self.rows}
        if settings is not None:
            if "methods" in settings:
                raise ValueError("'settings' must not use the key 'methods'; use 'encoders'.")
            if not self.rows:  # no row to protect: a run that failed before its first
                settings_path(self.path).unlink(missing_ok=True)  # row locks nothing
            check_settings(self.path, {k: describe(v) for k, v in settings.items()}, {})

    def _key(self, row):
        return tuple(str(row[k]) for k in self.key_columns)

    def done(self, **key):
        return self._key(key) in self._done

    def add(self, row):
        self.rows.append(row)
        self._done.add(self._key(row))
        tmp = self.path.with_suffix(".tmp")
        pd.DataFrame(self.rows).to_csv(tmp, index=False)
        os.replace(tmp, self.path)

    def frame(self):
        return pd.DataFrame(self.rows)


def _augmentations(spec):
    """Transforms from a configuration.

    ``"standard"`` (a preset of ``PARSFineTuner``), or a mapping of transform names
    to their arguments: ``"channel_noise"`` (:class:`ChannelNoise`) or any class of
    ``braindecode.augmentation``, e.g. ``{"FTSurrogate": {"probability": 0.5}}``.
    """
    import braindecode.augmentation as augmentation

    if spec is None or isinstance(spec, (list, str)):
        return spec
    allowed = {"channel_noise": ChannelNoise}
    allowed.update(
        {
            name: getattr(augmentation, name)
            for name in augmentation.__all__
            if isinstance(getattr(augmentation, name), type)
            and issubclass(getattr(augmentation, name), augmentation.Transform)
            and name not in ("Transform", "IdentityTransform", "Compose")
        }
    )
    for name in spec:
        check_option("augmentation", name, tuple(sorted(allowed)))
    return [allowed[name](**kwargs) for name, kwargs in spec.items()]


#: The values of ``PARSFineTuner(strategy=...)``, which a configuration's ``finetune``
#: takes beside "auto" and "probe" (the fine-tuner checks them again when it fits).
FINETUNE_STRATEGIES = ("full", "frozen", "lp-ft")
#: Keys of a configuration's ``estimator`` that set the probe, and the
#: :class:`~braindecode_pars.PARSProbe` parameters they set.
PROBE_KEYS = {"probe_C": "C", "probe_align": "align", "probe_readout": "readout"}

#: Keys of a configuration's ``estimator`` that only a neural head uses, which the probe
#: refuses (the others, such as ``max_epochs``, are shared by every method of a
#: configuration and left to the neural heads).
NEURAL_ONLY_KEYS = ("crop_seconds", "augmentation", "amplitude")


def _estimator(encoder, seed, params):
    """The classifier of a configuration's fine-tuning settings.

    ``params`` is a flat mapping: ``finetune`` ("auto", the default: the probe over a
    given encoder and full training from scratch; "probe", "full", "frozen", "lp-ft"),
    ``probe_C``, ``probe_align`` and ``probe_readout`` (the probe's ``C``, ``align``
    and ``readout``), the settings of a new encoder (``emb_dim``, ``depth``,
    ``n_heads``, ``ff_dim``, any field of
    :class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`; a given encoder has its
    own),
    ``weight_decay`` (AdamW's), and :class:`~braindecode_pars.PARSFineTuner` parameters
    (``max_epochs``, ``lr``, ``batch_size``, ``crop_seconds``, ``augmentation``,
    ``min_valid_groups``, ``device`` ...), which the probe leaves aside.

    Returns a :class:`~braindecode_pars.PARSProbe` (the probe over ``encoder``), a
    :class:`~braindecode_pars.PARSFineTuner` (a neural head over ``encoder``, or over a
    new small encoder), or a :class:`~braindecode_pars.PARSClassifier` of the two
    stages (a neural head over a given encoder; a new encoder of another size).
    """
    params = dict(params)
    size = {k: params.pop(k) for k in PatchEncoderConfig.fields() if k in params}
    strategy = params.pop("finetune", "auto")
    check_option("finetune", strategy, ("auto", "probe", *FINETUNE_STRATEGIES))
    if strategy == "auto":
        strategy = "full" if encoder is None else "probe"
    probe = {new: params.pop(old) for old, new in PROBE_KEYS.items() if old in params}
    if "weight_decay" in params:
        params["optimizer__weight_decay"] = params.pop("weight_decay")
    if "augmentation" in params:
        params["augmentation"] = _augmentations(params["augmentation"])
    sfreq, verbose = params.pop("sfreq", None), params.pop("verbose", 1)
    if strategy == "probe":
        neural = {k: params[k] for k in NEURAL_ONLY_KEYS if params.get(k)}
        if neural:
            raise ValueError(
                f"{', '.join(f'{k}={v!r}' for k, v in neural.items())}: these train the "
                "neural head, but the configuration fits the probe (finetune='probe', or "
                "'auto' with an encoder), a logistic regression over whole windows. Leave "
                "them out, or set finetune to 'full', 'frozen' or 'lp-ft'."
            )
        PARSFineTuner(**params)  # the keys left to the neural heads, checked
        device = params.get("device", "cpu")
        if encoder is not None:
            return PARSProbe(encoder, sfreq=sfreq, device=device, random_state=seed, **probe)
        return PARSClassifier(  # the probe over a new, randomly initialised encoder
            encoder=PARSPretrainer(max_epochs=0, **size, verbose=0),
            head=PARSProbe(device=device, **probe),
            sfreq=sfreq,
            random_state=seed,
            verbose=verbose,
        )
    given = {old: probe[new] for old, new in PROBE_KEYS.items() if probe.get(new) is not None}
    if given:
        raise ValueError(
            f"{', '.join(f'{k}={v!r}' for k, v in given.items())}: these set the probe, but "
            f"finetune={strategy!r} trains the neural head; leave them out, or set "
            "finetune='probe'."
        )
    head = dict(strategy=strategy, verbose=verbose, **params)
    if encoder is None:
        return scratch_classifier(size, sfreq=sfreq, random_state=seed, **head)
    return PARSClassifier(
        encoder=encoder,
        head=PARSFineTuner(**head),
        sfreq=sfreq,
        random_state=seed,
        verbose=verbose,
    )


def _labels(windows):
    return windows.get_metadata()["target"].to_numpy()


def _keep_classes(windows, classes):
    """The windows whose label is in ``classes`` (None if there are none).

    braindecode's ``split`` selects whole recordings; this keeps single windows, as new
    window datasets over the same recordings with the rows of the kept windows.
    """
    if np.isin(_labels(windows), classes).all():
        return windows
    kept = []
    for ds in windows.datasets:
        mask = np.isin(ds.metadata["target"].to_numpy(), classes)
        if mask.any():
            kept.append(
                EEGWindowsDataset(
                    ds.raw,
                    ds.metadata[mask].reset_index(drop=True),
                    description=ds.description,
                    targets_from=ds.targets_from,
                    last_target_only=ds.last_target_only,
                )
            )
    return BaseConcatDataset(kept) if kept else None


def fit_and_score(encoder, train, test, seed, params, valid=None):
    """Fine-tune from ``encoder`` (None: scratch) and score on ``test``.

    With few training patients a class can be missing from the training windows;
    validation then uses the classes seen in training, and test windows of other
    classes, which no prediction could match, are left out of the scores and
    counted in ``n_test_unseen``.
    """
    return score_windows(fit_on(encoder, train, seed, params, valid), test)


def fit_on(encoder, train, seed, params, valid=None):
    """The classifier of ``params`` (:func:`_estimator`) fitted from ``encoder`` (None:
    scratch) on ``train``.

    ``valid`` picks the best epoch of a neural head, restricted to the classes seen in
    training; the probe (``finetune="probe"``, or "auto" with an encoder) has no epochs
    and fits on ``train`` alone.
    """
    clf = _estimator(encoder, seed, params)
    if not isinstance(getattr(clf, "head", clf), PARSFineTuner):  # the probe: no epochs
        valid = None
    if valid is not None:
        valid = _keep_classes(valid, np.unique(_labels(train)))
    with isolated_random_state(seed, params.get("device")):  # the caller's are kept
        if valid is not None:
            clf.fit(train, X_valid=valid, y_valid=_labels(valid))
        else:
            clf.fit(train)
    return clf


def score_windows(clf, windows):
    """Every metric of a fitted classifier on labelled windows.

    Windows of classes the classifier never saw, which no prediction could match,
    are left out and counted in ``n_test_unseen``.
    """
    seen = _keep_classes(windows, clf.classes_)
    if seen is None:
        raise ValueError("No window belongs to a class the classifier was trained on.")
    codes = np.searchsorted(clf.classes_, _labels(seen))
    result = scores(codes, clf.predict_proba(seen), len(clf.classes_))
    return {**result, "n_test": len(seen), "n_test_unseen": len(windows) - len(seen)}


def _subset(windows, subjects):
    column = subject_column(windows)
    keep = np.flatnonzero(windows.description[column].isin(list(subjects)))
    return windows.split({"keep": keep.tolist()})["keep"]


def _data_summary(windows):
    """What a results log records of its data: the number of windows and the subjects
    of each split (not their samples: data preprocessed otherwise into the same
    windows and subjects passes)."""
    if isinstance(windows, dict):
        return {name: _data_summary(w) for name, w in windows.items()}
    return {"windows": len(windows), "subjects": [str(s) for s in subjects_of(windows)]}


def label_efficiency(split, methods, subject_counts, seeds, params, out):
    """Fig. 3: scores against the number of labelled training patients."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pool = subjects_of(split["train"])
    too_many = [n for n in subject_counts if n > len(pool)]
    if too_many:
        raise ValueError(f"'subject_counts' {too_many} exceed the {len(pool)} training patients.")
    settings = dict(
        encoders=methods, subject_counts=list(subject_counts), params=params,
        data=_data_summary(split),
    )  # fmt: skip
    log = ResultsLog(out / "results.csv", ["method", "n_subjects", "seed"], settings)
    jobs = list(itertools.product(seeds, subject_counts, methods))
    for seed, n, method in tqdm(jobs, desc="label efficiency", leave=False):
        if log.done(method=method, n_subjects=n, seed=seed):
            continue
        chosen = np.random.default_rng([seed, n]).choice(pool, size=n, replace=False)
        train = _subset(split["train"], chosen)
        result = fit_and_score(
            methods[method], train, split["test"], seed, params, valid=split.get("valid")
        )
        log.add({"method": method, "n_subjects": n, "seed": seed, **result})
    frame = log.frame()
    summary = (
        frame.groupby(["method", "n_subjects"]).agg(["mean", "std"]).drop(columns="seed", level=0)
    )
    fig = plot_lines(summary, "n_subjects", "labelled training patients")
    fig.savefig(out / "label_efficiency.png", dpi=120)
    plt.close(fig)
    return frame


def transfer(splits, methods, seeds, params, out):
    """Table 1: each dataset's test scores, mean ± std over seeds, per method."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(encoders=methods, params=params, data=_data_summary(splits))
    log = ResultsLog(out / "results.csv", ["dataset", "method", "seed"], settings)
    jobs = list(itertools.product(splits, seeds, methods))
    for dataset, seed, method in tqdm(jobs, desc="transfer", leave=False):
        if log.done(dataset=dataset, method=method, seed=seed):
            continue
        split = splits[dataset]
        result = fit_and_score(
            methods[method], split["train"], split["test"], seed, params, valid=split.get("valid")
        )
        log.add({"dataset": dataset, "method": method, "seed": seed, **result})
    frame = log.frame()
    lines = ["| dataset | method | balanced accuracy | kappa | AUROC |", "|---|---|---|---|---|"]
    for (dataset, method), grp in frame.groupby(["dataset", "method"], sort=False):
        cells = []
        for metric in ("balanced_accuracy", "kappa", "auroc"):
            values = grp[metric].dropna() if metric in grp else pd.Series(dtype=float)
            cells.append(f"{values.mean():.3f} ± {values.std():.3f}" if len(values) else "")
        lines.append(f"| {dataset} | {method} | " + " | ".join(cells) + " |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return frame


def leave_one_subject_out_protocol(windows, methods, params, out, seeds=(0,)):
    """Fig. 5: per-subject scores, each subject held out in turn."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(encoders=methods, params=params, data=_data_summary(windows))
    log = ResultsLog(out / "results.csv", ["method", "subject", "seed"], settings)
    subjects = subjects_of(windows)
    if len(subjects) < 2:
        raise ValueError(f"Leave-one-subject-out needs two subjects, but got {subjects}.")
    jobs = list(itertools.product(seeds, subjects, methods))
    for seed, subject, method in tqdm(jobs, desc="leave one subject out", leave=False):
        if log.done(method=method, subject=subject, seed=seed):
            continue
        train = _subset(windows, [s for s in subjects if s != subject])
        test = _subset(windows, [subject])
        result = fit_and_score(methods[method], train, test, seed, params)
        log.add({"method": method, "subject": subject, "seed": seed, **result})
    frame = log.frame()
    fig = plot_subject_bars(frame)
    fig.savefig(out / "per_subject_kappa.png", dpi=120)
    plt.close(fig)
    return frame


def ablation(
    split, configs, seeds, params, pretrain_params, out, n_subjects=None, evaluate_on="valid"
):
    """Fig. 4: PARS pretrained under each configuration, then fine-tuned and scored.

    ``configs`` maps a name to PARS settings (``n_patches``, ``pos_mask_ratio``,
    ``sampling``, ``decoder``); pretraining uses the train split's windows. The paper
    fine-tunes on 100 training patients (``n_subjects``, drawn by the seed) and
    scores on the validation patients (``evaluate_on="valid"``), which also choose
    the best epoch, as for every fine-tuning of the paper.
    """
    check_option("evaluate_on", evaluate_on, ("test", "valid"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(
        configs=configs, params=params, pretrain=pretrain_params, n_subjects=n_subjects,
        evaluate_on=evaluate_on, data=_data_summary(split),
    )  # fmt: skip
    log = ResultsLog(out / "results.csv", ["config", "seed"], settings)
    store = out / "train_store"  # the train split once on disk, memory-mapped: a corpus
    if not (store / "index.npz").is_file():  # of any size costs its index in memory
        write_window_store(split["train"], store, overwrite=True)
    view = SingleChannelWindows.from_store(store)
    encoder_kwargs = {k: params[k] for k in PatchEncoderConfig.fields() if k in params}
    for seed, name in tqdm(list(itertools.product(seeds, configs)), desc="ablation", leave=False):
        if log.done(config=name, seed=seed):
            continue
        run_dir = out / "pretrain" / f"{name}_seed{seed}"
        with isolated_random_state(seed, pretrain_params.get("device")):
            net = run_pretraining(
                view,
                "pars",
                checkpoint_dir=run_dir,
                progress_bar=False,
                encoder_kwargs=encoder_kwargs,
                **pretrain_params,
                **configs[name],
            )
        train = split["train"]
        if n_subjects is not None:
            chosen = np.random.default_rng([seed, n_subjects]).choice(
                subjects_of(train), size=n_subjects, replace=False
            )
            train = _subset(train, chosen)
        valid = split.get("valid")  # with evaluate_on="valid" it both picks and scores
        result = fit_and_score(
            run_dir / "encoder.pt", train, split[evaluate_on], seed, params, valid=valid
        )
        log.add(
            {
                "config": name,
                "seed": seed,
                "pretrain_loss": float(net.history[-1, "train_loss"]),
                **result,
            }
        )
    frame = log.frame()
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(configs)), 3.5), constrained_layout=True)
    grouped = frame.groupby("config", sort=False)["kappa"]
    ax.bar(list(grouped.groups), grouped.mean(), yerr=grouped.std().fillna(0), capsize=3)
    ax.set_ylabel("Cohen's kappa")
    ax.set_title("PARS ablations (mean ± std over seeds)")
    fig.savefig(out / "ablation.png", dpi=120)
    plt.close(fig)
    return frame


def run_experiment(config, out=None):
    """Run one protocol from a configuration dictionary (see the documentation page).

    Keys: ``protocol``; ``data`` (``recipe``, ``path``, ``options``) or, for
    ``transfer``, ``datasets`` (name -> such a dict); ``methods`` (name -> encoder file
    or null); ``estimator`` (the flat fine-tuning settings :func:`_estimator` reads);
    ``seeds``; and per protocol
    ``subject_counts`` (label efficiency), ``configs`` and ``pretrain`` (ablation).
    """
    config = dict(config)
    protocol = config.get("protocol")
    check_option("protocol", protocol, PROTOCOLS)
    out = Path(out or config.get("out", f"results/{protocol}"))
    recorded = out / "config.json"
    if recorded.is_file():
        before, now = json.loads(recorded.read_text()), json.loads(json.dumps(config))
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if changed:
            raise ValueError(
                f"'out'={str(out)!r} holds the results of another configuration (keys "
                f"that differ from its config.json: {', '.join(changed)}); a resumed run "
                "would keep its rows as this configuration's. Give another 'out', or "
                "delete that folder to start again."
            )
    out.mkdir(parents=True, exist_ok=True)
    recorded.write_text(json.dumps(config, indent=2))
    methods = config.get("methods", {"scratch": None})
    params = config.get("estimator", {})
    seeds = config.get("seeds", [0])

    def data(spec):
        return load_recipe(spec["recipe"], spec.get("path"), **spec.get("options", {}))

    if protocol == "transfer":
        splits = {name: data(spec) for name, spec in config["datasets"].items()}
        return transfer(splits, methods, seeds, params, out)
    split = data(config["data"])
    if protocol == "label_efficiency":
        return label_efficiency(split, methods, config["subject_counts"], seeds, params, out)
    if protocol == "loso":
        return leave_one_subject_out_protocol(split["all"], methods, params, out, seeds)
    return ablation(
        split,
        config["configs"],
        seeds,
        params,
        config.get("pretrain", {}),
        out,
        n_subjects=config.get("n_subjects"),
        evaluate_on=config.get("evaluate_on", "valid"),
    )


# -- figures -----------------------------------------------------------------------------
def plot_lines(summary, x, xlabel, metrics=("balanced_accuracy", "kappa")):
    """One line per method with a ±std band, one panel per metric."""
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(5 * len(metrics), 3.8), constrained_layout=True, squeeze=False
    )
    for ax, metric in zip(axes[0], metrics, strict=True):
        for method in summary.index.get_level_values("method").unique():
            part = summary.loc[method]
            xs = part.index.to_numpy()
            mean = part[(metric, "mean")].to_numpy()
            std = np.nan_to_num(part[(metric, "std")].to_numpy())
            ax.plot(xs, mean, marker="o", label=method)
            ax.fill_between(xs, mean - std, mean + std, alpha=0.15)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric.replace("_", " "))
    axes[0][0].legend(fontsize=8)
    return fig


def plot_subject_bars(frame, metric="kappa"):
    """Per-subject bars, one colour per method (paper Fig. 5)."""
    table = frame.groupby(["subject", "method"])[metric].mean().unstack("method")
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(table)), 3.5), constrained_layout=True)
    width = 0.8 / max(len(table.columns), 1)
    for i, method in enumerate(table.columns):
        ax.bar(np.arange(len(table)) + i * width, table[method], width, label=method)
    ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, [str(s) for s in table.index])
    ax.set_xlabel("held-out subject")
    ax.set_ylabel("Cohen's kappa" if metric == "kappa" else metric)
    ax.legend(fontsize=8)
    return fig

"""Fine-tuning defaults chosen on EEGMAT subjects outside the main job: fit on all 8 pool
subjects (as the test fit does), score on the 16 EEGMAT subjects that are neither
pool nor test subjects.

The pool's own folds (``bench_finetuning.py selection``) held out two subjects each and
their choice did not transfer to the test subjects (``docs/benchmarks/finetuning.rst``).
This selection set is larger (16 subjects, 374 windows) and scores what the test scores:
a fit on the 8 pool subjects, on subjects it has not seen. It needs EEGMAT's EDF files
(``../shared/data/eegmat``, or ``--eegmat``), preprocessed as the bundled file is
(:func:`~braindecode_pars.datasets.bundled.write_eegmat_bundle`, cached under
``benchmarks/.cache``). Each round's protocol and decision rule are on that page as it
stood at the tag ``benchmarks-history-2026-11``.

- ``run``: each candidate of ``CANDIDATES`` for each seed; one JSON line per fit in
  ``finetuning_outer.jsonl`` (balanced accuracy on the 16 subjects, the share predicted
  as arithmetic, the training loss per epoch and the selection subjects' balanced
  accuracy every ``CURVE_EVERY`` epochs, read by a callback ``fit`` never reads).
- ``probes``: the probe over the encoder on the same split (calibration rows).
- ``report``: ``finetuning_outer.md`` from those lines.
- ``subjects``, ``subjects-report``: each selection and test subject scored alone by
  the fine-tuner's defaults of the second round, ``SUBJECTS_TUNER`` (a diagnosis;
  ``finetuning_subjects.md``).
- ``labels``, ``labels-report``: more labelled subjects (a diagnosis that chooses
  nothing): the library's defaults fitted on the 8 pool subjects plus 8 or all 16
  selection subjects, scored on the 12 test subjects (``finetuning_labels.md``,
  ``.png``).

Run: ``python -m benchmarks.bench_finetuning_outer run --candidates ... --seeds 0 1 2``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import balanced_accuracy_score

from benchmarks.lib.eegmat_bundle import read_eegmat_bundle
from benchmarks.lib.finetuning import (
    ENCODER,
    MINORITY,
    POOL,
    HeldOutCurve,
    curve_table,
    fine_tuner,
    load,
    read_rows,
)
from braindecode_pars.datasets.bundled import write_eegmat_bundle
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS
from braindecode_pars.io.windowing import windows_of
from braindecode_pars.io.windows import read_windows

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache" / "eegmat_outer_100hz.npz"
SHARED_EEGMAT = HERE.parent.parent / "shared" / "data" / "eegmat"
#: the selection subjects: EEGMAT's 36 less the 8 pool and the 12 test subjects
OUTER = tuple(s for s in range(36) if s not in POOL and s not in EEGMAT_TEST_SUBJECTS)
#: the selection subjects' balanced accuracy is read every this many epochs (and last)
CURVE_EVERY = 5

#: what every candidate changes first: the fine-tuner's defaults when this selection ran
#: (it moved ``max_epochs`` from 40 to 200, and its fourth round ``spatial_drop_prob``
#: from 0.5 to 0), so that a rerun scores the same candidates
BASE = {"max_epochs": 40, "spatial_drop_prob": 0.5, "amplitude": False}
#: the candidates, each one change from ``BASE`` (written before any ran)
CANDIDATES = {
    "defaults": {},
    "no augmentation": {"augmentation": None},
    "max_epochs=100": {"max_epochs": 100},
    "amplitude": {"amplitude": True},
    "crops 5 s": {"crop_seconds": 5.0},
    "encoder_lr_scale=0.1": {"encoder_lr_scale": 0.1},
    "lp-ft": {"strategy": "lp-ft"},
    "weight_decay=0.05": {"optimizer__weight_decay": 0.05},
    "lr=1e-4": {"lr": 1e-4},
    "layer_decay=0.65": {"layer_decay": 0.65},
    "pooling mean+std": {"pooling": "mean+std"},
    # round 2 (written after stage 1 chose max_epochs=100, before the test ran): the
    # selection curve still rose at epoch 100 and the augmented training loss was 0.34
    "max_epochs=200": {"max_epochs": 200},
    "max_epochs=100, lr=1e-3": {"max_epochs": 100, "lr": 1e-3},
    # round 3 (written after the test of round 2's choice, before these ran): each
    # subject's windows aligned on their own mean covariance, at 200 epochs
    "max_epochs=200, align": {"max_epochs": 200, "align": "groups"},
    "max_epochs=200, align, amplitude": {"max_epochs": 200, "align": "groups", "amplitude": True},
    # round 4 (written after round 3's rows, before these ran): spatial dropout, never run
    "max_epochs=200, spatial_drop_prob=0": {"max_epochs": 200, "spatial_drop_prob": 0.0},
    "max_epochs=200, spatial_drop_prob=0.25": {"max_epochs": 200, "spatial_drop_prob": 0.25},
}


class SparseCurve(HeldOutCurve):
    """:class:`HeldOutCurve` every ``every`` epochs and at the last (NaN between)."""

    def __init__(self, X, y, every, groups=None):
        super().__init__(X, y, groups)
        self.every = every

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history)
        if epoch % self.every == 0 or epoch == 1 or epoch == net.max_epochs:
            super().on_epoch_end(net, **kwargs)
        else:
            net.history.record("heldout_bal_acc", float("nan"))
            net.history.record("heldout_minority", float("nan"))


def load_outer(eegmat, cache=CACHE):
    """The 16 selection subjects' 10-s windows: X, y, subject of each window."""
    if not cache.exists():
        if not Path(eegmat).is_dir():
            raise FileNotFoundError(
                f"'--eegmat' must be the folder of EEGMAT's EDF files, but {eegmat} is not "
                "a folder (the repository's ../shared/data/eegmat, or PhysioNet's EEGMAT 1.0.0)."
            )
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_eegmat_bundle(eegmat, cache, subjects=OUTER)
    dataset = read_eegmat_bundle(cache, OUTER)
    windows = windows_of(dataset, None, dataset.datasets[0].raw.info["sfreq"], 10.0)
    data = read_windows(windows)
    return data.X, np.asarray(data.y), windows.get_metadata()["subject"].to_numpy()


def run(names, seeds, scratch, eegmat, out, pretrained=True):
    X, y, groups, sfreq = load()
    train = np.isin(groups, POOL)
    Xs, ys, gs = load_outer(eegmat)
    for name in names:
        for start in ("scratch",) * scratch + ("pretrained",) * pretrained:
            for seed in seeds:
                clf = fine_tuner(None if start == "scratch" else ENCODER,
                                 {**BASE, **CANDIDATES[name]}, seed, sfreq)  # fmt: skip
                clf.set_params(callbacks=[("heldout_curve", SparseCurve(Xs, ys, CURVE_EVERY, gs))])
                t0 = time.perf_counter()
                clf.fit(X[train], y[train], groups=groups[train])
                seconds = time.perf_counter() - t0
                pred = clf.predict(Xs, groups=gs)
                h = clf.history_
                row = dict(
                    candidate=name, start=start, seed=seed,
                    balanced_accuracy=float(balanced_accuracy_score(ys, pred)),
                    minority_share=float(np.mean(pred == MINORITY)),
                    n_epochs=len(h), seconds=seconds,
                    train_loss=[float(v) for v in h[:, "train_loss"]],
                    heldout_bal_acc=[float(v) for v in h[:, "heldout_bal_acc"]],
                )  # fmt: skip
                score, share = row["balanced_accuracy"], row["minority_share"]
                print(f"{name:22s} {start:10s} seed {seed}: {score:.3f} minority {share:.2f} "
                      f"{seconds:.0f} s", flush=True)  # fmt: skip
                with open(out, "a") as f:
                    f.write(json.dumps(row) + "\n")


def run_probes(seeds, eegmat, out):
    """The probe over the encoder, fitted on the same 8 pool subjects: what the
    selection subjects give a method that is not fine-tuned (a calibration row)."""
    from braindecode_pars import PARSProbe

    X, y, groups, sfreq = load()
    train = np.isin(groups, POOL)
    Xs, ys, _ = load_outer(eegmat)
    for name, params in PROBES.items():
        for seed in seeds:
            t0 = time.perf_counter()
            probe = PARSProbe(encoder=ENCODER, sfreq=sfreq, random_state=seed, **params)
            pred = probe.fit(X[train], y[train], groups=groups[train]).predict(Xs)
            row = dict(candidate=name, start="-", seed=seed,
                       balanced_accuracy=float(balanced_accuracy_score(ys, pred)),
                       minority_share=float(np.mean(pred == MINORITY)),
                       seconds=time.perf_counter() - t0,
                       train_loss=[], heldout_bal_acc=[])  # fmt: skip
            print(f"{name}: seed {seed} {row['balanced_accuracy']:.3f}", flush=True)
            with open(out, "a") as f:
                f.write(json.dumps(row) + "\n")


#: the fine-tuner of the per-subject diagnosis: the defaults when it ran (the second
#: round's 200 epochs, spatial dropout 0.5), so that a rerun reproduces it
SUBJECTS_TUNER = {"max_epochs": 200, "spatial_drop_prob": 0.5, "amplitude": False}


#: the fourth round's choice, added to the diagnosis after its test (it chose nothing)
NO_DROPOUT = {"max_epochs": 200, "spatial_drop_prob": 0.0, "amplitude": False}


def run_subjects(seeds, eegmat, out, names=None):
    """Per subject: fit on the 8 pool subjects at ``SUBJECTS_TUNER`` (full
    fine-tuning of the encoder, the same from scratch, the probe over the encoder) and
    score each selection and each test subject alone. A diagnosis of where the scores of
    the two sets part; it chooses nothing (the defaults were committed before it ran)."""
    from braindecode_pars import PARSProbe

    X, y, groups, sfreq = load()
    train = np.isin(groups, POOL)
    Xs, ys, gs = load_outer(eegmat)
    test = np.isin(groups, EEGMAT_TEST_SUBJECTS)
    X_all = np.concatenate([Xs, X[test]])
    y_all, g_all = np.concatenate([ys, y[test]]), np.concatenate([gs, groups[test]])
    methods = {
        f"full fine-tuning of {ENCODER}": lambda s: fine_tuner(ENCODER, SUBJECTS_TUNER, s, sfreq),
        f"full fine-tuning of {ENCODER}, no spatial dropout": lambda s: fine_tuner(
            ENCODER, NO_DROPOUT, s, sfreq
        ),
        "from scratch": lambda seed: fine_tuner(None, SUBJECTS_TUNER, seed, sfreq),
        f"probe over {ENCODER}": lambda seed: PARSProbe(
            encoder=ENCODER, sfreq=sfreq, random_state=seed
        ),
    }
    for name, make in methods.items():
        if names is not None and name not in names:
            continue
        for seed in seeds:
            clf = make(seed).fit(X[train], y[train], groups=groups[train])
            pred = clf.predict(X_all, groups=g_all)
            for subject in np.unique(g_all):
                mask = g_all == subject
                row = dict(
                    method=name, seed=seed, subject=int(subject),
                    set="test" if subject in EEGMAT_TEST_SUBJECTS else "selection",
                    balanced_accuracy=float(balanced_accuracy_score(y_all[mask], pred[mask])),
                    minority_share=float(np.mean(pred[mask] == MINORITY)),
                )  # fmt: skip
                with open(out, "a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"{name}: seed {seed} done", flush=True)


#: Labelled subjects of the ``labels`` diagnosis: the pool, then the pool and the 8
#: lowest-numbered selection subjects, then the pool and all 16.
LABELLED = {8: POOL, 16: POOL + OUTER[:8], 24: POOL + OUTER}
#: Its methods, in the order they run (the cheap ones and the question's first).
LABEL_METHODS = (
    f"probe over {ENCODER}",
    "probe without an encoder",
    f"full fine-tuning of {ENCODER}",
    "from scratch",
)


def label_jobs(seeds):
    """(method, labelled subjects, seed) of the ``labels`` diagnosis, in run order: the
    probes at 8, 16 and 24; full fine-tuning at 24 then 16; from scratch at 24. Full
    fine-tuning and from scratch at 8 are the test rows of ``finetuning_test.jsonl``
    (the same defaults and seeds), not run again."""
    probes = [(m, n, s) for m in LABEL_METHODS[:2] for n in LABELLED for s in seeds]
    tuned = [(LABEL_METHODS[2], n, s) for n in (24, 16) for s in seeds]
    return probes + tuned + [(LABEL_METHODS[3], 24, s) for s in seeds]


def run_labels(seeds, eegmat, out):
    """Each job of :func:`label_jobs` not yet in ``out``: fit on the labelled subjects'
    windows, score on the 12 test subjects; one JSON line per fit. The library's
    defaults throughout (``PARSFineTuner()``, ``PARSProbe()``); it chooses nothing."""
    from braindecode_pars import PARSProbe

    X, y, groups, sfreq = load()
    Xs, ys, gs = load_outer(eegmat)
    X_all, y_all = np.concatenate([X, Xs]), np.concatenate([y, ys])
    g_all = np.concatenate([groups, gs])
    test = np.isin(g_all, EEGMAT_TEST_SUBJECTS)
    done = (
        {(r["method"], r["n_labelled"], r["seed"]) for r in read_rows(out)}
        if out.exists()
        else set()
    )
    makers = {
        LABEL_METHODS[0]: lambda seed: PARSProbe(encoder=ENCODER, sfreq=sfreq, random_state=seed),
        LABEL_METHODS[1]: lambda seed: PARSProbe(sfreq=sfreq, random_state=seed),
        LABEL_METHODS[2]: lambda seed: fine_tuner(ENCODER, {}, seed, sfreq),
        LABEL_METHODS[3]: lambda seed: fine_tuner(None, {}, seed, sfreq),
    }
    for method, n, seed in label_jobs(seeds):
        if (method, n, seed) in done:
            continue
        train = np.isin(g_all, LABELLED[n])
        t0 = time.perf_counter()
        clf = makers[method](seed).fit(X_all[train], y_all[train], groups=g_all[train])
        seconds = time.perf_counter() - t0
        pred = clf.predict(X_all[test], groups=g_all[test])
        row = dict(method=method, n_labelled=n, seed=seed, n_windows=int(train.sum()),
                   balanced_accuracy=float(balanced_accuracy_score(y_all[test], pred)),
                   minority_share=float(np.mean(pred == MINORITY)), seconds=seconds)  # fmt: skip
        print(f"{method}, {n} labelled subjects, seed {seed}: "
              f"{row['balanced_accuracy']:.3f} ({seconds:.0f} s)", flush=True)  # fmt: skip
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def _with_test_rows(rows, test_rows):
    """``rows`` and the fine-tuning rows at 8 labelled subjects of ``test_rows``."""
    by_name = {"full fine-tuning of pars-small-v2 (library defaults)": LABEL_METHODS[2],
               "same architecture from scratch (library defaults)": LABEL_METHODS[3]}  # fmt: skip
    return list(rows) + [
        dict(method=by_name[r["row"]], n_labelled=8, seed=r["seed"],
             balanced_accuracy=r["balanced_accuracy"], minority_share=r["minority_share"])
        for r in test_rows if r.get("row") in by_name
    ]  # fmt: skip


def labels_report(rows, test_rows=()):
    """Markdown: mean ± std over seeds (and each seed) per method and number of labelled
    subjects; ``test_rows`` (``finetuning_test.jsonl``) give the fine-tuning rows at 8."""
    rows = _with_test_rows(rows, test_rows)
    lines = [
        "# More labelled subjects: the library's defaults on the 12 test subjects",
        "",
        "Command: `python -m benchmarks.bench_finetuning_outer labels` then `labels-report`. "
        "Fitted on the 8 pool subjects (0 2 3 5 6 8 10 11), plus the selection subjects "
        f"{' '.join(map(str, OUTER[:8]))} (16), plus also "
        f"{' '.join(map(str, OUTER[8:]))} (24); scored on the 12 test subjects. "
        "Balanced accuracy, mean ± std over seeds (each seed in brackets); the fine-tuning "
        "rows at 8 are those of `finetuning_test.jsonl`. A diagnosis: it chose nothing.",
        "",
        "| method | " + " | ".join(f"{n} labelled subjects" for n in LABELLED) + " |",
        "|---|" + "---|" * len(LABELLED),
    ]
    for method in LABEL_METHODS:
        cells = []
        for n in LABELLED:
            scores = [r["balanced_accuracy"] for r in sorted(rows, key=lambda r: r["seed"])
                      if r["method"] == method and r["n_labelled"] == n]  # fmt: skip
            if not scores:
                cells.append("not run")
                continue
            each = ", ".join(f"{v:.3f}" for v in scores)
            cells.append(f"{np.mean(scores):.3f} ± {np.std(scores):.3f} ({each})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    shares = [r["minority_share"] for r in rows if r["method"] in LABEL_METHODS[2:]]
    if shares:
        lines += ["", "Share of test windows predicted as arithmetic by the fine-tuned "
                  f"rows: {min(shares):.2f} to {max(shares):.2f} (true share 0.25)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot_labels(rows, test_rows=()):
    """Balanced accuracy on the test subjects against labelled subjects, each seed a
    dot and each method's mean a line; the rows as :func:`labels_report` reads them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _with_test_rows(rows, test_rows)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k, method in enumerate(LABEL_METHODS):
        ns = [n for n in LABELLED if any(r["method"] == method and r["n_labelled"] == n
                                         for r in rows)]  # fmt: skip
        scores = [[r["balanced_accuracy"] for r in rows
                   if r["method"] == method and r["n_labelled"] == n] for n in ns]  # fmt: skip
        shift = (k - 1.5) * 0.25
        for n, values in zip(ns, scores, strict=True):
            ax.scatter([n + shift] * len(values), values, s=12, color=f"C{k}", alpha=0.6)
        ax.plot([n + shift for n in ns], [np.mean(v) for v in scores], "-o", color=f"C{k}",
                label=method)  # fmt: skip
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axhline(0.58, color="grey", lw=0.8, ls="--", label="issue 48's target (0.58)")
    ax.set_xticks(list(LABELLED))
    ax.set_xlabel("labelled subjects")
    ax.set_ylabel("balanced accuracy, 12 test subjects")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def subjects_report(rows):
    """Mean over seeds per subject and method, and per set."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    per = frame.groupby(["set", "subject", "method"], sort=False).balanced_accuracy.mean()
    table = per.unstack("method")
    lines = [
        "# Fine-tuning and the probe per subject: selection and test subjects",
        "",
        "Command: `python -m benchmarks.bench_finetuning_outer subjects` then "
        "`... subjects-report`. Each method at the defaults of the second round (200 "
        "epochs, spatial dropout 0.5; the probe's own defaults) unless its name says "
        "otherwise (no spatial dropout: the fourth round's choice, run after its test), "
        "fitted on the main "
        "job's 8 pool subjects, seeds "
        f"{sorted(frame.seed.unique().tolist())}; each subject's balanced accuracy "
        "(18 rest and 6 arithmetic windows, fewer for some selection subjects), mean "
        "over seeds. A diagnosis run after the defaults were chosen; it chose nothing.",
        "",
        "| set | subject | " + " | ".join(table.columns) + " |",
        "|---|---|" + "---|" * len(table.columns),
    ]
    for (set_, subject), values in table.iterrows():
        lines.append(f"| {set_} | {subject} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    heads = " | ".join(
        f"{c}: mean over subjects (under 0.5; mean without those under 0.25)" for c in table.columns
    )
    lines += ["", f"| set | {heads} |", "|---|" + "---|" * len(table.columns)]
    for set_, part in table.groupby(level="set", sort=False):
        cells = [f"{part[c].mean():.3f} ({int((part[c] < 0.5).sum())} of {len(part)}; "
                 f"{part[c][part[c] >= 0.25].mean():.3f})" for c in table.columns]  # fmt: skip
        lines.append(f"| {set_} | " + " | ".join(cells) + " |")
    corr = table.corr().round(2)
    lines += ["", "Correlation of the per-subject scores between methods (all 28 subjects):", ""]
    lines += ["| | " + " | ".join(corr.columns) + " |", "|---|" + "---|" * len(corr.columns)]
    lines += [f"| {i} | " + " | ".join(f"{v:.2f}" for v in r) + " |" for i, r in corr.iterrows()]
    return "\n".join(lines) + "\n"


#: calibration rows (``probes`` mode): the probe over the encoder, as the test page has it
PROBES = {
    f"probe over {ENCODER} (PARSProbe defaults)": {},
    f"probe over {ENCODER} features alone": {"band_power": False, "tangent_space": False},
}


def report(rows):
    import pandas as pd

    frame = pd.DataFrame(rows)
    base = frame[(frame.candidate == "defaults") & (frame.start == "pretrained")]
    base = base.balanced_accuracy.mean() if len(base) else float("nan")
    lines = [
        "# Fine-tuning defaults: selection on 16 EEGMAT subjects outside the main job",
        "",
        "Command: `python -m benchmarks.bench_finetuning_outer run --candidates ... "
        "--seeds 0 1 2` then `... report`. `PARSFineTuner(strategy='full')` of "
        f"`{ENCODER}` at the fine-tuner's defaults when this ran ('defaults': "
        "`max_epochs=40`, lr 3e-4, the standard augmentation) but the candidate's change, "
        "fitted on the "
        f"main job's 8 pool subjects (192 windows) and scored on EEGMAT subjects {list(OUTER)} "
        "(neither pool nor test; 374 windows, 26 % arithmetic). Balanced accuracy, "
        "mean over seeds; 'gain' against the defaults before this selection (40 epochs); "
        "'minority' the share of windows "
        "predicted as arithmetic per fit. Two threads on the project's 2-core CPU.",
        "",
        "| candidate | start | seeds | mean | per seed | gain | minority per fit | s per fit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (name, start), part in frame.groupby(["candidate", "start"], sort=False):
        mean = part.balanced_accuracy.mean()
        lines.append(
            f"| {name} | {start} | {len(part)} | {mean:.3f} | "
            + ", ".join(f"{v:.3f}" for v in part.balanced_accuracy)
            + f" | {mean - base:+.3f} | "
            + ", ".join(f"{v:.2f}" for v in part.minority_share)
            + f" | {part.seconds.mean():.0f} |"
        )
    lines += [
        "",
        "## Learning curves (mean over seeds)",
        "",
        "Training loss and the selection subjects' balanced accuracy (read by a callback "
        "that `fit` never reads) at some epochs.",
        "",
        *curve_table(frame, CURVE_EPOCHS, "selection"),
    ]
    return "\n".join(lines) + "\n"


CURVE_EPOCHS = (1, 10, 20, 40, 60, 100, 150, 200)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("run", "probes", "report", "subjects", "subjects-report",
                                         "labels", "labels-report"))  # fmt: skip
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES),
                        choices=list(CANDIDATES))  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--scratch", action="store_true", help="also from scratch")
    parser.add_argument("--scratch-only", action="store_true", help="only from scratch")
    parser.add_argument("--eegmat", type=Path, default=SHARED_EEGMAT)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", nargs="+", help="subjects: only these methods")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    jsonl = args.out / "finetuning_outer.jsonl"
    if args.mode == "run":
        scratch = args.scratch or args.scratch_only
        run(args.candidates, args.seeds, scratch, args.eegmat, jsonl, not args.scratch_only)
    elif args.mode == "probes":
        run_probes(args.seeds, args.eegmat, jsonl)
    elif args.mode == "subjects":
        run_subjects(args.seeds, args.eegmat, args.out / "finetuning_subjects.jsonl",
                     args.methods)  # fmt: skip
    elif args.mode == "labels":
        run_labels(args.seeds, args.eegmat, args.out / "finetuning_labels.jsonl")
    elif args.mode == "labels-report":
        test_rows = read_rows(args.out / "finetuning_test.jsonl")
        rows = read_rows(args.out / "finetuning_labels.jsonl")
        text = labels_report(rows, test_rows)
        (args.out / "finetuning_labels.md").write_text(text)
        plot_labels(rows, test_rows).savefig(args.out / "finetuning_labels.png", dpi=90)
        print(text)
    elif args.mode == "subjects-report":
        text = subjects_report(read_rows(args.out / "finetuning_subjects.jsonl"))
        (args.out / "finetuning_subjects.md").write_text(text)
        print(text)
    else:
        text = report(read_rows(jsonl))
        (args.out / "finetuning_outer.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

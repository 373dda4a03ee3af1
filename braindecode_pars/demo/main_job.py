"""The main job: the library's default classifier, the shipped PARS encoder under the
probe, against the same probe without an encoder, training from scratch and a
classical floor, with few labels, on real EEG (EEGMAT rest vs mental arithmetic).

1. Load the encoder shipped with the package that ``PARSClassifier()`` reads
   (``"pars-small-v2"``: pretrained on EEGMAT's 24 training subjects, nine Sleep-EDF
   nights and 129 Muse recordings; see its model card).
2. For k = 1 and 2 labelled subjects (five draws from a pool of 8 that overlap as
   little as the pool allows: five different subjects at k = 1), fit
   the band-power + logistic-regression floor, ``PARSClassifier()`` (the probe: a
   logistic regression over log band power, with the tangent space and the frozen
   encoder's features where inner folds on the labelled windows show they help),
   ``PARSProbe()`` (the same probe without an encoder), the probe over
   a randomly initialised encoder of the same size, and
   ``PARSFineTuner(encoder=None)``, the classifier trained from scratch (every weight
   of a new encoder of the same size and its head), and score each on 12 test subjects
   that pretraining never saw and that no current default was chosen on (those were
   chosen on the development tasks' selection splits, :doc:`/benchmarks/dev_tasks`).
3. Print the table (mean ± std over draws) and write ``results.csv``,
   ``results.json``, ``label_efficiency.png``, ``shift_matrices.png`` (the shipped
   model's shift predictions on a test subject's window) and ``training_curves.png``
   (the shipped encoder's pretraining curves and the fine-tuning curves).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import torch

from braindecode_pars._util.seeding import isolated_random_state
from braindecode_pars._util.threads import with_fit_threads
from braindecode_pars.datasets.bundled import BUNDLED_POOL_SUBJECTS, load_bundled_eegmat
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS
from braindecode_pars.demo.low_label import (
    _format_summary,
    _plot_label_efficiency,
    _run_low_label,
    _summarize,
    scratch_classifier,
)
from braindecode_pars.estimators.classifier import PARSClassifier
from braindecode_pars.estimators.probe import PARSProbe
from braindecode_pars.features import band_power_pipeline
from braindecode_pars.hub.folders import load_encoder, load_pretext_model, pretrained_path
from braindecode_pars.io.windows import read_windows
from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.viz import plot_shift_matrices, plot_training_curves
from braindecode_pars.weights import DEFAULT_ENCODER

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DemoConfig:
    """Settings of the main job; defaults keep it to minutes on two CPU cores.

    The classifiers use the estimators' defaults except for the encoder size of the
    classifier trained from scratch, which is the shipped encoder's (64 features, 4
    blocks, 4 heads), and its head's ``max_epochs``: ``finetune_epochs``, 40, which keeps
    the job to minutes (the fine-tuner's default, 200, costs five times as much; the
    probes train no epochs).
    """

    encoder: str = DEFAULT_ENCODER
    ks: tuple = (1, 2)
    seeds: tuple = (0, 1, 2, 3, 4)
    test_subjects: tuple = EEGMAT_TEST_SUBJECTS
    pool_subjects: tuple = BUNDLED_POOL_SUBJECTS
    finetune_epochs: int | None = 40  # None: the estimator's default
    seed: int = 0
    device: str = "cpu"


def _demo_methods(config, sfreq):
    """The floor, the probe over the shipped encoder (``PARSClassifier()`` when
    ``config.encoder`` is its default), the same probe without an encoder
    (``PARSProbe()``) and over a random encoder, and the classifier trained from scratch,
    as scikit-learn estimators (named for what each fits). Every probe is
    ``PARSProbe``'s default, ``block_weights="auto"``: band power, and each other block
    only where the inner folds on the labelled windows (by time within each subject,
    with one or two) show it helps."""
    encoder = load_encoder(config.encoder)
    size = encoder.config.asdict()
    with isolated_random_state(config.seed, "cpu"):
        random_encoder = PatchEncoder(sfreq=encoder.sfreq, **size)
    scratch = dict(device=config.device)
    if config.finetune_epochs is not None:
        scratch["max_epochs"] = config.finetune_epochs
    return {
        "floor (band power)": band_power_pipeline(sfreq=sfreq),
        f"probe: {config.encoder}": PARSClassifier(
            encoder=config.encoder, head=PARSProbe(device=config.device), sfreq=sfreq, verbose=0
        ),
        "probe: no encoder": PARSProbe(sfreq=sfreq),
        "probe: random encoder": PARSClassifier(
            encoder=random_encoder, head=PARSProbe(device=config.device), sfreq=sfreq, verbose=0
        ),
        "trained from scratch": scratch_classifier(size, sfreq=sfreq, verbose=0, **scratch),
    }


def _shift_matrix_figure(config, windows, out):
    """The shipped model's shift predictions on one channel of a test subject's window."""
    model = load_pretext_model(config.encoder)
    meta = windows.get_metadata()
    index = int(np.flatnonzero(meta["subject"].isin(config.test_subjects))[0])
    x = torch.as_tensor(np.asarray(windows[index][0], dtype=np.float32))
    X = x[:, : model.n_times].unsqueeze(1)  # every channel, (n_chans, 1, n_times)
    with torch.no_grad():
        res = model.predict_shifts(X, generator=torch.Generator().manual_seed(config.seed))
    skill = float(pretext_skill(res["loss"], res["trivial_loss"]))
    # per channel: squared error of the prediction and of "no shift" on the masked pairs
    mask = res["pair_mask"].float()
    err = ((res["theta_pred"] - res["theta_true"]) ** 2 * mask).sum((1, 2))
    trivial = (res["theta_true"] ** 2 * mask).sum((1, 2))
    per_channel = (1 - err / trivial).numpy()
    index = int(np.argsort(per_channel)[len(per_channel) // 2])  # the median channel
    name = windows.datasets[0].raw.ch_names[index]
    fig = plot_shift_matrices(
        res,
        index=index,
        title=f"{config.encoder} on a test subject's window, channel {name} (the median "
        f"one: skill {per_channel[index]:.2f}; all {len(per_channel)} channels: {skill:.2f})",
    )
    fig.savefig(out / "shift_matrices.png", dpi=120)
    return skill


@with_fit_threads
def run_demo(out="results/demo", config=None):
    """Run the main job; write tables and figures to ``out``.

    Returns
    -------
    results : pandas.DataFrame
        One row per method, k and draw: balanced accuracy and kappa on the test subjects.
    """
    import matplotlib.pyplot as plt

    config = config or DemoConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    subjects = tuple(config.test_subjects) + tuple(config.pool_subjects)
    windows = load_bundled_eegmat(subjects)
    data = read_windows(windows)
    X, y, sfreq = data.X, data.y, data.sfreq
    groups = windows.get_metadata()["subject"].to_numpy()
    held_out_skill = _shift_matrix_figure(config, windows, out)
    histories = {}
    results = _run_low_label(
        X,
        y,
        groups,
        _demo_methods(config, sfreq),
        config.test_subjects,
        config.pool_subjects,
        ks=config.ks,
        seeds=config.seeds,
        out=out / "results.csv",
        histories=histories,
        spread=True,
    )
    summary = _summarize(results)
    with open(out / "results.json", "w") as f:
        json.dump(
            {
                "config": dataclasses.asdict(config),
                "shipped_encoder_skill_on_test_window": held_out_skill,
                "runs": results.to_dict("records"),
                "summary": {
                    f"{m} | k={k}": {
                        "balanced_accuracy_mean": float(
                            summary.loc[(m, k), ("balanced_accuracy", "mean")]
                        ),
                        "balanced_accuracy_std": float(
                            summary.loc[(m, k), ("balanced_accuracy", "std")]
                        ),
                        "kappa_mean": float(summary.loc[(m, k), ("kappa", "mean")]),
                    }
                    for m, k in summary.index
                },
            },
            f,
            indent=2,
            default=float,
        )
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    _plot_label_efficiency(results, chance=0.5, ax=ax)
    ax.set_title("EEGMAT rest vs arithmetic, 12 test subjects")
    fig.savefig(out / "label_efficiency.png", dpi=120)
    history_file = pretrained_path(config.encoder) / "pretrain_history.json"
    pretrain_history = json.loads(history_file.read_text()) if history_file.is_file() else None
    finetune = {}
    for (name, _, _), hist in histories.items():
        finetune.setdefault(name, []).append(hist)
    fig = plot_training_curves(pretrain_history, finetune)
    fig.savefig(out / "training_curves.png", dpi=120)
    plt.close("all")
    return results


def format_results(results):
    """The table as text: balanced accuracy per method and k, mean ± std over draws."""
    return _format_summary(results, chance=0.5)

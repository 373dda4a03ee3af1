"""What the fine-tuning benchmarks share (``bench_finetuning``,
``bench_finetuning_outer``, ``bench_pretext_comparison``): the main job's EEGMAT split,
the fine-tuner at the library's defaults but some parameters, a callback that scores
held-out windows after every epoch, and the tables of the rows they write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import balanced_accuracy_score
from skorch.callbacks import Callback

from benchmarks.lib.seeding import isolated_random_state
from braindecode_pars import PARSFineTuner
from braindecode_pars.datasets.bundled import BUNDLED_POOL_SUBJECTS, load_bundled_eegmat
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.io.windows import read_windows
from braindecode_pars.models.encoder import PatchEncoder

ENCODER = "pars-small-v2"
POOL = tuple(BUNDLED_POOL_SUBJECTS)
#: the selection folds: 2 pool subjects held out, the other 6 labelled
FOLDS = tuple(POOL[i::4] for i in range(4))
MINORITY = 1  # arithmetic: 6 of each subject's 24 windows


class HeldOutCurve(Callback):
    """Balanced accuracy of fixed held-out windows after every epoch, recorded in the
    history as ``heldout_bal_acc`` (and the share predicted as the minority class as
    ``heldout_minority``); torch's random state is restored, so the fit is unchanged.
    ``groups``: the held-out windows' subjects, for a fine-tuner that aligns them."""

    def __init__(self, X, y, groups=None):
        self.X, self.y, self.groups = X, y, groups

    def on_epoch_end(self, net, **kwargs):
        state = torch.get_rng_state()
        try:
            pred = net.predict(self.X, groups=self.groups)
        finally:
            torch.set_rng_state(state)
        net.history.record("heldout_bal_acc", float(balanced_accuracy_score(self.y, pred)))
        net.history.record("heldout_minority", float(np.mean(pred == MINORITY)))


def load():
    """The 20 subjects' windows: X (n, 19, 1000), y, subject of each window, sfreq."""
    windows = load_bundled_eegmat(tuple(EEGMAT_TEST_SUBJECTS) + POOL)
    data = read_windows(windows)
    groups = windows.get_metadata()["subject"].to_numpy()
    return data.X, np.asarray(data.y), groups, float(data.sfreq)


def fine_tuner(encoder, params, seed, sfreq, callbacks=None):
    """``PARSFineTuner`` at the library's defaults but ``params``; ``encoder=None`` is a
    new encoder of ``pars-small-v2``'s size (training from scratch)."""
    if encoder is None:
        encoder = scratch_encoder(seed, sfreq)
    return PARSFineTuner(
        encoder=encoder,
        sfreq=sfreq,
        random_state=seed,
        verbose=0,
        callbacks=callbacks,
        **params,
    )


def scratch_encoder(seed, sfreq):
    """A new encoder of ``pars-small-v2``'s size, initialised from ``seed``."""
    size = load_encoder(ENCODER).config.asdict()
    with isolated_random_state(seed, "cpu"):
        return PatchEncoder(sfreq=sfreq, **size)


def read_rows(path):
    """The rows of a JSON-lines file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def curve_table(frame, epochs, scored):
    """Markdown rows: per candidate and start, the mean training loss and the mean
    recorded balanced accuracy (``scored``: the column's name) at each of ``epochs``,
    over the fits that reached that epoch and recorded it (NaN: not read that epoch)."""
    lines = [
        "| candidate | start | " + " | ".join(f"loss @{e}" for e in epochs) + " | "
        + " | ".join(f"{scored} @{e}" for e in epochs) + " |",
        "|---|---|" + "---|" * (2 * len(epochs)),
    ]  # fmt: skip
    for (name, start), part in frame.groupby(["candidate", "start"], sort=False):
        cells = []
        for key in ("train_loss", "heldout_bal_acc"):
            for e in epochs:
                values = [c[e - 1] for c in part[key] if len(c) >= e and c[e - 1] == c[e - 1]]
                cells.append(f"{np.mean(values):.3f}" if values else "-")
        lines.append(f"| {name} | {start} | " + " | ".join(cells) + " |")
    return lines

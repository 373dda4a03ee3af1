"""
Continue PARS pretraining on your recordings, then fine-tune on motor imagery
=============================================================================

This example runs the library's main workflow on the bundled recordings of one
PhysioNet-MI subject, starting from the shipped encoder (``pars-small``, 64 x 4,
pretrained on about 55 channel-hours of other EEG):

1. measure the shipped model's pretext skill on this subject's recordings, then
   continue PARS pretraining on the runs that hold no imagery trial (baselines and
   executed movements), one random channel of a random 10-s crop per example;
2. look at the predicted and true shift matrices of a window from an imagery run
   that pretraining never saw (the paper's Fig. 6);
3. fine-tune the 4-class imagery task (left fist, right fist, both fists, both
   feet) with :func:`sklearn.model_selection.cross_val_score`, leaving one block of
   runs out, from the continued encoder and from scratch, beside the band-power
   floor.

Pretraining from nothing needs far more data and time than a documentation build
has (see :doc:`/pretraining`); continuing from the shipped encoder takes seconds.
"""

# %%
# Pretraining data at the shipped encoder's rate
# ----------------------------------------------
# The shipped encoder works at 100 Hz on 10-s windows; the recordings are cut to
# that directly (``sfreq=100``). A tenth of the windows is held out to measure the
# pretext skill on fixed draws: 1 - loss / (loss of predicting no shift), 0 for an
# encoder that learned nothing.
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.model_selection import LeaveOneGroupOut, cross_val_score

from braindecode_pars import PARSClassifier, PARSFineTuner, PretrainNet
from braindecode_pars.datasets import load_physionet_mi
from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
from braindecode_pars.features import band_power_pipeline
from braindecode_pars.hub import load_pretext_model
from braindecode_pars.io import read_windows, resample_windows
from braindecode_pars.metrics import make_scorer
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.viz import plot_shift_matrices, plot_training_curves

# ``BRAINDECODE_PARS_QUICK_EXAMPLES=1`` (the test suite) runs the example at a reduced
# size: fewer epochs.
QUICK = os.environ.get("BRAINDECODE_PARS_QUICK_EXAMPLES") == "1"
epochs, head_epochs = (2, 2) if QUICK else (8, 20)  # pretraining, trained heads

torch.manual_seed(0)
view = SingleChannelWindows(load_physionet_mi_continuous(window_seconds=10, sfreq=100))
view.sfreq = 100.0
held_out = SingleChannelWindows(
    load_physionet_mi_continuous(runs=[4], window_seconds=10, stride_seconds=10, sfreq=100),
    max_shift=0,
)
X_held_out = torch.stack([held_out[i][0] for i in range(len(held_out))])
print(f"{len(view)} pretraining windows, {len(X_held_out)} held-out windows of imagery run 4")


def skill_on(model, X):
    """Pretext skill on ``X`` with fixed patches and masks."""
    with torch.no_grad():
        out = model.eval()(X, generator=torch.Generator().manual_seed(0))
    return pretext_skill(out["loss"].item(), out["trivial_loss"].item())


model = load_pretext_model("pars-small")  # the encoder and its pair decoder
print(f"shipped model's skill on imagery run 4, before: {skill_on(model, X_held_out):.3f}")

# %%
# Continue pretraining through skorch
# -----------------------------------
# A few epochs at a small learning rate, without warm-up. The shipped encoder
# already places this subject's patches well above chance (a skill near 0.5, where
# an encoder that learned nothing scores 0); a few seconds of continued pretraining
# keep it there rather than raise it: adapting to a new amplifier takes more data
# than one subject's six minutes.
net = PretrainNet(
    model,
    max_epochs=epochs,
    batch_size=32,
    lr=3e-4,
    warmup_fraction=0.0,
    valid_fraction=0.1,
    progress_bar=False,
)
net.fit(view)
skill = net.history[:, "valid_skill"]
print(f"validation skill by epoch: {np.round(skill, 3)}")
print(f"skill on imagery run 4, after: {skill_on(net.module_, X_held_out):.3f}")

# %%
# Shift matrices of a held-out window
# -----------------------------------
# Rows and columns of patches that kept their positional embedding are empty: those
# pairs are not in the loss. The predicted shifts follow the targets' sign and order
# (earlier patches above, later ones below), shrunk towards zero as a squared-error
# predictor hedges when unsure: the encoder places patches it has never seen from
# their content alone.
plot_shift_matrices(net.module_, X_held_out[:1], generator=torch.Generator().manual_seed(0))
plt.show()

# %%
# Fine-tune the 4-class task, leaving one block of runs out
# ---------------------------------------------------------
# ``load_physionet_mi`` gives 4-s trials at 200 Hz; :func:`~braindecode_pars.io.resample_windows`
# brings them to the encoder's 100 Hz with MNE's resampling. Runs 3-6, 7-10 and
# 11-14 each hold every class once, so each test fold does too.
windows = load_physionet_mi()
windows_100 = resample_windows(windows, sfreq=None, new_sfreq=100)
data = read_windows(windows_100)
X, y = data.X, data.y
blocks = windows.get_metadata()["block"].to_numpy()
print(f"{len(X)} trials of {X.shape[1]} channels x {X.shape[2]} samples at {data.sfreq} Hz")

common = dict(sfreq=data.sfreq, random_state=0, verbose=0)
head = dict(max_epochs=head_epochs, batch_size=16)  # the trained heads'
frozen_head = PARSFineTuner(strategy="frozen", verbose=0, **head)
candidates = {
    "probe: PARS (continued)": PARSClassifier(encoder=net.encoder, **common),
    "PARS (continued), frozen head": PARSClassifier(
        encoder=net.encoder, head=frozen_head, **common
    ),
    "scratch": PARSFineTuner(encoder=None, **head, **common),  # a new small encoder, all trained
    "band-power floor": band_power_pipeline(sfreq=data.sfreq),
}
scorer = make_scorer("balanced_accuracy")
results = {}
for name, clf in candidates.items():
    results[name] = cross_val_score(clf, X, y, groups=blocks, cv=LeaveOneGroupOut(), scoring=scorer)
    print(f"{name:29s} balanced accuracy per block: {np.round(results[name], 3)}")

# %%
# With one subject and 15 training trials per class in each fold, the classical
# floor wins here: log band power (the mu and beta rhythms that motor imagery
# modulates) into a logistic regression scores about 0.44 over the three blocks.
# The default probe has band power in it too, but beside 64 x 64 encoder features
# and the 2,080 tangent-space features of 64 channels, for 30 training trials: it
# and the trained head over the same frozen encoder score about a third, above the
# model trained from scratch (about a quarter, chance). This example shows the
# workflow, not the method's best case; the comparisons over
# subjects and seeds are in ``benchmarks/results/``. The pretraining loss against
# the loss of learning nothing, the skill, and the fine-tuning curves of one fitted
# classifier:
clf = PARSClassifier(encoder=net.encoder, head=frozen_head, **common)
clf.fit(X[blocks != 3], y[blocks != 3])
plot_training_curves(net.history, {"PARS (continued), frozen head": [clf.head_.history_]})
plt.show()

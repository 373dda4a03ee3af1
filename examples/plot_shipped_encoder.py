"""
The shipped encoder: its shift predictions, its skill, and a few labels
=======================================================================

The package's default encoder, ``"pars-small-v2"`` (100 Hz, 1-s patches, 64
features, 4 blocks), was pretrained on 10-s crops of EEGMAT's training subjects,
Sleep-EDF nights and Muse headband recordings (``"pars-small"``, the first shipped
encoder, kept for reproducibility, loads by its name the same way). This example:

1. loads it, and the whole PARS model it was pretrained in;
2. draws its predicted and true shift matrices on one channel of a bundled EEGMAT
   window of a test subject (the paper's Fig. 6) and prints its pretext skill;
3. fits ``PARSClassifier``'s default head over it, the probe (and, beside it, a
   trained spatial head over the frozen encoder) on two labelled subjects (rest vs
   mental arithmetic) and scores both on two others, beside the band-power floor.

Everything runs from the EEG bundled with the package, in well under a minute on
a CPU.
"""

# %%
# The encoder and its pretext model
# ---------------------------------
# ``load_encoder`` takes a shipped name, a folder in braindecode's Hugging Face
# layout (``encoder.save_pretrained(folder)``) or a file of ``save_encoder``.
# ``load_pretext_model`` also reads the decoder that was trained with it.
import json

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import PARSClassifier, PARSFineTuner, load_encoder
from braindecode_pars.datasets import load_bundled_eegmat
from braindecode_pars.features import band_power_pipeline
from braindecode_pars.hub import load_pretext_model
from braindecode_pars.hub.folders import pretrained_path
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.viz import plot_pretext_skill, plot_shift_matrices

encoder = load_encoder("pars-small-v2")
print(
    f"pars-small-v2: {encoder.sfreq:g} Hz, {encoder.patch_seconds:g}-s patches, "
    f"{encoder.emb_dim} features, {encoder.depth} blocks, "
    f"{sum(p.numel() for p in encoder.parameters()):,} parameters"
)
print("files:", sorted(p.name for p in pretrained_path("pars-small-v2").iterdir()))
model = load_pretext_model("pars-small-v2")  # PARS on 10-s windows (1000 samples)

# %%
# How far its pretraining went: the validation skill per epoch (0 is the model
# that learned nothing, 1 a perfect one; see :doc:`/pretraining`).
history = json.loads((pretrained_path("pars-small-v2") / "pretrain_history.json").read_text())
plot_pretext_skill(history, title="pars-small-v2, pretraining")
plt.show()

# %%
# Shift matrices of one channel of a test subject's window
# --------------------------------------------------------
# Subject 1 is one of EEGMAT's 12 test subjects, never used for pretraining. The
# first 10-s window, its first channel, as a (batch, 1, n_times) tensor. A seeded
# generator fixes the patches and masks, so the figure is the same on every run;
# ``predict_shifts`` gives the loss and the shift matrices the figure draws.
windows = load_bundled_eegmat(subjects=[1])
X = torch.as_tensor(windows[0][0][:1])[None]  # (1, 1, 1000)
with torch.no_grad():
    out = model.predict_shifts(X, generator=torch.Generator().manual_seed(0))
skill = float(pretext_skill(out["loss"], out["trivial_loss"]))
loss, trivial = float(out["loss"]), float(out["trivial_loss"])
print(f"skill on this channel: {skill:.3f} (loss {loss:.4f}, predicting no shift {trivial:.4f})")
plot_shift_matrices(out, index=0, title=f"pars-small-v2, test subject 1 (skill {skill:.2f})")
plt.show()

# %%
# One window is a noisy estimate; every channel of every window of the subject:
X_all = torch.as_tensor(np.stack([windows[i][0] for i in range(len(windows))]))
with torch.no_grad():
    out = model(X_all.reshape(-1, 1, X_all.shape[-1]), generator=torch.Generator().manual_seed(0))
skill = float(pretext_skill(out["loss"], out["trivial_loss"]))
print(f"skill over {len(X_all)} windows x {X_all.shape[1]} channels: {skill:.3f}")

# %%
# Fine-tune on two labelled subjects
# ----------------------------------
# Rest (0) against mental arithmetic (1), with ``PARSClassifier`` over the shipped
# encoder and its default head, the probe (:class:`~braindecode_pars.PARSProbe`): a
# class-balanced logistic regression over log band power, with the Riemannian tangent
# space of the channels' covariances and the frozen encoder's per-channel features
# where inner folds on the labelled windows show they help, in seconds
# (:doc:`/benchmarks/defaults`). Beside it, the trained spatial head over the frozen encoder
# (``head=PARSFineTuner(strategy="frozen")``, five epochs here), and the band-power
# floor.
train = load_bundled_eegmat(subjects=[0, 2])  # labelled pool subjects
test = load_bundled_eegmat(subjects=[1, 4])  # test subjects
y_test = test.get_metadata()["target"].to_numpy()

classifiers = {
    "probe: pars-small-v2": PARSClassifier(
        encoder="pars-small-v2", sfreq=100, random_state=0, verbose=0
    ),
    "frozen pars-small-v2, trained spatial head": PARSClassifier(
        encoder="pars-small-v2",
        head=PARSFineTuner(strategy="frozen", max_epochs=5, verbose=0),
        sfreq=100,
        random_state=0,
        verbose=0,
    ),
    "band-power floor": band_power_pipeline(),
}
for name, clf in classifiers.items():
    clf.fit(train)  # labels and sampling rate come from the windows
    score = balanced_accuracy_score(y_test, clf.predict(test))
    print(f"{name:50s} balanced accuracy on 2 test subjects: {score:.3f}")

# %%
# Two labelled subjects and two test subjects say little: chance is 0.5 and the
# spread between draws of subjects is large. ``braindecode-pars demo`` runs this
# comparison with 1 and 2 labelled subjects, five draws each, on all 12 test
# subjects, with training from scratch beside it.

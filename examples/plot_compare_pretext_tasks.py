"""
Compare pretext tasks on one footing
====================================

Scratch, MAE, MP3, DropPos and PARS with the same pretraining data, the same
encoder, the same steps and the same seed, on the bundled PhysioNet-MI subject,
beside the probe without an encoder: the paper's Table 1 at a very small scale.

Each pretext task pretrains the same :class:`~braindecode_pars.PatchEncoder` with
:class:`~braindecode_pars.PARSPretrainer` (``method=``); each encoder is then fully
fine-tuned by :class:`~braindecode_pars.PARSClassifier` with
``head=PARSFineTuner(strategy="full")`` (scratch: a new encoder under the same head).
The settings below take a few minutes on a CPU; the repository's recorded comparison
runs ``python -m benchmarks.lab compare``.
"""

# %%
# The pretext models share one interface
# --------------------------------------
# Each returns its ``loss`` and ``trivial_loss``, the loss of a model that learned
# nothing on the same batch and draws; their ratio gives the pretext skill (0 for
# learning nothing, see :doc:`/pretraining`). Untrained, none does better: the
# skill is near 0 or below.
import os
import warnings

import matplotlib.pyplot as plt
import torch
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe
from braindecode_pars.datasets import load_physionet_mi
from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
from braindecode_pars.models.pretext import PRETEXT_MODELS
from braindecode_pars.models.pretext.base import pretext_skill

# ``BRAINDECODE_PARS_QUICK_EXAMPLES=1`` (the test suite) runs the example at a reduced
# size: fewer steps and epochs.
QUICK = os.environ.get("BRAINDECODE_PARS_QUICK_EXAMPLES") == "1"
steps, epochs = (10, 1) if QUICK else (150, 10)  # pretraining steps, fine-tuning epochs

torch.manual_seed(0)
X = torch.randn(4, 1, 6000)  # four single-channel 30-s windows at 200 Hz
for name, cls in PRETEXT_MODELS.items():
    model = cls(n_times=6000, sfreq=200, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    with torch.no_grad():
        out = model(X, generator=torch.Generator().manual_seed(0))
    loss, trivial = out["loss"].item(), out["trivial_loss"].item()
    print(
        f"{name:8s} loss {loss:.3f}  learned nothing {trivial:.3f}  "
        f"skill {pretext_skill(loss, trivial):+.3f}"
    )

# %%
# Pretrain each task on the same unlabelled windows
# -------------------------------------------------
# The runs of the subject without imagery trials (baselines, executed movements), cut
# into 30-s windows; the same small encoder and 150 steps for every task. This short,
# each pretext task warns that its encoder learned (almost) nothing; the first clause
# of each warning is printed.
unlabelled = load_physionet_mi_continuous([1], window_seconds=30.0, stride_seconds=15.0)
size = dict(emb_dim=32, depth=2, n_heads=4, ff_dim=64)
encoders = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    for method in ("mae", "mp3", "droppos", "pars"):
        stage = PARSPretrainer(method, **size, steps=steps, random_state=0, verbose=0)
        encoders[method] = stage.fit(unlabelled).encoder_
        skill = stage.history_[-1].get("valid_skill", float("nan"))
        print(f"{method:8s} held-out pretext skill {skill:+.3f}")
for warning in caught:
    print(f"{warning.category.__name__}: {str(warning.message).split(': ')[0]}")

# %%
# Fine-tune each encoder on the same labels
# -----------------------------------------
# The 4-class imagery task: train on the first two blocks of runs, test on the third.
windows = load_physionet_mi([1])
blocks = windows.get_metadata()["block"].to_numpy()
train = [i for i, b in enumerate(blocks) if b != 3]
test = [i for i, b in enumerate(blocks) if b == 3]
train_windows = torch.utils.data.Subset(windows, train)
test_windows = torch.utils.data.Subset(windows, test)


def fine_tuned(encoder):
    """The encoder (None: a new one of the same size) fully fine-tuned."""
    if encoder is None:
        encoder = PARSPretrainer(**size, max_epochs=0, random_state=0, verbose=0)
    head = PARSFineTuner(strategy="full", max_epochs=epochs, verbose=0)
    return PARSClassifier(encoder=encoder, head=head, random_state=0, verbose=0)


y_test = windows.get_metadata()["target"].to_numpy()[test]


def score(clf):
    """Balanced accuracy of ``clf``, fitted on the training blocks, on the test block."""
    return balanced_accuracy_score(y_test, clf.fit(train_windows).predict(test_windows))


scores = {"no encoder (probe)": score(PARSProbe()), "scratch": score(fine_tuned(None))}
for method, encoder in encoders.items():
    scores[method] = score(fine_tuned(encoder))
for name, value in scores.items():
    print(f"{name:20s} balanced accuracy {value:.3f}")

# %%
# The scores side by side
# -----------------------
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(list(scores), list(scores.values()), color="tab:blue")
ax.axvline(0.25, color="k", linestyle=":", label="chance (4 classes)")
ax.set_xlabel("balanced accuracy on the held-out block")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %%
# At this scale (one subject, seconds of pretraining) no pretext task gets beyond
# its trivial solution and the differences between methods are within the noise;
# the paper's comparison pretrains on 1.5 million windows.

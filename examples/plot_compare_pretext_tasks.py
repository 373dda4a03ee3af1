"""
Compare pretext tasks on one footing
====================================

Scratch, MAE, MP3, DropPos and PARS with the same pretraining data, the same
encoder, the same epochs and the same seeds, on the bundled PhysioNet-MI subject:
the paper's Table 1 and label-efficiency figure (Fig. 3) at a very small scale.

Each pretext model wraps the same :class:`~braindecode_pars.PatchEncoder` and
trains through the same :class:`~braindecode_pars.PretrainNet`; the fine-tuned
estimator is :class:`~braindecode_pars.PARSClassifier` with ``pretrained_encoder``
(or ``pretrain_epochs=0`` for scratch). The settings below take about a minute; the
recorded comparison of the repository uses ``braindecode-pars compare``.
"""

# %%
# The pretext models share one interface
# --------------------------------------
import tempfile

import matplotlib.pyplot as plt
import torch

from braindecode_pars.experiments.comparison import (
    ComparisonConfig,
    plot_label_efficiency,
    run_comparison,
    summarize,
)
from braindecode_pars.models import PRETEXT_MODELS

X = torch.randn(4, 1, 6000)  # four single-channel 30-s windows at 200 Hz
for name, cls in PRETEXT_MODELS.items():
    model = cls(n_times=6000, sfreq=200, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    print(f"{name:8s} loss {model(X)['loss'].item():.3f}  encoder: {type(model.encoder).__name__}")

# %%
# Run the comparison
# ------------------
# One seed, one or two labelled blocks of runs, a small encoder.
config = ComparisonConfig(
    seeds=(0,),
    n_train_blocks=(1, 2),
    emb_dim=32,
    depth=2,
    n_heads=4,
    ff_dim=64,
    pretrain_epochs=5,
    finetune_epochs=10,
)
out = tempfile.mkdtemp()
scores = run_comparison(out, config)
summary = summarize(scores)
print(summary.round(3))

# %%
# Label efficiency
# ----------------
plot_label_efficiency(summary)
plt.show()

# %%
# At this scale (one subject, seconds of pretraining) the differences between
# methods are within the noise; the paper's comparison pretrains on 1.5 million
# windows.

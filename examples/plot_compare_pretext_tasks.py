"""
Compare pretext tasks on one footing
====================================

Scratch, MAE, MP3, DropPos and PARS with the same pretraining data, the same
encoder, the same epochs and the same seeds, on the bundled PhysioNet-MI subject,
beside the band-power floor: the paper's Table 1 and label-efficiency figure
(Fig. 3) at a very small scale.

Each pretext model wraps the same :class:`~braindecode_pars.PatchEncoder` and
trains through the same :class:`~braindecode_pars.PretrainNet`; each saved encoder
is fully fine-tuned by :class:`~braindecode_pars.PARSClassifier` with
``head=PARSFineTuner(strategy="full")`` (scratch: a new encoder under the same head);
the floor is
:func:`~braindecode_pars.probe.band_power_pipeline`. The settings below take about a minute; the
recorded comparison of the repository uses ``braindecode-pars compare``.
"""

# %%
# The pretext models share one interface
# --------------------------------------
# Each returns its ``loss`` and ``trivial_loss``, the loss of a model that learned
# nothing on the same batch and draws; their ratio gives the pretext skill (0 for
# learning nothing, see :doc:`/pretraining`). Untrained, none does better: the
# skill is near 0 or below.
import tempfile
import warnings

import matplotlib.pyplot as plt
import torch

from braindecode_pars.experiments.comparison import (
    ComparisonConfig,
    plot_label_efficiency,
    run_comparison,
    summarize,
)
from braindecode_pars.models import PRETEXT_MODELS
from braindecode_pars.models.pretext import pretext_skill

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
# Run the comparison
# ------------------
# One seed, one or two labelled blocks of runs, a small encoder. Pretraining this
# short, each pretext task warns that its encoder learned (almost) nothing; the
# warnings are kept and the first clause of each printed under the scores.
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
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    scores = run_comparison(out, config)
summary = summarize(scores)
print(summary.round(3))
for warning in caught:
    print(f"{warning.category.__name__}: {str(warning.message).split(': ')[0]}")

# %%
# Label efficiency
# ----------------
plot_label_efficiency(summary)
plt.show()

# %%
# At this scale (one subject, seconds of pretraining) no pretext task gets beyond
# its trivial solution and the differences between methods are within the noise;
# the paper's comparison pretrains on 1.5 million windows.

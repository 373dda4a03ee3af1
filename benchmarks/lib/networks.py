"""The compact networks trained from scratch beside PARS in the few-label benchmarks
(``bench_pretext_comparison``, ``bench_finetuning_recipe``): braindecode's ``EEGNet`` and
``ShallowFBCSPNet`` at one training recipe."""

from __future__ import annotations

import math

import numpy as np
import torch

#: Each network's learning rate: EEGNet's paper's Adam default, and braindecode's
#: ShallowFBCSPNet example (0.0625 * 0.01).
NETWORK_LR = {"EEGNet": 1e-3, "ShallowFBCSPNet": 6.25e-4}
NETWORK_STEPS = 200
NETWORK_BATCH = 32


def compact_network(name, n_chans, n_times, n_classes, y_train, seed):
    """braindecode's ``EEGNet`` or ``ShallowFBCSPNet`` from scratch in an
    ``EEGClassifier``: AdamW at :data:`NETWORK_LR` without weight decay, cosine
    annealing over :data:`NETWORK_STEPS` optimiser steps of batch
    :data:`NETWORK_BATCH` (epochs rounded up), cross-entropy weighted by inverse class
    frequency (the scores are balanced accuracy), every window in an epoch (the last
    batch kept however small), no validation split (too few labels), the last epoch
    kept."""
    from braindecode import EEGClassifier
    from braindecode.models import EEGNet, ShallowFBCSPNet
    from skorch.callbacks import LRScheduler

    cls = {"EEGNet": EEGNet, "ShallowFBCSPNet": ShallowFBCSPNet}[name]
    signal = dict(n_chans=n_chans, n_outputs=n_classes, n_times=n_times, sfreq=100.0)
    epochs = math.ceil(NETWORK_STEPS / math.ceil(len(y_train) / NETWORK_BATCH))
    counts = np.bincount(y_train, minlength=n_classes).astype(float)
    weight = torch.tensor(len(y_train) / (n_classes * np.maximum(counts, 1)), dtype=torch.float32)
    # one line per concern: the loss, the optimiser, the loop, the data, the output
    return EEGClassifier(
        cls,
        **{f"module__{k}": v for k, v in signal.items()},
        criterion=torch.nn.CrossEntropyLoss, criterion__weight=weight,
        optimizer=torch.optim.AdamW, optimizer__lr=NETWORK_LR[name], optimizer__weight_decay=0.0,
        batch_size=NETWORK_BATCH, max_epochs=epochs, train_split=None,
        iterator_train__shuffle=True, iterator_train__drop_last=False,
        callbacks=[("lr_scheduler", LRScheduler("CosineAnnealingLR", T_max=epochs))],
        classes=list(range(n_classes)), device="cpu", verbose=0,
    )  # fmt: skip

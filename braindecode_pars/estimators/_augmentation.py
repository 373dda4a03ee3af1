"""The fine-tuner's data augmentation: the standard preset of braindecode transforms,
and a loader whose workers each draw their own augmentations."""

from __future__ import annotations

import numpy as np
import torch
from braindecode.augmentation import (
    ChannelsDropout,
    FTSurrogate,
    SmoothTimeMask,
)
from sklearn.utils import check_random_state

#: Names ``PARSFineTuner(augmentation=...)`` accepts for a preset.
AUGMENTATION_PRESETS = ("standard",)


#: Fewest channels that ``standard_augmentation`` drops channels of: 20 % of them is one
#: channel or more from 5 on; below, a dropped channel is a third or a half of the window
#: (on two channels it hid the label of a relative-amplitude task from the training
#: windows it struck, and fine-tuning memorised instead, :doc:`/benchmarks/finetuning`).
MIN_DROPOUT_CHANNELS = 5


def standard_augmentation(sfreq, probability=0.5, random_state=None, n_chans=None):
    """braindecode augmentations that keep the label of most EEG tasks and ignore the unit.

    Each applied to a batch with ``probability``: ``FTSurrogate`` (random Fourier
    phases: the spectrum kept, the waveform new), ``ChannelsDropout`` (20 % of the
    channels zeroed; only for windows of ``n_chans`` >= ``MIN_DROPOUT_CHANNELS`` (5)
    channels, or ``n_chans`` None) and ``SmoothTimeMask`` (one second masked). None of
    them adds a fixed amount of noise, so volts and microvolts are augmented alike (the
    encoder's instance normalisation ignores the unit too). ``random_state`` seeds
    their draws (None: numpy's global generator, as braindecode does); the fine-tuner's
    DataLoader workers each reseed their copy (:func:`augmented_loader`).
    """
    rng = check_random_state(random_state)  # one stream shared by the three
    dropout = n_chans is None or n_chans >= MIN_DROPOUT_CHANNELS
    return [
        FTSurrogate(probability, random_state=rng),
        *([ChannelsDropout(probability, p_drop=0.2, random_state=rng)] if dropout else []),
        SmoothTimeMask(probability, mask_len_samples=max(1, int(round(sfreq))), random_state=rng),
    ]


class _ReseedTransforms:
    """A DataLoader's ``worker_init_fn`` that reseeds, in each worker, the numpy
    generators of braindecode transforms from torch's seed of that worker.

    braindecode's ``AugmentedDataLoader`` applies its transforms in ``collate_fn``, so
    with DataLoader workers each worker applies its own copy of them, each holding a
    copy of the same ``RandomState`` (:func:`standard_augmentation` seeds one per
    fit): without a reseed every worker, and every epoch's new workers, would draw the
    same augmentations. torch's seed of a worker is the loader's base seed (drawn from
    torch's generator, so the fit's seed decides it) plus the worker's id: every
    worker, and every epoch, draws its own, and a seeded fit draws the same again.
    Each distinct generator gets its own stream (the three transforms of the standard
    augmentation share one, and still do); numpy's global generator, which torch
    already reseeds in each worker, is left alone. ``worker_init_fn``, the user's, runs
    after.
    """

    def __init__(self, transforms, worker_init_fn=None):
        self.transforms = transforms
        self.worker_init_fn = worker_init_fn

    def __call__(self, worker_id):
        seed = torch.initial_seed()  # the loader's base seed + worker_id
        generators = []
        for transform in self.transforms:
            parts = transform.modules() if isinstance(transform, torch.nn.Module) else ()
            for part in parts:
                rng = getattr(part, "rng", None)
                if (
                    isinstance(rng, np.random.RandomState)
                    and rng is not np.random.mtrand._rand
                    and all(rng is not known for known in generators)
                ):
                    generators.append(rng)
        for i, rng in enumerate(generators):
            rng.seed(np.random.SeedSequence([seed, i]).generate_state(4))
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)


def augmented_loader(dataset, transforms, **kwargs):
    """braindecode's ``AugmentedDataLoader`` of ``dataset`` with ``transforms``; with
    DataLoader workers (``num_workers`` > 0) each worker's transforms draw their own
    augmentations (:class:`_ReseedTransforms`), without them the loader is braindecode's
    own."""
    from braindecode.augmentation import AugmentedDataLoader

    if kwargs.get("num_workers", 0):
        kwargs["worker_init_fn"] = _ReseedTransforms(transforms, kwargs.get("worker_init_fn"))
    return AugmentedDataLoader(dataset, transforms=transforms, **kwargs)

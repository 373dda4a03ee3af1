"""The pretraining problem of the training tests: ramps, and a PARS model for them.

Used by tests/internals/test_training.py and by tests/ddp_worker.py (which torchrun runs outside
pytest, so this module has no side effects), and by the tests that read a real run's folder
(:func:`ramp_run`).
"""

import torch

from braindecode_pars import PARS


def ramp_dataset(n=64, T=300):
    """``n`` single-channel ramps of ``T`` samples (random slope and offset, a little
    noise): a patch's level gives its position away, so PARS learns them quickly."""
    t = torch.linspace(0, 1, T)
    X = (torch.rand(n, 1, 1) * 4 + 0.5) * t + torch.randn(n, 1, 1) + 0.01 * torch.randn(n, 1, T)
    return torch.utils.data.TensorDataset(X, torch.zeros(n))


def ramp_pars(**encoder):
    """PARS for the ramps: 300 samples at 10 Hz, 12 patches, 75 % position-masked."""
    return PARS(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.75, **encoder)


def ramp_run(run_dir, max_epochs=3, valid_fraction=0.25, **kwargs):
    """A real pretraining run on 32 ramps (10 Hz, 30-s windows; the tests' ``TINY``
    encoder, 12 patches, half of them position-masked), written to ``run_dir``; its net.
    ``kwargs`` go to ``run_pretraining``."""
    from braindecode_pars.pretraining import SingleChannelWindows, run_pretraining

    from .conftest import TINY

    torch.manual_seed(0)
    view = SingleChannelWindows(ramp_dataset(32).tensors[0].numpy())
    view.sfreq = 10.0
    return run_pretraining(
        view, checkpoint_dir=run_dir, max_epochs=max_epochs, batch_size=16, lr=3e-3,
        progress_bar=False, n_patches=12, pos_mask_ratio=0.5, encoder_kwargs=TINY,
        valid_fraction=valid_fraction, **kwargs,
    )  # fmt: skip

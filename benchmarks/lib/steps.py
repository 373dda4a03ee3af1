"""PARS training steps beside the encoder-alone step, on the CPU: the sizes and windows
the step benchmarks share (``bench_pair_decoder``, ``bench_flops``,
``bench_gpu``)."""

from __future__ import annotations

import copy

import torch

from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import ENCODER_SIZES

N_TIMES, SFREQ = 6000, 200.0  # 30-s windows at 200 Hz (paper section 2.5)
SMALL_N_TIMES, SMALL_SFREQ, SMALL_BATCH = 1000, 100.0, 64  # 10-s windows at 100 Hz

#: Encoder sizes of the step table: name -> (encoder settings, small signal?)
SIZES = {
    "64 x 4": (ENCODER_SIZES["small"], True),
    "128 x 6": (dict(emb_dim=128, depth=6, n_heads=8, ff_dim=256), True),
    "512 x 8 (paper)": (ENCODER_SIZES["paper"], False),
}

#: Device types where pretraining runs AdamW fused (one kernel per step over every
#: parameter) unless told otherwise: torch has the fused kernel there.
FUSED_DEVICE_TYPES = ("cpu", "cuda")


def optimiser(module, device="cpu"):
    """AdamW as pretraining builds it (``PretrainNet``'s defaults: lr 1e-4, weight decay
    1e-4, the fused implementation on a CPU or CUDA ``device``)."""
    fused = torch.device(device).type in FUSED_DEVICE_TYPES
    kwargs = dict(lr=1e-4, weight_decay=1e-4, **({"fused": True} if fused else {}))
    return torch.optim.AdamW(module.parameters(), **kwargs)


def model_and_batch(batch_size, n_times=N_TIMES, sfreq=SFREQ, **model_kwargs):
    """A PARS model (``model_kwargs``), a batch of ``n_times`` single-channel samples,
    and the patches and position masks its encoder alone is stepped on."""
    model = PARS(n_times=n_times, sfreq=sfreq, **model_kwargs)
    X = torch.randn(batch_size, 1, n_times)
    starts = model.sample_patches(batch_size, "cpu")
    pos_mask, _ = model.mask_positions(batch_size, "cpu")
    return model, X, starts, pos_mask


def make_steps(
    n_patches,
    decoder,
    impl,
    batch_size,
    size=None,
    small=False,
    amp=False,
    wrap=None,
    own_encoder=False,
):
    """A PARS training step and the encoder-alone step on the same patches and masks;
    ``amp``: forward passes under bf16 autocast (as ``PretrainNet(amp=True)``);
    ``wrap``: applied to the model and to the encoder (``torch.compile``,
    DistributedDataParallel); ``own_encoder``: the encoder-alone step trains a copy
    of the encoder with its own optimiser (two DistributedDataParallel wrappers must
    not share parameters)."""
    n_times, sfreq = (SMALL_N_TIMES, SMALL_SFREQ) if small else (N_TIMES, SFREQ)
    model, X, starts, pos_mask = model_and_batch(
        batch_size,
        n_times,
        sfreq,
        n_patches=n_patches,
        decoder=decoder,
        decoder_impl=impl,
        **(size or {}),
    )
    encoder = copy.deepcopy(model.encoder) if own_encoder else model.encoder
    wrap = wrap or (lambda module: module)
    pars, encoder = wrap(model), wrap(encoder)

    pars_opt = optimiser(pars)
    encoder_opt = optimiser(encoder) if own_encoder else pars_opt

    def pars_step():
        pars_opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = pars(X)["loss"]
        loss.backward()
        pars_opt.step()

    def encoder_step():
        encoder_opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = encoder(X, starts=starts, pos_mask=pos_mask).float().pow(2).mean()
        loss.backward()
        encoder_opt.step()

    pars_step.model = model  # for benchmarks that change the model between steps
    return pars_step, encoder_step

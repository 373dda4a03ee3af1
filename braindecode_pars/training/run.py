"""One call to pretrain an encoder with any pretext task."""

from __future__ import annotations

import logging
from pathlib import Path

from ..hub import save_encoder
from ..models import PRETEXT_MODELS
from . import distributed
from .pretrain import PretrainNet

logger = logging.getLogger(__name__)


def pretrain(
    view,
    method="pars",
    checkpoint_dir=None,
    max_epochs=1000,
    batch_size=512,
    lr=1e-4,
    device="cpu",
    amp=False,
    compile=False,
    num_workers=0,
    progress_bar=True,
    valid_fraction=None,
    encoder_kwargs=None,
    weight_decay=1e-4,
    **pretext_kwargs,
):
    """Pretrain a PatchEncoder on a single-channel view with one pretext task.

    Parameters
    ----------
    view : SingleChannelWindows
        The pretraining examples; its ``n_times`` and ``sfreq`` set the model's.
    method : {"pars", "mae", "mp3", "droppos"}
        The pretext task.
    checkpoint_dir : str | Path | None
        Checkpoints and the resumable state (see :class:`PretrainNet`); the final
        encoder is also written there as ``encoder.pt`` (by rank 0).
    max_epochs, batch_size, lr, device, amp
        As in :class:`PretrainNet` (``batch_size`` per process when distributed).
    compile : bool
        ``torch.compile`` the model (skorch's ``compile``).
    num_workers : int
        DataLoader worker processes.
    valid_fraction : float | None
        Share of the windows held out to measure the validation pretext skill.
    weight_decay : float
        AdamW's weight decay (paper: 1e-4).
    encoder_kwargs : dict | None
        ``emb_dim``, ``depth``, ``n_heads``, ``ff_dim``, ``patch_seconds``; the
        paper's values by default.
    **pretext_kwargs
        Settings of the pretext model (``n_patches``, ``pos_mask_ratio``,
        ``mask_ratio``...).

    Returns
    -------
    net : PretrainNet
        The fitted net; ``net.encoder`` is the pretrained encoder.
    """
    if method not in PRETEXT_MODELS:
        allowed = ", ".join(repr(m) for m in PRETEXT_MODELS)
        raise ValueError(
            f"Invalid value for the 'method' parameter. Allowed values are {allowed}, but got "
            f"{method!r} instead."
        )
    if getattr(view, "sfreq", None) is None:
        raise ValueError("'view' does not know its sampling rate (view.sfreq is None).")
    model = PRETEXT_MODELS[method](
        n_times=view.n_times, sfreq=view.sfreq, **(encoder_kwargs or {}), **pretext_kwargs
    )
    net = PretrainNet(
        model,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        device=device,
        amp=amp,
        compile=compile,
        checkpoint_dir=checkpoint_dir,
        progress_bar=progress_bar,
        valid_fraction=valid_fraction,
        iterator_train__num_workers=num_workers,
        optimizer__weight_decay=weight_decay,
    )
    logger.info(
        "Pretraining %s (%d parameters) on %d single-channel windows of %d samples for %d "
        "epochs on %s.",
        type(model).__name__,
        sum(p.numel() for p in model.parameters()),
        len(view),
        view.n_times,
        max_epochs,
        device,
    )
    net.fit(view)
    if checkpoint_dir is not None and distributed.rank() == 0:
        save_encoder(net.encoder, Path(checkpoint_dir) / "encoder.pt")
    return net

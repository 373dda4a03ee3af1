"""One call to pretrain an encoder with any pretext task."""

from __future__ import annotations

import logging
from pathlib import Path

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.logs import warn_once
from braindecode_pars.hub.folders import save_encoder
from braindecode_pars.models.pair.kernels import DECODER_KERNEL_OPTIONS
from braindecode_pars.models.pretext import PRETEXT_MODELS
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining._split import training_windows
from braindecode_pars.pretraining.config import PAPER
from braindecode_pars.pretraining.net import BATCHES, PretrainNet
from braindecode_pars.pretraining.schedule import _batches_per_epoch, _draws_with_replacement
from braindecode_pars.pretraining.stopping import TimeLimit

logger = logging.getLogger(__name__)


def run_pretraining(
    view,
    method="pars",
    checkpoint_dir=None,
    max_epochs=PAPER.max_epochs,
    batch_size=PAPER.batch_size,
    lr=PAPER.lr,
    device="cpu",
    amp=False,
    compile=False,
    compile_mode=None,
    num_workers=0,
    store_read="random",
    checkpoint_every_minutes=5.0,
    progress_bar=True,
    valid_fraction=None,
    encoder_kwargs=None,
    weight_decay=PAPER.weight_decay,
    max_minutes=None,
    allow_new_budget=False,
    run_info=None,
    init_encoder=None,
    init_name=None,
    stop_signals="auto",
    callbacks=None,
    batches="auto",
    decoder_kernel=None,
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
        Checkpoints and the resumable state (see :class:`PretrainNet`); when the run
        has done all ``max_epochs``, the final encoder is also written there as
        ``encoder.pt`` (by rank 0). A folder without ``encoder.pt`` holds an unfinished
        run (interrupted, or stopped by ``max_minutes``): calling again with the same
        settings resumes it.
    max_epochs, batch_size, lr, device, amp
        As in :class:`PretrainNet` (``batch_size`` per process when distributed).
    compile : bool
        ``torch.compile`` the model (skorch's ``compile``).
    compile_mode : {None, "default", "reduce-overhead", "max-autotune", \
            "max-autotune-no-cudagraphs"}
        ``torch.compile``'s mode when ``compile`` (the net's ``compile__mode``; None:
        torch's default). "reduce-overhead" (and "max-autotune") replay the step as
        CUDA graphs on a GPU; the net marks a step boundary before every step and its
        log keeps copies of the losses.
    num_workers : int
        DataLoader worker processes.
    store_read : {"random", "disk"}
        How a store-backed view is read: random windows anywhere in it, or chunks in
        the order of its file shuffled in a buffer (see :class:`PretrainNet`).
    checkpoint_every_minutes : float
        With ``checkpoint_dir``, the whole state is saved at the end of the first epoch
        that ends this long after the last save (0: every epoch), at the end and when
        the run is stopped (see :class:`PretrainNet`).
    valid_fraction : float | None
        Share of the windows held out to measure the validation pretext skill.
    weight_decay : float
        AdamW's weight decay (paper: 1e-4).
    max_minutes : float | None
        Stop after the epoch in which this many minutes of training have passed
        (:class:`~braindecode_pars.pretraining.TimeLimit`), to pretrain in sittings; the
        returned net then has fewer than ``max_epochs`` epochs in its history.
    allow_new_budget : bool
        Resume a run saved with another ``max_epochs`` (see :class:`PretrainNet`).
    run_info : dict | None
        Facts recorded in the run's ``config.json`` for its model card (see
        :class:`PretrainNet`).
    init_encoder : PatchEncoder | None
        Start from this encoder's weights (its settings must be ``encoder_kwargs``'s)
        instead of a new initialisation; the pretext model's other parts start anew.
        The first log line then says that pretraining continues, from which encoder,
        and at which rate and warm-up.
    init_name : str | None
        How that line names ``init_encoder`` (``"'pars-small-v2'"``, a saved encoder's
        path in quotes); None: "the encoder given".
    stop_signals : "auto" | str | int | sequence | None
        Signals that stop the run at the next step boundary with its state saved in
        ``checkpoint_dir`` (:class:`PretrainNet`'s ``stop_signals``; the call then raises
        :class:`~braindecode_pars.pretraining.stopping.TrainingStopped`, and calling again
        continues from that step). Default, ``"auto"``: SIGTERM, what schedulers send,
        when ``checkpoint_dir`` is set; none without one.
    encoder_kwargs : dict | None
        Settings of the encoder (those of
        :class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`); the paper's
        values by default. With ``normalization="window+scale"`` and no
        ``log_std_mean``, the corpus statistics of the scale embedding are those of
        ``view`` (:meth:`SingleChannelWindows.log_std_statistics
        <braindecode_pars.pretraining.SingleChannelWindows.log_std_statistics>`).
    callbacks : list of (str, skorch Callback) | None
        More callbacks of the net (a
        :class:`~braindecode_pars.pretraining.ProbeMonitor`, a user's own).
    batches : {"auto", "host", "read-ahead", "device"}
        How the training batches reach the step (:class:`PretrainNet`'s ``batches``):
        drawn in the loop, read ahead by a thread, or drawn on the device; "auto": the
        device type's default.
    decoder_kernel : {None, "auto", "tables", "fused"}
        PARS's pair operator (:class:`PretrainNet`'s ``decoder_kernel``,
        ``PARS(decoder_kernel=...)``); None: the model's ("auto"). Other methods
        ignore it.
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
    check_option("batches", batches, BATCHES)
    check_option("decoder_kernel", decoder_kernel, (None, *DECODER_KERNEL_OPTIONS))
    if getattr(view, "sfreq", None) is None:
        raise ValueError("'view' does not know its sampling rate (view.sfreq is None).")
    encoder_kwargs = _with_corpus_statistics(dict(encoder_kwargs or {}), view)
    model = PRETEXT_MODELS[method](
        n_times=view.n_times, sfreq=view.sfreq, **encoder_kwargs, **pretext_kwargs
    )
    if init_encoder is not None:
        model.encoder.load_state_dict(init_encoder.state_dict())
    net = PretrainNet(
        model,
        max_epochs=max_epochs,
        batch_size=batch_size,
        lr=lr,
        device=device,
        amp=amp,
        compile=compile,
        compile__mode=compile_mode,
        checkpoint_dir=checkpoint_dir,
        progress_bar=progress_bar,
        valid_fraction=valid_fraction,
        iterator_train__num_workers=num_workers,
        store_read=store_read,
        checkpoint_every_minutes=checkpoint_every_minutes,
        optimizer__weight_decay=weight_decay,
        allow_new_budget=allow_new_budget,
        run_info=run_info,
        stop_signals=stop_signals,
        batches=batches,
        decoder_kernel=decoder_kernel,
        callbacks=[
            *(callbacks or []),
            *([] if max_minutes is None else [("time_limit", TimeLimit(max_minutes))]),
        ]
        or None,
    )
    n_train = training_windows(view, valid_fraction)
    world = distributed.world_size()
    per_epoch = _batches_per_epoch(n_train, batch_size, world)
    encoder = model.encoder
    example = f"a random {view.n_times / view.sfreq:g}-s crop of a window"
    counts = sorted({rec.shape[0] for rec in getattr(view, "recordings", None) or []})
    if counts:
        said = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        example = f"one random channel (of {said}) of " + example
    if _draws_with_replacement(n_train, batch_size, world):
        batches = (
            f"each step draws {batch_size} of the {n_train} training windows with "
            "replacement (fewer windows than the batch)"
        )
    else:
        batches = f"an epoch is a shuffled pass over the {n_train} training windows"
    n_encoder = sum(p.numel() for p in encoder.parameters())
    n_model = sum(p.numel() for p in model.parameters())
    schedule = f"at a peak learning rate of {lr:g}" + (
        f", warmed up over the first {100 * net.warmup_fraction:g} % of the steps, then cosine"
        if net.warmup_fraction
        else ", without warm-up, then cosine"
    )
    if init_encoder is None:
        opening = (
            f"Pretraining {type(model).__name__} with a {encoder.emb_dim} x {encoder.depth} "
            f"encoder ({n_model:,} parameters: the encoder's {n_encoder:,}, which it keeps "
            f"and its card counts, and the pretext decoder's {n_model - n_encoder:,})"
        )
    else:
        given = "the encoder given" if init_name is None else str(init_name)
        opening = (
            f"Continuing the pretraining of {given} with {type(model).__name__}: its "
            f"{encoder.emb_dim} x {encoder.depth} encoder's {n_encoder:,} parameters start "
            f"from its weights, the pretext decoder's {n_model - n_encoder:,} anew"
        )
    logger.info(
        "%s, on %d windows (%d train, %d held out for the validation skill); an example is "
        "%s; %d epochs x %d step(s) of batch %d = %d steps (%s) %s, on %s.",
        opening, len(view), n_train, len(view) - n_train, example, max_epochs, per_epoch,
        batch_size, max_epochs * per_epoch, batches, schedule, device,
    )  # fmt: skip
    net.fit(view)
    _check_skill(net)
    finished = len(net.history) >= max_epochs
    if checkpoint_dir is not None and distributed.rank() == 0 and finished:
        save_encoder(net.encoder, Path(checkpoint_dir) / "encoder.pt")
    return net


#: Pretext skill at or below which a run is said to have learned nothing.
_NO_SKILL = 0.02


def _check_skill(net):
    """Warn when the run's last pretext skill says the encoder learned nothing.

    The warning's text is the same for every run (a cross-validation pretrains in each
    fold: it is shown once); the run's own skill is in its log (``verbose=1``) and
    history."""
    if distributed.rank() != 0:
        return
    last = net.history[-1]
    key = "valid_skill" if "valid_skill" in last else "train_skill"
    skill = last.get(key)
    if skill is None or skill > _NO_SKILL:
        return
    logger.info(
        "Pretraining ended with a pretext skill of %.3f (%s, epoch %d).",
        skill, key, len(net.history),
    )  # fmt: skip
    warn_once(
        f"Pretraining ended with a pretext skill of {_NO_SKILL:g} or less (the last "
        "epoch's valid_skill, or train_skill without validation; each run's is in its "
        "history: history_ of PARSPretrainer, pretrain_history_ of PARSClassifier): the "
        "loss is no lower than that of a predictor that learned nothing (for PARS: "
        "predicting no shift), so the encoder learned (almost) nothing from its pretext "
        "task and its features are close to a random encoder's. Try more steps, a "
        "larger learning rate, more or longer windows, or start from a shipped encoder "
        "(load_encoder('pars-small'); encoder='pars-small' in the estimators).",
        UserWarning,
        stacklevel=3,
    )


def _with_corpus_statistics(encoder_kwargs, view):
    """``encoder_kwargs`` with ``log_std_mean`` and ``log_std_std`` of ``view`` when they
    ask for ``"window+scale"`` without them (a view that cannot draw them is refused)."""
    if encoder_kwargs.get("normalization") != "window+scale":
        return encoder_kwargs
    if encoder_kwargs.get("log_std_mean") is not None:
        return encoder_kwargs
    if not hasattr(view, "log_std_statistics"):
        raise ValueError(
            "encoder_kwargs asks for normalization='window+scale' without 'log_std_mean', "
            f"and the view ({type(view).__name__}) cannot draw the corpus statistics: "
            "give 'log_std_mean' and 'log_std_std' (models.encoder.log_std_statistics)."
        )
    mean, std = view.log_std_statistics()
    logger.info(
        "The scale embedding reads log std around %.3f (std %.3f), from %d windows.",
        mean, std, min(4096, len(view)),
    )  # fmt: skip
    return {**encoder_kwargs, "log_std_mean": mean, "log_std_std": std}

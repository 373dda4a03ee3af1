"""What every pretext model shares: one PatchEncoder, built or given, and input checks."""

from __future__ import annotations

import torch
from braindecode.models.base import EEGModuleMixin
from torch import nn

from braindecode_pars._util.signal_attributes import SignalAttributesMixin
from braindecode_pars.models.encoder import checked_encoder, encoder_sfreq
from braindecode_pars.models.encoder_config import PatchEncoderConfig

#: The settings of the pretext models, by constructor argument, with the attribute
#: that holds each (the key of a run's record): what a resumed run must keep and what
#: an exported run's ``pretext.json`` passes back to the constructor. A model records
#: those it has.
PRETEXT_SETTINGS = {
    "n_patches": "n_patches",
    "pos_mask_ratio": "pos_mask_ratio",
    "sampling": "sampling",
    "decoder": "decoder_name",
    "decoder_heads": "decoder_heads",
    "decoder_hidden": "decoder_hidden",
    "mask_ratio": "mask_ratio",
    "decoder_impl": "decoder_impl",
    "loss_on": "loss_on",
    "label_sigma": "label_sigma",
}


class PretextModel(SignalAttributesMixin, EEGModuleMixin, nn.Module):
    """Base of the pretext models: wraps one :class:`PatchEncoder` by composition.

    A subclass implements ``draw(batch_size, device=None, generator=None) -> dict``,
    every random draw of one forward pass (patches, masks, orders) as a dict of
    tensors, and ``forward(X, generator=None, draws=None) -> dict`` with at least a
    ``loss`` entry, which the pretraining net minimises, and a ``trivial_loss`` entry:
    the loss, on the same batch and the same draws, of the predictor that learned
    nothing (PARS: no shift; MAE: zero; MP3, DropPos: the uniform distribution).
    ``skill = 1 - loss / trivial_loss`` is then 0 for a model that learned nothing and
    1 for a perfect one (:func:`pretext_skill`). ``forward`` uses the ``draws`` it is
    given (a dict of :meth:`draw`), or makes them with :meth:`draw` first: from
    ``generator`` when one is given (a :class:`torch.Generator`), so a seeded generator
    gives the same draws on every call, otherwise from torch's global generator. A
    compiled model (``torch.compile``) cannot take a generator without breaking its
    graph, so the pretraining net's validation draws with the uncompiled model's
    :meth:`draw` and hands the tensors to the compiled one. ``self.encoder`` is handed
    back, unchanged, for fine-tuning.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        braindecode's signal arguments; pretext models read single-channel windows
        (``n_chans=1``) of exactly ``n_times`` samples (``T_s`` of the paper). A
        subclass takes them, with ``encoder`` and the encoder settings, by position or
        name and passes them on here; its own settings are keyword-only.
    encoder : PatchEncoder | None
        The encoder to train. If None, one is built from ``encoder_kwargs``
        (the settings of :class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`)
        at the paper's defaults.
    """

    #: Whether every parameter gets a gradient at every step (DistributedDataParallel
    #: must search for unused ones otherwise).
    uses_all_parameters = True

    def __init__(
        self,
        n_outputs=None,
        n_chans=1,
        chs_info=None,
        n_times=None,
        input_window_seconds=None,
        sfreq=None,
        encoder=None,
        **encoder_kwargs,
    ):
        sfreq = encoder_sfreq(encoder, sfreq, input_window_seconds)
        super().__init__(n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq)
        if self.n_chans != 1:
            raise ValueError(
                f"{type(self).__name__} pretrains on single-channel windows: 'n_chans' must "
                f"be 1, but got {self.n_chans}. Use SingleChannelWindows to draw one "
                "channel per example from multi-channel data."
            )
        unknown = set(encoder_kwargs) - set(PatchEncoderConfig.fields())
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword arguments {sorted(unknown)}; "
                f"encoder settings are {list(PatchEncoderConfig.fields())}."
            )
        self.encoder = checked_encoder(encoder, self.sfreq, self.n_times, **encoder_kwargs)

    def settings(self):
        """The pretext settings of :data:`PRETEXT_SETTINGS` this model has, by record key
        (a value that is not a plain number or string, such as a decoder's absent size,
        is left out)."""
        values = {key: getattr(self, key, None) for key in PRETEXT_SETTINGS.values()}
        return {k: v for k, v in values.items() if isinstance(v, bool | int | float | str)}

    @property
    def n_fixed_patches(self):
        """Number of non-overlapping patches in a window: the positions of MAE/MP3/DropPos."""
        return len(self.encoder.fixed_starts(self.n_times))

    def fixed_starts(self, device=None):
        """Start samples of the non-overlapping patch grid, (n_fixed_patches,) long."""
        return self.encoder.fixed_starts(self.n_times, device=device)

    def draw(self, batch_size, device=None, generator=None):
        """Every random draw of one forward pass of ``batch_size`` windows, on ``device``.

        Parameters
        ----------
        batch_size : int
            Windows of the batch.
        device : torch.device | str | None
            Where the draws are returned (None: the default device).
        generator : torch.Generator | None
            Draw from it (made on its own device, then moved); None: torch's global
            generator.

        Returns
        -------
        draws : dict of torch.Tensor
            What :meth:`forward` takes as ``draws``; the entries are the subclass's.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement draw().")

    def _draws(self, X, generator=None, draws=None):
        """``draws`` if given, else :meth:`draw` for the batch ``X`` from ``generator``."""
        if draws is None:
            return self.draw(X.shape[0], X.device, generator)
        if generator is not None:
            raise ValueError(
                f"{type(self).__name__}.forward takes 'generator' or 'draws', not both: "
                "'draws' are already drawn."
            )
        return draws

    @staticmethod
    def rand(shape, device=None, generator=None):
        """Uniform draws in [0, 1) of ``shape`` on ``device``, from ``generator`` if given.

        A generator lives on one device; draws are made there and moved.
        """
        if generator is None:
            return torch.rand(shape, device=device)
        return torch.rand(shape, generator=generator, device=generator.device).to(device)

    @classmethod
    def randint(cls, high, shape, device=None, generator=None):
        """Integers uniform in [0, high) of ``shape``, from ``generator`` if given."""
        if generator is None:
            return torch.randint(0, high, shape, device=device)
        out = torch.randint(0, high, shape, generator=generator, device=generator.device)
        return out.to(device)

    @classmethod
    def random_split(cls, batch_size, n_tokens, n_chosen, device=None, generator=None):
        """Choose ``n_chosen`` of ``n_tokens`` indices per example, uniformly at random.

        Returns
        -------
        chosen : torch.Tensor of long, shape (batch, n_chosen)
        rest : torch.Tensor of long, shape (batch, n_tokens - n_chosen)
        chosen_mask : torch.Tensor of bool, shape (batch, n_tokens)
            True at the chosen indices.
        """
        order = cls.rand((batch_size, n_tokens), device, generator).argsort(dim=-1)
        chosen, rest = order[:, :n_chosen], order[:, n_chosen:]
        chosen_mask = torch.zeros(batch_size, n_tokens, dtype=torch.bool, device=device)
        chosen_mask.scatter_(1, chosen, True)
        return chosen, rest, chosen_mask

    def check_input(self, X):
        """Raise unless ``X`` is (batch, 1, n_times) with exactly this model's n_times."""
        self.encoder.check_input(X, n_times=self.n_times)


def pretext_skill(loss, trivial_loss):
    """``1 - loss / trivial_loss``: 0 for a model that learned nothing, 1 for a perfect one.

    Negative when the model does worse than the trivial predictor. Works on floats,
    arrays and tensors alike.
    """
    return 1.0 - loss / trivial_loss

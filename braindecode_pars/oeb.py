"""The shipped encoders in OpenEEG-Bench, braindecode's fine-tuning benchmark.

OpenEEG-Bench (``pip install open-eeg-bench``; `github.com/braindecode/OpenEEGBench
<https://github.com/braindecode/OpenEEGBench>`_) builds a braindecode model from its
class path with the signal arguments of a dataset (``n_chans``, ``n_times``,
``n_outputs``, ``sfreq``, ``chs_info``) and the ``model_kwargs`` it is given, loads a
checkpoint into it (a state dict whose keys are the model's; keys the model lacks are
skipped and every learnable parameter outside the head must be in the file), replaces
the module named ``final_layer`` by its own head (a linear layer, an MLP, or a flatten
for its ridge probe) and trains with one of its strategies (a frozen backbone, LoRA and
the other PEFT adapters, full fine-tuning). This module gives it what it needs:

- :class:`PARSBackbone`: the braindecode model, every channel through one
  :class:`~braindecode_pars.PatchEncoder` and a ``final_layer`` over the flattened
  channel embeddings (the features of :class:`~braindecode_pars.features.EncoderFeatures`
  over non-overlapping patches);
- :func:`save_checkpoint`: an encoder's weights under :class:`PARSBackbone`'s keys, the
  file OpenEEG-Bench's ``checkpoint_path`` (or a ``file://`` ``checkpoint_url``) reads;
- :func:`benchmark_kwargs` and :func:`pretrained_backbone`: the arguments of
  ``open_eeg_bench.benchmark`` and its ``PretrainedBackbone`` config for an encoder;
- :func:`local_dataset`: an OpenEEG-Bench ``Dataset`` over braindecode windows in
  memory, so that its ``Experiment`` runs on local windows without the Hugging Face Hub.

OpenEEG-Bench is an optional dependency (``pip install braindecode-pars[oeb]``); the
model and :func:`save_checkpoint` need only braindecode, and the module imports
without the extra.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

from braindecode.models.base import EEGModuleMixin
from torch import nn

from braindecode_pars._util.atomic import save_atomic
from braindecode_pars._util.signal_attributes import SignalAttributesMixin
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.models.encoder import PatchEncoder, checked_encoder, encoder_sfreq
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.models.multichannel import channel_tokens
from braindecode_pars.weights import DEFAULT_ENCODER

#: OpenEEG-Bench's default head module name, which :class:`PARSBackbone` follows.
_HEAD = "final_layer"
#: The linear layers of the encoder's blocks, for LoRA, DoRA, AdaLoRA, OFT and IA3
#: (``peft_target_modules``; OpenEEG-Bench matches names by suffix).
_PEFT_TARGET_MODULES = ["qkv", "proj", "ff.0", "ff.3"]
#: The feed-forward layers among them (IA3's ``peft_ff_modules``).
_PEFT_FF_MODULES = ["ff.0", "ff.3"]


class PARSBackbone(SignalAttributesMixin, EEGModuleMixin, nn.Module):
    """A PARS encoder as a braindecode model with a ``final_layer``, for OpenEEG-Bench.

    Every channel of a window goes through the same single-channel
    :class:`~braindecode_pars.PatchEncoder` (fixed, non-overlapping 1-s patches with
    the full positional embedding, as in fine-tuning); its tokens are averaged over
    the patches (:func:`~braindecode_pars.models.multichannel.channel_tokens`, the
    spatial tokens of :class:`~braindecode_pars.MultiChannelClassifier`); the
    ``n_chans * emb_dim`` embeddings, flattened channel by channel, go through
    ``final_layer``, a linear layer. Without that layer the model gives exactly the
    features of :class:`~braindecode_pars.features.EncoderFeatures` with
    ``readout="mean"`` and ``patch_stride_seconds`` the patch length (non-overlapping
    patches, as fine-tuning reads them).

    Unlike :class:`~braindecode_pars.MultiChannelClassifier`, whose spatial
    cross-attention and channel embeddings are trained in fine-tuning, every
    parameter outside ``final_layer`` is the pretrained encoder's: OpenEEG-Bench
    requires a checkpoint to hold every learnable parameter but the head's, and its
    frozen and ridge probes train only the head.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        braindecode's signal arguments (OpenEEG-Bench passes ``n_chans``,
        ``n_times``, ``n_outputs``, ``sfreq`` and ``chs_info``). ``sfreq`` must be the
        encoder's (100 Hz for the shipped encoders, the rate of every OpenEEG-Bench
        dataset): other windows are refused, resample them first
        (:func:`~braindecode_pars.io.resample_windows`). None: the encoder's.
    encoder : str | Path | PatchEncoder | dict
        - the name of a shipped encoder (``"pars-small-v2"``, the default
          :data:`~braindecode_pars.hub.DEFAULT_ENCODER`, or ``"pars-small"``), or a
          folder or file of a saved encoder (:func:`~braindecode_pars.load_encoder`):
          its architecture and weights;
        - a :class:`PatchEncoder`, used as it is (not copied);
        - a dict of encoder settings (:meth:`~braindecode_pars.models.PatchEncoderConfig.from_size`,
          e.g. ``{"emb_dim": 64, "depth": 4, "n_heads": 4, "ff_dim": 128}``): a new,
          untrained encoder at ``sfreq``, for training from scratch or for weights
          loaded afterwards.

    Examples
    --------
    >>> import torch
    >>> model = PARSBackbone(n_outputs=2, n_chans=3, n_times=400, sfreq=100,
    ...                      encoder="pars-small-v2")
    >>> model(torch.randn(5, 3, 400)).shape
    torch.Size([5, 2])
    >>> model.features(torch.randn(5, 3, 400)).shape  # 3 channels x 64 features
    torch.Size([5, 192])
    """

    def __init__(
        self,
        n_outputs=None,
        n_chans=None,
        chs_info=None,
        n_times=None,
        input_window_seconds=None,
        sfreq=None,
        encoder=DEFAULT_ENCODER,
    ):
        if isinstance(encoder, dict):
            settings, pretrained = PatchEncoderConfig.from_size(encoder).asdict(), None
        elif isinstance(encoder, (str, Path, PatchEncoder)):
            settings, pretrained = {}, load_encoder(encoder)
        else:
            raise TypeError(
                "'encoder' must be a shipped encoder's name, a saved encoder's folder or "
                "file, a PatchEncoder or a dict of encoder settings, but got "
                f"{type(encoder).__name__}."
            )
        sfreq = encoder_sfreq(pretrained, sfreq, input_window_seconds)
        super().__init__(n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq)
        self.encoder = checked_encoder(pretrained, self.sfreq, self.n_times, **settings)
        self.final_layer = nn.Linear(self.n_features, self.n_outputs)

    @property
    def n_features(self):
        """Features before ``final_layer``: ``n_chans * emb_dim``."""
        return self.n_chans * self.encoder.emb_dim

    def features(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans * emb_dim): the flattened
        per-channel embeddings that ``final_layer`` reads."""
        if X.dim() != 3 or X.shape[1] != self.n_chans or X.shape[2] != self.n_times:
            raise ValueError(
                f"'X' must have shape (batch, {self.n_chans}, {self.n_times}), "
                f"but got {tuple(X.shape)}."
            )
        return channel_tokens(self.encoder, X).flatten(1)

    def forward(self, X):
        """Outputs of ``final_layer`` (logits, no softmax), shape (batch, n_outputs)."""
        return self.final_layer(self.features(X))

    def reset_head(self, n_outputs):
        """Replace ``final_layer`` by a new linear layer with ``n_outputs`` outputs."""
        self._set_n_outputs(n_outputs)
        device = next(self.encoder.parameters()).device
        self.final_layer = nn.Linear(self.n_features, n_outputs).to(device)


def _encoder_state_dict(encoder):
    """The weights of ``encoder`` under :class:`PARSBackbone`'s keys (``encoder.*``).

    Parameters
    ----------
    encoder : str | Path | PatchEncoder
        What :func:`~braindecode_pars.load_encoder` takes.

    Returns
    -------
    state : dict of str to torch.Tensor
    """
    encoder = load_encoder(encoder)
    return {f"encoder.{k}": v.detach().cpu() for k, v in encoder.state_dict().items()}


def save_checkpoint(encoder, path):
    """Write ``encoder``'s weights as the checkpoint OpenEEG-Bench loads into :class:`PARSBackbone`.

    A plain state dict (``torch.save``), the file that OpenEEG-Bench's
    ``checkpoint_path`` reads (and its ``checkpoint_url``, which takes a
    ``file://`` address too). It holds no ``final_layer``: OpenEEG-Bench replaces it.

    Parameters
    ----------
    encoder : str | Path | PatchEncoder
        A shipped encoder's name, a saved encoder's folder or file, or an encoder.
    path : str | Path
        The file to write (atomically).

    Returns
    -------
    path : Path
    """
    save_atomic(_encoder_state_dict(encoder), path)
    return Path(path)


def benchmark_kwargs(encoder=DEFAULT_ENCODER, checkpoint_path=f"{DEFAULT_ENCODER}-oeb.pt"):
    """The arguments of ``open_eeg_bench.benchmark`` for a saved or shipped encoder.

    Writes the checkpoint (:func:`save_checkpoint`) to ``checkpoint_path`` and returns
    ``model_cls`` (:class:`PARSBackbone`'s class path), ``checkpoint_path``,
    ``model_kwargs`` (``{"encoder": encoder}``: the architecture), and the PEFT
    modules (:data:`_PEFT_TARGET_MODULES`, :data:`_PEFT_FF_MODULES`). The datasets,
    strategies, heads, seeds and device are ``benchmark``'s own arguments::

        import open_eeg_bench
        from braindecode_pars.oeb import benchmark_kwargs

        results = open_eeg_bench.benchmark(
            **benchmark_kwargs("pars-small-v2", "pars-small-v2-oeb.pt"),
            datasets=["bcic2a"], finetuning_strategies=["ridge_probe", "frozen"],
        )

    Parameters
    ----------
    encoder : str | Path
        A shipped encoder's name or a saved encoder's folder or file (it must be
        named, not given as an object: OpenEEG-Bench rebuilds the model from
        ``model_kwargs`` in each run; save an encoder object first with
        ``encoder.save_pretrained(folder)``).
    checkpoint_path : str | Path
        The checkpoint file to write.

    Returns
    -------
    kwargs : dict
    """
    if not isinstance(encoder, (str, Path)):
        raise TypeError(
            "'encoder' must be a shipped encoder's name or a saved encoder's folder or file "
            f"(OpenEEG-Bench rebuilds the model from its name), but got "
            f"{type(encoder).__name__}; save it first with "
            "encoder.save_pretrained(folder)."
        )
    path = save_checkpoint(encoder, checkpoint_path)
    return dict(
        model_cls=f"{PARSBackbone.__module__}.{PARSBackbone.__name__}",
        checkpoint_path=str(path.resolve()),
        model_kwargs={"encoder": str(encoder)},
        peft_target_modules=list(_PEFT_TARGET_MODULES),
        peft_ff_modules=list(_PEFT_FF_MODULES),
    )


def pretrained_backbone(
    encoder=DEFAULT_ENCODER, checkpoint_path=f"{DEFAULT_ENCODER}-oeb.pt", **overrides
):
    """OpenEEG-Bench's ``PretrainedBackbone`` config of an encoder (needs the extra).

    :func:`benchmark_kwargs` as the config that an ``open_eeg_bench.experiment.Experiment``
    takes as ``backbone``; ``overrides`` replace or add its fields (``normalization``,
    ``head_module_name``...).
    """
    from open_eeg_bench.backbone import PretrainedBackbone

    return PretrainedBackbone(**{**benchmark_kwargs(encoder, checkpoint_path), **overrides})


@functools.cache
def _local_dataset_class():
    """OpenEEG-Bench's ``Dataset`` that reads windows held in memory (defined once)."""
    from braindecode.datasets import BaseConcatDataset
    from open_eeg_bench.dataset import Dataset
    from pydantic import PrivateAttr

    class LocalDataset(Dataset):
        """An OpenEEG-Bench dataset over braindecode windows in memory."""

        _windows: object = PrivateAttr(default=None)

        def load(self):
            # setup() wraps each dataset's transform with the normalization: a shallow
            # copy per run, so that runs on the same windows do not stack them
            return BaseConcatDataset([copy.copy(ds) for ds in self._windows.datasets])

    return LocalDataset


def local_dataset(
    windows, n_classes, train_values, val_values, test_values, metadata_key="subject"
):
    """An OpenEEG-Bench ``Dataset`` over local windows, split by a metadata column.

    OpenEEG-Bench's datasets are pulled from the Hugging Face Hub; this one hands its
    ``Experiment`` the given windows instead (each run reads a shallow copy), and
    splits them as its ``PredefinedSplitter`` does. Needs the ``[oeb]`` extra.

    Parameters
    ----------
    windows : braindecode.datasets.BaseConcatDataset
        Windows with their targets (class indices ``0 .. n_classes - 1``) and a
        ``metadata_key`` column in ``windows.get_metadata()``; backed by MNE objects
        that carry the sampling rate and channels (``raw.info`` or ``windows.info``),
        as braindecode's windowing functions make them.
    n_classes : int
    train_values, val_values, test_values : list
        The values of ``metadata_key`` (e.g. subjects) of each split.
    metadata_key : str
        The metadata column that splits the windows.

    Returns
    -------
    dataset : open_eeg_bench.dataset.Dataset
    """
    from open_eeg_bench.dataset import PredefinedSplitter

    metadata = windows.get_metadata()
    if metadata_key not in metadata:
        raise ValueError(
            f"The windows' metadata has no column {metadata_key!r} (columns: "
            f"{list(metadata.columns)}); set 'metadata_key' to the column that splits them."
        )
    dataset = _local_dataset_class()(
        hf_id="local",
        revision="local",
        n_classes=n_classes,
        splitter=PredefinedSplitter(
            metadata_key=metadata_key,
            train_values=list(train_values),
            val_values=list(val_values),
            test_values=list(test_values),
        ),
    )
    dataset._windows = windows
    return dataset

"""PARS training steps on one device, as the accelerator benchmarks run them
(``bench_gpu``, ``bench_pretrain_loop``, ``bench_loop_trace``): an encoder size and its
windows (:class:`Config`), the pair decoder of this tree or of db22036, and the bare
PARS and encoder-alone steps (:class:`TrainingSteps`)."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import NamedTuple

import torch

from benchmarks.lib.measure import ROOT
from benchmarks.lib.steps import N_TIMES, SFREQ, SMALL_N_TIMES, SMALL_SFREQ
from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import NORMALIZATION_SETTINGS, PatchEncoderConfig
from braindecode_pars.models.pair import kernels as pair_kernels


class Config(NamedTuple):
    """An encoder size, the windows it reads and the default batch sizes."""

    name: str
    size: dict
    n_times: int
    sfreq: float
    batch_sizes: tuple


def size_settings(config):
    """The encoder settings of ``config`` that the estimators take: its size's, without
    the input normalisation's (``NORMALIZATION_SETTINGS``), which a run of the steps
    leaves at their defaults."""
    return {k: v for k, v in config.asdict().items() if k not in NORMALIZATION_SETTINGS}


#: The paper's size on its 30-s windows at 200 Hz, as bench_pair_decoder's "512 x 8".
PAPER = Config(
    "512 x 8 (paper), 30-s windows at 200 Hz",
    size_settings(PatchEncoderConfig.from_size("paper")),
    N_TIMES,
    SFREQ,
    (256,),
)
#: Small enough for a CPU in seconds: a check that the code runs, not a measure of PARS.
TINY = Config(
    "32 x 1 (tiny), 10-s windows at 100 Hz",
    size_settings(PatchEncoderConfig.from_size(dict(emb_dim=32, depth=1, n_heads=4, ff_dim=32))),
    SMALL_N_TIMES,
    SMALL_SFREQ,
    (8,),
)

#: The pair decoders: this tree's, or db22036's (see :func:`db22036_decoder`).
DECODERS = ("tree", "db22036")
#: Where ``make device-wheels`` writes db22036's pair decoder for a machine with no
#: git history (the device machine): ``git show`` of it, one import made absolute.
DB22036_FILE = ROOT / ".device-wheels" / "pair_decoders_db22036.py"
#: db22036's pair decoder in git (the package kept it in ``models/pair_decoders.py`` then).
DB22036_SOURCE = "db22036:braindecode_pars/models/pair_decoders.py"


def db22036_source():
    """db22036's ``models/pair_decoders.py``, its relative import made absolute: from
    :data:`DB22036_FILE` where ``make device-wheels`` wrote it, else from git."""
    if DB22036_FILE.exists():
        return DB22036_FILE.read_text()
    shown = subprocess.run(
        ["git", "show", DB22036_SOURCE], cwd=ROOT, capture_output=True,
        text=True,
    )  # fmt: skip
    if shown.returncode:
        raise RuntimeError(
            f"db22036's pair decoder is neither in {DB22036_FILE} (make device-wheels "
            f"writes it) nor in this checkout's git history: {shown.stderr.strip()}"
        )
    return shown.stdout.replace("from .._checks", "from braindecode_pars._util.checks")


def db22036_decoder():
    """db22036's ``CrossAttentionPairDecoder``: the factor tables on every device, with
    two branches on the data and four graph breaks, as it was; imported once, as the
    module ``pair_decoders_db22036``."""
    if "pair_decoders_db22036" not in sys.modules:
        module = types.ModuleType("pair_decoders_db22036")
        module.__file__ = str(DB22036_FILE)
        exec(compile(db22036_source(), module.__file__, "exec"), module.__dict__)
        sys.modules[module.__name__] = module
    return sys.modules["pair_decoders_db22036"].CrossAttentionPairDecoder


def use_decoder(model, decoder):
    """``model`` (PARS) with the pair decoder ``decoder`` of :data:`DECODERS`: "tree"
    leaves it; "db22036" puts db22036's cross-attention decoder in its place, with the
    same weights."""
    if decoder == "tree":
        return model
    if decoder != "db22036":
        raise ValueError(f"'decoder' must be one of {DECODERS}, but got {decoder!r}.")
    old = db22036_decoder()(model.decoder.emb_dim, model.decoder.n_heads)
    old.load_state_dict(model.decoder.state_dict())
    model.decoder = old.to(next(model.decoder.parameters(), torch.empty(0)).device)
    return model


def synchronize(device):
    """Wait for the work queued on ``device`` (CUDA); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TrainingSteps:
    """A PARS model, its AdamW, one batch on a device, and two training steps on them.

    :meth:`pars_step` trains PARS (fresh patches and masks at every step);
    :meth:`encoder_step` trains the model's encoder alone on one fixed draw of patches
    and masks, its loss the mean of squares of the tokens. Each step ends with the
    device synchronised, so that a wall-clock timer around it times the step.

    Parameters
    ----------
    config : Config
        Encoder size and windows.
    n_patches : int
        Patches per window.
    batch_size : int
        Windows per step.
    device : str | torch.device
        Where the model, the batch and the steps live.
    bf16 : bool
        Run the forward passes under ``torch.autocast(device_type, dtype=torch.bfloat16)``.
    compiled : bool
        Run the forward passes through ``torch.compile`` (``dynamic=False``) of the PARS
        module and of the encoder; the backward passes are compiled with them.
    backend : str
        ``torch.compile``'s backend.
    mode : str | None
        ``torch.compile``'s mode; "reduce-overhead" replays the steps as CUDA graphs.
    decoder : {"tree", "db22036"}
        The pair decoder (:func:`use_decoder`).
    precision : str
        The float32 matmul precision of the steps.
    tables : torch.dtype
        The pair decoder's factor-table dtype.
    fallback : {"torch", "triton"}
        The pair operator's fallback kernel in the steps (``PARS(decoder_fallback=...)``;
        db22036's decoder has none).
    kernel : {"auto", "tables", "fused"}
        The pair operator's implementation (``PARS(decoder_kernel=...)``): "fused" runs
        where Triton does, "tables" elsewhere; db22036's decoder has only its tables.

    Attributes
    ----------
    model : PARS
    operator : {"tables", "fused"}
        The pair operator the steps run (``kernel`` resolved on the batch's device).
    X : torch.Tensor, shape (batch_size, 1, n_times)
    pars_loss, encoder_loss : torch.Tensor | None
        The loss of the last step of each kind (detached), None before it.
    """

    def __init__(
        self,
        config,
        n_patches,
        batch_size,
        device,
        bf16=True,
        compiled=False,
        backend="inductor",
        mode=None,
        decoder="tree",
        precision="highest",
        tables=torch.float32,
        fallback="torch",
        kernel="auto",
    ):
        self.device, self.bf16, self.precision = torch.device(device), bf16, precision
        self.fallback = fallback
        self.graphs = compiled and mode == "reduce-overhead"  # CUDA graphs
        model = PARS(
            n_times=config.n_times, sfreq=config.sfreq, n_patches=n_patches,
            decoder_kernel=kernel, decoder_fallback=fallback, **config.size,
        )  # fmt: skip
        self.model = use_decoder(model, decoder).to(self.device)
        if tables != torch.float32:
            self.model.decoder.table_dtype = tables
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=1e-4)
        self.X = torch.randn(batch_size, 1, config.n_times, device=self.device)
        self.operator = (
            pair_kernels.resolve_decoder_kernel(kernel, self.X) if decoder == "tree" else "tables"
        )
        self.starts = self.model.sample_patches(batch_size, self.device)
        self.pos_mask, _ = self.model.mask_positions(batch_size, self.device)
        self.pars, self.encoder = self.model, self.model.encoder
        if compiled:
            kw = dict(dynamic=False, backend=backend, mode=mode)
            self.pars = torch.compile(self.model, **kw)
            self.encoder = torch.compile(self.model.encoder, **kw)
        self.pars_loss = self.encoder_loss = None
        synchronize(self.device)

    def _step(self, forward):
        if self.graphs:  # a new iteration: the graphs' earlier outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        self.opt.zero_grad(set_to_none=True)
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(self.precision)
        try:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                loss = forward()
            loss.backward()
            self.opt.step()
            synchronize(self.device)
        finally:
            torch.set_float32_matmul_precision(before)
        # a copy: under CUDA graphs the output's memory is the graph's, rewritten later
        return loss.detach().clone()

    def pars_step(self):
        """One PARS training step."""
        self.pars_loss = self._step(lambda: self.pars(self.X)["loss"])

    def encoder_step(self):
        """One training step of the encoder alone on the fixed patches and masks."""
        self.encoder_loss = self._step(
            lambda: self.encoder(self.X, starts=self.starts, pos_mask=self.pos_mask).pow(2).mean()
        )

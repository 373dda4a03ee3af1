"""Training: skorch pretraining, schedules, checkpoints, fine-tuning defaults."""

from .checkpoints import AtomicCheckpoint, EncoderCheckpoint, load_encoder, save_encoder
from .distributed import init_distributed
from .pretrain import PretextLoss, PretrainNet
from .run import pretrain
from .schedule import WarmupCosineLR, warmup_cosine_factor

__all__ = [
    "AtomicCheckpoint",
    "EncoderCheckpoint",
    "PretextLoss",
    "PretrainNet",
    "WarmupCosineLR",
    "init_distributed",
    "load_encoder",
    "pretrain",
    "save_encoder",
    "warmup_cosine_factor",
]

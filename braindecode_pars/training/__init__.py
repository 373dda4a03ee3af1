"""Training: skorch pretraining, schedules, checkpoints, fine-tuning defaults."""

from ._optim import with_fused_default
from ._seeding import isolated_random_state
from .callbacks import EpochProgress, PretextSkill
from .checkpoints import EncoderCheckpoint, StateCheckpoint
from .distributed import init_distributed
from .interrupt import TimeLimit
from .memory import keep_freed_memory
from .pretrain import PretextLoss, PretrainNet
from .resume import RunMismatchError
from .run import pretrain
from .schedule import WarmupCosineLR, warmup_cosine_factor

__all__ = [
    "EncoderCheckpoint",
    "EpochProgress",
    "PretextLoss",
    "PretextSkill",
    "PretrainNet",
    "RunMismatchError",
    "StateCheckpoint",
    "TimeLimit",
    "WarmupCosineLR",
    "init_distributed",
    "isolated_random_state",
    "keep_freed_memory",
    "pretrain",
    "warmup_cosine_factor",
    "with_fused_default",
]

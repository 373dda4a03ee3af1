"""Experiments: the PhysioNet-MI demonstration (the main job), the pretext comparison."""

from .comparison import ComparisonConfig, run_comparison
from .demo import DemoConfig, run_demo
from .protocols import (
    ablation,
    label_efficiency,
    leave_one_subject_out_protocol,
    run_experiment,
    transfer,
)

__all__ = [
    "ComparisonConfig",
    "DemoConfig",
    "ablation",
    "label_efficiency",
    "leave_one_subject_out_protocol",
    "run_comparison",
    "run_demo",
    "run_experiment",
    "transfer",
]

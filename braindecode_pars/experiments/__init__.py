"""Experiments: the PhysioNet-MI demonstration (the main job), the pretext comparison."""

from .comparison import ComparisonConfig, run_comparison
from .demo import DemoConfig, run_demo

__all__ = ["ComparisonConfig", "DemoConfig", "run_comparison", "run_demo"]

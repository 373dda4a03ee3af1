"""Experiments of the library: the PhysioNet-MI demonstration (the main job)."""

from .demo import DemoConfig, run_demo

__all__ = ["DemoConfig", "run_demo"]

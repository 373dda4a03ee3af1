"""The main job (``braindecode-pars demo``): the shipped encoder against scratch and a
band-power floor with few labelled subjects, and the low-label harness it runs on.

The lab's experiments (the development tasks, the paper's protocols, the pretext
comparison) are the repository's ``benchmarks/lib/``, outside the installed package.
"""

from .demo import DemoConfig, run_demo

__all__ = ["DemoConfig", "run_demo"]

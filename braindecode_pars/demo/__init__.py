"""The demo (``braindecode-pars demo``), the package's main job: the shipped encoder
against training from scratch and a band-power floor with few labelled subjects
(:mod:`~braindecode_pars.demo.main_job`), on the low-label harness of
:mod:`~braindecode_pars.demo.low_label`.

The lab's experiments (the development tasks, the paper's protocols, the pretext
comparison) live in the repository, outside the installed package: :doc:`/benchmarks`.
"""

from braindecode_pars.demo.main_job import DemoConfig, run_demo

__all__ = ["DemoConfig", "run_demo"]

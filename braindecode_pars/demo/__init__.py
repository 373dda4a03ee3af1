"""The demo (``braindecode-pars demo``), the package's main job: the shipped encoder
against training from scratch and a band-power floor with few labelled subjects
(:mod:`~braindecode_pars.demo.main_job`), and the low-label harness it runs on
(:mod:`~braindecode_pars.demo.low_label`), whose public names the repository's
benchmarks use.

The lab's experiments (the development tasks, the paper's protocols, the pretext
comparison) are the repository's ``benchmarks/lib/``, outside the installed package.
"""

from .low_label import (
    check_settings,
    describe,
    draw_subjects,
    neural_head,
    run_low_label,
    scratch_classifier,
    settings_path,
    summary_table,
    training_history,
)
from .main_job import DemoConfig, format_results, run_demo

__all__ = [
    "DemoConfig",
    "check_settings",
    "describe",
    "draw_subjects",
    "format_results",
    "neural_head",
    "run_demo",
    "run_low_label",
    "scratch_classifier",
    "settings_path",
    "summary_table",
    "training_history",
]

"""Datasets: the paper's recipes, the single-channel pretraining view, the bundled EEG."""

from .physionet_mi import (
    IMAGERY_RUNS,
    NON_IMAGERY_RUNS,
    PHYSIONET_MI_CLASSES,
    bundled_data_path,
    load_physionet_mi,
    load_physionet_mi_continuous,
    physionet_mi_preprocessors,
    physionet_mi_run_path,
    read_physionet_mi,
    run_block,
)
from .single_channel import SingleChannelWindows
from .store import read_window_store, write_window_store

__all__ = [
    "IMAGERY_RUNS",
    "NON_IMAGERY_RUNS",
    "PHYSIONET_MI_CLASSES",
    "SingleChannelWindows",
    "bundled_data_path",
    "load_physionet_mi",
    "load_physionet_mi_continuous",
    "physionet_mi_preprocessors",
    "physionet_mi_run_path",
    "read_physionet_mi",
    "read_window_store",
    "run_block",
    "write_window_store",
]

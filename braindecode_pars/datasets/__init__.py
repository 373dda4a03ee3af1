"""Datasets: the paper's recipes, the single-channel pretraining view, the bundled EEG."""

from .corpus import pretraining_corpus
from .eesm17 import (
    EESM17_EAR_CHANNELS,
    EESM17_STAGES,
    ChannelNoise,
    leave_one_subject_out,
    load_eesm17,
)
from .physionet_mi import (
    IMAGERY_RUNS,
    NON_IMAGERY_RUNS,
    PHYSIONET_MI_CLASSES,
    PHYSIONET_MI_SPLIT,
    bundled_data_path,
    load_physionet_mi,
    load_physionet_mi_continuous,
    physionet_mi_preprocessors,
    physionet_mi_run_path,
    physionet_mi_subject_split,
    read_physionet_mi,
    run_block,
)
from .single_channel import SingleChannelWindows
from .store import read_window_store, write_window_store
from .tuh import (
    TUH_CHANNELS_19,
    TUH_CHANNELS_21,
    load_tuab,
    load_tueg,
    load_tusz,
    read_csv_bi,
    read_tuh_edf,
    tuh_subject_split,
    tuh_subjects,
)
from .ysyw import (
    SLEEP_STAGES,
    YSYW_CHANNELS,
    load_ysyw,
    load_ysyw_pretraining,
    read_ysyw_record,
    ysyw_subject_split,
)

__all__ = [
    "ChannelNoise",
    "EESM17_EAR_CHANNELS",
    "EESM17_STAGES",
    "leave_one_subject_out",
    "load_eesm17",
    "IMAGERY_RUNS",
    "NON_IMAGERY_RUNS",
    "PHYSIONET_MI_CLASSES",
    "PHYSIONET_MI_SPLIT",
    "SLEEP_STAGES",
    "YSYW_CHANNELS",
    "TUH_CHANNELS_19",
    "TUH_CHANNELS_21",
    "SingleChannelWindows",
    "bundled_data_path",
    "load_physionet_mi",
    "load_physionet_mi_continuous",
    "load_tuab",
    "load_tueg",
    "load_tusz",
    "load_ysyw",
    "load_ysyw_pretraining",
    "physionet_mi_preprocessors",
    "physionet_mi_run_path",
    "physionet_mi_subject_split",
    "pretraining_corpus",
    "read_csv_bi",
    "read_physionet_mi",
    "read_tuh_edf",
    "read_ysyw_record",
    "read_window_store",
    "run_block",
    "tuh_subject_split",
    "tuh_subjects",
    "write_window_store",
    "ysyw_subject_split",
]

"""Datasets: the paper's recipes, the single-channel pretraining view, the bundled EEG."""

from .adapters import Windows, read_windows
from .bundled import bundled_data_path, fetch_bundled_data
from .corpus import pretraining_corpus, shared_corpus
from .eegmat import (
    EEGMAT_CHANNELS,
    EEGMAT_CLASSES,
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    load_eegmat,
    read_eegmat,
)
from .eesm17 import (
    EESM17_EAR_CHANNELS,
    EESM17_STAGES,
    ChannelNoise,
    fetch_eesm17,
    leave_one_subject_out,
    load_eesm17,
)
from .labelled import load_labelled_recordings
from .physionet_mi import (
    IMAGERY_RUNS,
    NON_IMAGERY_RUNS,
    PHYSIONET_MI_CLASSES,
    PHYSIONET_MI_SPLIT,
    load_physionet_mi,
    load_physionet_mi_continuous,
    physionet_mi_preprocessors,
    physionet_mi_subject_split,
    read_physionet_mi,
)
from .recordings import find_recordings, load_recordings, non_eeg_channels, off_montage
from .resample import RESAMPLE_METHODS, resample_windows
from .single_channel import SingleChannelWindows
from .sleep_edf import read_sleep_edf_mat
from .store import read_window_store, store_summary, write_window_store
from .tuh import (
    TUH_CHANNELS_19,
    TUH_CHANNELS_21,
    load_tuab,
    load_tueg,
    load_tusz,
    read_csv_bi,
    read_tuh_edf,
    tuh_subject_split,
)
from .windowing import RecordingStream, recording_preprocessors
from .ysyw import (
    SLEEP_STAGES,
    YSYW_CHANNELS,
    fetch_ysyw,
    load_ysyw,
    load_ysyw_pretraining,
    read_ysyw_record,
    ysyw_split,
    ysyw_subject_split,
)

__all__ = [
    "RESAMPLE_METHODS",
    "Windows",
    "read_windows",
    "resample_windows",
    "EEGMAT_CHANNELS",
    "EEGMAT_CLASSES",
    "EEGMAT_TEST_SUBJECTS",
    "EEGMAT_TRAIN_SUBJECTS",
    "find_recordings",
    "load_eegmat",
    "load_labelled_recordings",
    "load_recordings",
    "non_eeg_channels",
    "off_montage",
    "read_eegmat",
    "read_sleep_edf_mat",
    "recording_preprocessors",
    "RecordingStream",
    "shared_corpus",
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
    "fetch_bundled_data",
    "fetch_eesm17",
    "fetch_ysyw",
    "load_physionet_mi",
    "load_physionet_mi_continuous",
    "load_tuab",
    "load_tueg",
    "load_tusz",
    "load_ysyw",
    "load_ysyw_pretraining",
    "physionet_mi_preprocessors",
    "physionet_mi_subject_split",
    "pretraining_corpus",
    "read_csv_bi",
    "read_physionet_mi",
    "read_tuh_edf",
    "read_ysyw_record",
    "read_window_store",
    "store_summary",
    "tuh_subject_split",
    "write_window_store",
    "ysyw_split",
    "ysyw_subject_split",
]

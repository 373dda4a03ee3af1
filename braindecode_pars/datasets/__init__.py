"""Named sources of EEG (braindecode's ``datasets``): the bundled recordings, the shared
corpus, and the paper's datasets, each read from files laid out as its source lays
them out.

Each source's constants (channels, classes, splits) are attributes of its module, e.g.
``braindecode_pars.datasets.eegmat.EEGMAT_TEST_SUBJECTS``.
"""

from braindecode_pars.datasets.bundled import (
    bundled_data_path,
    fetch_bundled_data,
    load_bundled_eegmat,
)
from braindecode_pars.datasets.corpus import shared_corpus
from braindecode_pars.datasets.eegmat import load_eegmat
from braindecode_pars.datasets.eesm17 import fetch_eesm17, load_eesm17
from braindecode_pars.datasets.physionet_mi import load_physionet_mi
from braindecode_pars.datasets.sleep_edf import read_sleep_edf_mat
from braindecode_pars.datasets.tuh import load_tuab, load_tueg, load_tusz
from braindecode_pars.datasets.ysyw import fetch_ysyw, load_ysyw

__all__ = [
    "bundled_data_path",
    "fetch_bundled_data",
    "fetch_eesm17",
    "fetch_ysyw",
    "load_bundled_eegmat",
    "load_eegmat",
    "load_eesm17",
    "load_physionet_mi",
    "load_tuab",
    "load_tueg",
    "load_tusz",
    "load_ysyw",
    "read_sleep_edf_mat",
    "shared_corpus",
]

"""Getting any EEG in: recordings MNE reads, labelled recordings, arrays, braindecode
datasets, saved folders; windowing, resampling and the scale of windows
(braindecode's ``preprocessing`` and ``datautil``, for this package's inputs).
"""

from braindecode_pars.io._labelled import load_labelled_recordings
from braindecode_pars.io._resample import resample_windows
from braindecode_pars.io.recordings import find_recordings, load_recordings
from braindecode_pars.io.windows import Windows, read_windows

__all__ = [
    "Windows",
    "find_recordings",
    "load_labelled_recordings",
    "load_recordings",
    "read_windows",
    "resample_windows",
]

"""What the sleep-staging recipes share: one window per scored epoch."""

from __future__ import annotations

from braindecode.preprocessing import create_windows_from_events


def stage_windows(recordings, stages, window_seconds=30.0):
    """One ``window_seconds`` window per epoch annotated with a name of ``stages``.

    Parameters
    ----------
    recordings : braindecode BaseConcatDataset
        Preprocessed recordings whose annotations hold the scored epochs.
    stages : dict of str -> int
        Annotation names to classes; other annotations ("undefined", "invalid")
        give no window.
    """
    sfreq = recordings.datasets[0].raw.info["sfreq"]
    size = int(round(window_seconds * sfreq))
    return create_windows_from_events(
        recordings,
        trial_start_offset_samples=0,
        trial_stop_offset_samples=0,
        window_size_samples=size,
        window_stride_samples=size,
        on_last_window="drop",
        mapping=stages,
        on_missing="ignore",
        preload=True,
    )

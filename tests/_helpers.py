"""Data and stand-ins that more than one test file builds."""

import json
from pathlib import Path

import numpy as np
import pytest

from braindecode_pars import PARSPretrainer, PatchEncoder, save_encoder

from .conftest import SMALL_ENCODER

#: The smallest encoder, for runs of the command line (its ``--config`` sets it).
TINY_ENCODER = {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 16}


def saved_small_encoder(path, sfreq):
    """A new PatchEncoder of conftest's ``SMALL_ENCODER`` sizes at ``sfreq`` Hz, saved to
    ``path`` by :func:`~braindecode_pars.save_encoder`; returns ``path``."""
    save_encoder(PatchEncoder(sfreq=sfreq, **SMALL_ENCODER), path)
    return path


def tiny_config(folder, **options):
    """``["--config", FILE]`` of a file written in ``folder`` with :data:`TINY_ENCODER`
    and ``options``, for ``braindecode-pars pretrain``."""
    path = Path(folder) / "tiny.json"
    path.write_text(json.dumps({**TINY_ENCODER, **options}))
    return ["--config", str(path)]


def scaled_subjects(scales, n=24, seed=0):
    """Subjects whose amplitudes differ by ``scales``; within each, class 1 has twice
    the power of class 0 on channel 0.

    Returns
    -------
    X : ndarray, shape (len(scales) * n, 2, 200)
    y : ndarray of int, shape (len(scales) * n,)
    groups : ndarray of int, shape (len(scales) * n,)
        The subject of each window, its index in ``scales``.
    """
    rng = np.random.default_rng(seed)
    X, y, groups = [], [], []
    for s, scale in enumerate(scales):
        labels = np.tile([0, 1], n // 2)
        x = rng.standard_normal((n, 2, 200))
        x[:, 0] *= np.sqrt(1 + labels)[:, None]
        X.append(scale * x)
        y.append(labels)
        groups.append(np.full(n, s))
    return np.concatenate(X), np.concatenate(y), np.concatenate(groups)


def slice_cv_scores(estimator, windows, groups, **params):
    """Balanced accuracies of ``estimator`` left out one group at a time, on braindecode
    ``windows`` as scikit-learn's users pass them (skorch ``SliceDataset`` of the
    windows and of their labels); ``params`` go to ``cross_val_score``."""
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    from skorch.helper import SliceDataset

    return cross_val_score(
        estimator,
        SliceDataset(windows),
        SliceDataset(windows, idx=1),
        groups=groups,
        cv=LeaveOneGroupOut(),
        scoring="balanced_accuracy",
        **params,
    )


def assert_refused(parse, argv, message, capsys):
    """``parse(argv)`` (a benchmark's ``main`` or ``parse_args``) exits before any work,
    and its error says ``message``."""
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err


def bundled_mi(n_chans=None):
    """The bundled PhysioNet-MI windows (3 blocks of 30), with their first ``n_chans``
    channels (None: all 64).

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset
    X : ndarray, shape (n_windows, n_chans, n_times)
    y : ndarray, shape (n_windows,)
    sfreq : float
    blocks : ndarray, shape (n_windows,)
        The block of each window.
    """
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi
    from braindecode_pars.io.windows import read_windows

    windows = load_physionet_mi()
    if n_chans is not None:
        for ds in windows.datasets:
            ds.raw.pick(ds.raw.ch_names[:n_chans])
    data = read_windows(windows)
    return windows, data.X, data.y, data.sfreq, windows.get_metadata()["block"].to_numpy()


class ExplodingPretrainer(PARSPretrainer):
    """A pretrainer that fails the test if it starts training: what must be refused
    before any work is refused before it."""

    def _pretrain(self, *args, **kwargs):  # pragma: no cover - must never be reached
        raise AssertionError("training started before the input was checked")


def loso_scores_on_arrays(windows):
    """Leave-one-subject-out balanced accuracy of ``PARSProbe`` on ``windows`` read as
    arrays: the known answer a cross-validation over the windows themselves must give
    (each fit given the subjects of its windows, which braindecode windows carry: the
    probe's inner folds hold them out)."""
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import LeaveOneGroupOut

    from braindecode_pars import PARSProbe
    from braindecode_pars.io.windows import read_windows

    data = read_windows(windows)
    X, y, groups = data.X, np.asarray(data.y), np.asarray(data.groups)
    scores = []
    for train, test in LeaveOneGroupOut().split(X, y, groups):
        probe = PARSProbe(sfreq=data.sfreq).fit(X[train], y[train], groups=groups[train])
        scores.append(balanced_accuracy_score(y[test], probe.predict(X[test])))
    return np.array(scores)


def relative_amplitude_task(n_fit=160, n_score=160, seconds=4.0, sfreq=100.0, seed=0):
    """Lateralisation reduced to its core: the label is which of two channels is larger.

    Each channel is an 8-13 Hz rhythm (white noise band-passed by an FFT mask) plus
    white noise of a quarter of its power, drawn independently per channel, so that
    both channels have one spectrum. Class 0 has the first channel at twice the second's
    amplitude, class 1 the reverse; each window's overall gain is log-uniform over a
    factor of 16 (1/4 to 4, around 10 µV in volts), so no channel's amplitude alone
    tells the class. Classes alternate, half each.

    Returns
    -------
    X_fit, y_fit : ndarray, shapes (n_fit, 2, seconds * sfreq), (n_fit,)
    X_score, y_score : ndarray, shapes (n_score, 2, seconds * sfreq), (n_score,)
        Windows drawn apart from the fitted ones, to score on.
    sfreq : float
    """
    rng = np.random.default_rng(seed)
    n, n_times = n_fit + n_score, int(round(seconds * sfreq))
    freqs = np.fft.rfftfreq(n_times, 1.0 / sfreq)
    band = (freqs >= 8.0) & (freqs <= 13.0)
    spectrum = np.fft.rfft(rng.standard_normal((n, 2, n_times)), axis=-1) * band
    rhythm = np.fft.irfft(spectrum, n=n_times, axis=-1)
    rhythm /= rhythm.std(axis=-1, keepdims=True)
    signal = rhythm + 0.5 * rng.standard_normal((n, 2, n_times))
    y = np.tile([0, 1], n // 2 + 1)[:n]
    ratio = np.where(y == 0, 2.0, 0.5)  # first channel over the second
    signal[:, 0] *= np.sqrt(ratio)[:, None]
    signal[:, 1] /= np.sqrt(ratio)[:, None]
    gain = 10e-6 * np.exp(rng.uniform(np.log(0.25), np.log(4.0), n))
    X = (signal * gain[:, None, None]).astype(np.float32)
    return X[:n_fit], y[:n_fit], X[n_fit:], y[n_fit:], sfreq


def naive_overlap(starts, patch_size, masked_idx):
    """``patch_overlap`` by plain loops over crops, pairs and sorted neighbours: the share
    of position-masked pairs that share samples and of crops whose patches chain."""
    shared = pairs = chained = 0
    for row, idx in zip(starts.tolist(), masked_idx.tolist(), strict=True):
        chosen = [row[i] for i in idx]
        for j in range(len(chosen)):
            for k in range(j + 1, len(chosen)):
                pairs += 1
                shared += abs(chosen[j] - chosen[k]) < patch_size
        ordered = sorted(row)
        chained += all(b - a < patch_size for a, b in zip(ordered, ordered[1:], strict=False))
    return shared / pairs, chained / len(starts)


def motor_imagery_miniature(n, seed, sfreq=100.0, seconds=4.0, n_chans=8):
    """Motor imagery in miniature (the seventh review's, S1): ``n_chans`` electrodes on a
    line, two 8-13 Hz sources volume-conducted onto electrodes 2 and 5 (a Gaussian
    spread of 1.2 electrodes), six 1/f background sources mixed into every electrode by
    one fixed mixing (one head), the label = which source is attenuated by half (the
    event-related desynchronisation), and a log-normal gain per window (around 20 µV,
    in volts). Broadband power carries little of the label, CSP in 8-30 Hz nearly all.

    Returns
    -------
    X : ndarray, shape (n, n_chans, seconds * sfreq), float32
    y : ndarray of 0 and 1, shape (n,)
    """
    from scipy.signal import butter, sosfiltfilt

    rng = np.random.default_rng(seed)
    n_times = int(round(seconds * sfreq))
    electrodes = np.arange(n_chans)
    sources = np.stack([np.exp(-0.5 * ((electrodes - c) / 1.2) ** 2) for c in (2, 5)], 1)
    background = np.random.default_rng(2026).standard_normal((n_chans, 6))
    sos = butter(4, [8, 13], btype="bandpass", fs=sfreq, output="sos")
    freqs = np.fft.rfftfreq(n_times, 1 / sfreq)
    y = rng.integers(0, 2, n)
    X = np.empty((n, n_chans, n_times))
    for i in range(n):
        rhythm = sosfiltfilt(sos, rng.standard_normal((2, n_times + 200)), axis=-1)[:, 100:-100]
        rhythm /= rhythm.std(-1, keepdims=True)
        rhythm[y[i]] *= 0.5
        spectrum = rng.standard_normal((6, len(freqs))) + 1j * rng.standard_normal((6, len(freqs)))
        noise = np.fft.irfft(spectrum / np.maximum(freqs, 1.0), n_times, axis=-1)
        noise /= noise.std(-1, keepdims=True)
        X[i] = (sources @ rhythm + background @ noise) * np.exp(rng.normal(0, 0.5)) * 20e-6
    return X.astype(np.float32), y


def _one_over_f(rng, shape, sfreq):
    """Unit-variance 1/f noise of ``shape`` (..., n_times), from a random spectrum."""
    n_times = shape[-1]
    freqs = np.fft.rfftfreq(n_times, 1.0 / sfreq)
    spectrum = rng.standard_normal((*shape[:-1], len(freqs))) + 1j * rng.standard_normal(
        (*shape[:-1], len(freqs))
    )
    noise = np.fft.irfft(spectrum / np.maximum(freqs, 1.0), n_times, axis=-1)
    return noise / noise.std(-1, keepdims=True)


def burst_order_task(n, seed, sfreq=100.0, seconds=4.0, n_chans=2):
    """The label is the temporal order of two bursts, with band power equal in both
    classes: a 10-Hz burst then a 22-Hz burst (class 0) or the 22-Hz burst first (class
    1), each 1 s long under a Hann taper, centred near 1.2 s and 2.8 s (jittered by up
    to 0.25 s), with random phases, over 1/f background noise in every channel; the
    bursts reach every channel at a gain of its own, and each window has a log-normal
    gain (around 20 µV, in volts). Spectral features (log band power, covariances) see
    the same bursts in both classes; only when each burst comes tells them apart.

    Returns
    -------
    X : ndarray, shape (n, n_chans, seconds * sfreq), float32
    y : ndarray of 0 and 1, shape (n,)
    """
    rng = np.random.default_rng(seed)
    n_times = int(round(seconds * sfreq))
    t = np.arange(n_times) / sfreq
    width = int(round(sfreq))  # 1-s bursts
    taper = np.hanning(width)
    y = rng.integers(0, 2, n)
    X = 0.5 * _one_over_f(rng, (n, n_chans, n_times), sfreq)
    for i in range(n):
        first, second = (10.0, 22.0) if y[i] == 0 else (22.0, 10.0)
        for centre, freq in ((1.2, first), (2.8, second)):
            start = int(round((centre + rng.uniform(-0.25, 0.25)) * sfreq)) - width // 2
            burst = np.sin(2 * np.pi * freq * t[:width] + rng.uniform(0, 2 * np.pi)) * taper
            gains = rng.uniform(0.7, 1.3, n_chans)[:, None]
            X[i, :, start : start + width] += 2.0 * gains * burst
    X *= np.exp(rng.normal(0, 0.5, (n, 1, 1))) * 20e-6
    return X.astype(np.float32), y


def alpha_power_task(n, seed, sfreq=100.0, seconds=4.0):
    """One channel whose label rides on its 8-13 Hz power over a 1/f background: class 1
    carries an alpha rhythm of 1.3 times class 0's amplitude, under a log-normal gain per
    window (so absolute power tells the class less well than the alpha share does).

    Returns
    -------
    X : ndarray, shape (n, 1, seconds * sfreq), float32
    y : ndarray of 0 and 1, shape (n,)
    """
    from scipy.signal import butter, sosfiltfilt

    rng = np.random.default_rng(seed)
    n_times = int(round(seconds * sfreq))
    sos = butter(4, [8, 13], btype="bandpass", fs=sfreq, output="sos")
    y = rng.integers(0, 2, n)
    alpha = sosfiltfilt(sos, rng.standard_normal((n, 1, n_times + 200)), axis=-1)[..., 100:-100]
    alpha /= alpha.std(-1, keepdims=True)
    X = (
        _one_over_f(rng, (n, 1, n_times), sfreq)
        + np.where(y == 1, 0.65, 0.5)[:, None, None] * alpha
    )
    X *= np.exp(rng.normal(0, 0.5, (n, 1, 1))) * 20e-6
    return X.astype(np.float32), y

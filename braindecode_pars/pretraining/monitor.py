"""Probes of the frozen encoder while it pretrains: what its features hold of a label,
and of the person they were recorded from.

The pretext skill says whether the pretext task is learned, not whether the features
become useful. Self-supervised trainers in vision watch a k-NN or linear monitor for
that; :class:`ProbeMonitor` is one for EEG. At the pretraining net's report cadence it
reads a small labelled set through the encoder as it is then (each channel's tokens,
their mean and standard deviation over patches: the default readout of
:class:`~braindecode_pars.features.EncoderFeatures`) and scores two linear probes, the
protocol of FMScope's subject probe:

- :func:`label_probe`: the label across subjects, grouped folds (no subject on both
  sides), balanced accuracy of the predictions pooled over the folds;
- :func:`subject_probe`: subject identity, trained on the first half of each recording
  and scored on its second half (:func:`_temporal_halves`: temporal blocks, so that
  neighbouring windows do not leak), balanced accuracy (chance: one over the number of
  subjects).

Both are a logistic regression on standardised features (:func:`probe_classifier`).
The functions serve the subject-probe benchmark as well (:doc:`/pretraining`), so that
the callback and the table measure the same thing.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback

from braindecode_pars._util.checks import check_int, check_range
from braindecode_pars.io.windows import read_windows
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.callbacks import _reports_epoch

logger = logging.getLogger(__name__)

#: The history keys :class:`ProbeMonitor` records, by probe.
MONITOR_KEYS = {"label": "monitor_label", "subject": "monitor_subject"}
#: The history key of the seconds :class:`ProbeMonitor` took on an epoch it probed.
_MONITOR_SECONDS = "monitor_seconds"


def _as_labels(values, n, name):
    """``values`` as a 1-D array of ``n`` entries, or a ValueError naming ``name``."""
    values = np.asarray(values)
    if values.ndim != 1 or len(values) != n:
        raise ValueError(
            f"'{name}' must hold one entry per window ({n}), but got shape {values.shape}."
        )
    return values


def probe_classifier(C=1.0):
    """The linear probe: features standardised on the training windows, then a
    class-balanced logistic regression (L2, ``C``, lbfgs, up to 1000 iterations)."""
    return make_pipeline(
        StandardScaler(), LogisticRegression(C=C, class_weight="balanced", max_iter=1000)
    )


def _temporal_halves(groups, recordings=None):
    """Training and test windows by temporal blocks: the first half of each recording
    trains, the second half tests.

    Windows are taken in the order given (the order of time within each recording). A
    recording of ``n`` windows gives its first ``n // 2`` to training and the rest to
    the test, so no window is on both sides, and the two sides of a recording meet at
    one boundary only.

    Parameters
    ----------
    groups : array-like, shape (n_windows,)
        The subject of every window.
    recordings : array-like, shape (n_windows,) | None
        The recording of every window (a subject may have several: each is cut in
        halves); None: one recording per subject.

    Returns
    -------
    train, test : ndarray of int
        Indices of the windows, each in increasing order.

    Examples
    --------
    >>> train, test = _temporal_halves([0, 0, 0, 0, 1, 1, 1])
    >>> train.tolist(), test.tolist()
    ([0, 1, 4], [2, 3, 5, 6])
    """
    groups = np.asarray(groups)
    keys = groups if recordings is None else _as_labels(recordings, len(groups), "recordings")
    train = []
    for key in dict.fromkeys(keys.tolist()):  # in order of first appearance
        members = np.flatnonzero(keys == key)
        train.extend(members[: len(members) // 2].tolist())
    train = np.asarray(sorted(train), dtype=np.int64)
    test = np.setdiff1d(np.arange(len(groups)), train)
    return train, test


def _grouped_folds(groups, n_splits=5):
    """The folds of the label probe: no group (subject) in the training and test windows
    of one fold.

    :class:`~sklearn.model_selection.LeaveOneGroupOut` when there are at most
    ``n_splits`` groups, else :class:`~sklearn.model_selection.GroupKFold` with
    ``n_splits`` folds (deterministic: the same folds on every call).

    Returns
    -------
    folds : list of (train, test) index arrays
    """
    groups = np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ValueError(
            f"'groups' must hold at least 2 groups for grouped folds, but got {n_groups}."
        )
    splitter = LeaveOneGroupOut() if n_groups <= n_splits else GroupKFold(n_splits)
    return list(splitter.split(np.zeros(len(groups)), groups=groups))


def label_probe(features, y, groups, n_splits=5, C=1.0):
    """Balanced accuracy of the label across groups, by a linear probe on ``features``.

    Every window is predicted by the probe fitted on the folds that hold out its group
    (:func:`_grouped_folds`); the balanced accuracy is taken over all the predictions at
    once.

    Parameters
    ----------
    features : array-like, shape (n_windows, n_features)
    y : array-like, shape (n_windows,)
    groups : array-like, shape (n_windows,)
        The subject (or other group) of every window.
    n_splits : int
        Folds (:func:`_grouped_folds`).
    C : float
        The logistic regression's inverse penalty (:func:`probe_classifier`).

    Returns
    -------
    score : float
    """
    features = np.asarray(features, dtype=np.float64)
    y = _as_labels(y, len(features), "y")
    groups = _as_labels(groups, len(features), "groups")
    predicted = np.empty_like(y)
    for train, test in _grouped_folds(groups, n_splits):
        if len(np.unique(y[train])) < 2:  # one class to learn: predict it
            predicted[test] = y[train][0]
            continue
        predicted[test] = probe_classifier(C).fit(features[train], y[train]).predict(features[test])
    return float(balanced_accuracy_score(y, predicted))


def subject_probe(features, groups, recordings=None, C=1.0):
    """Balanced accuracy of subject identity, trained on the first half of each
    recording and scored on the second half (:func:`_temporal_halves`).

    Parameters
    ----------
    features : array-like, shape (n_windows, n_features)
        In the order of time within each recording.
    groups : array-like, shape (n_windows,)
        The subject of every window (at least two subjects).
    recordings : array-like, shape (n_windows,) | None
        The recording of every window; None: one per subject.
    C : float
        The logistic regression's inverse penalty (:func:`probe_classifier`).

    Returns
    -------
    score : float
        Chance is ``1 / n_subjects``.
    """
    features = np.asarray(features, dtype=np.float64)
    groups = _as_labels(groups, len(features), "groups")
    if len(np.unique(groups)) < 2:
        raise ValueError(
            "'groups' must hold at least 2 subjects for a subject probe, but got "
            f"{len(np.unique(groups))}."
        )
    train, test = _temporal_halves(groups, recordings)
    missing = sorted(set(groups[test].tolist()) - set(groups[train].tolist()))
    if missing:
        raise ValueError(
            f"Subjects {missing} have no window in the first half of their recordings: every "
            "recording needs at least 2 windows."
        )
    model = probe_classifier(C).fit(features[train], groups[train])
    return float(balanced_accuracy_score(groups[test], model.predict(features[test])))


def _encoder_features(encoder, X, batch_size=8, device=None):
    """Each channel's tokens through ``encoder``, their mean and standard deviation over
    patches: the features of :class:`~braindecode_pars.features.EncoderFeatures` with its
    default ``readout="mean+std"`` on non-overlapping patches
    (``patch_stride_seconds`` the patch length: half its default's tokens, cheap enough
    to run at every report), without its checks and resampling.

    Parameters
    ----------
    encoder : PatchEncoder
        Used as it is, in evaluation mode and without gradients (its mode is restored).
    X : ndarray, shape (n_windows, n_chans, n_times)
        At the encoder's sampling rate.
    batch_size : int
        Windows per forward pass.
    device : str | torch.device | None
        Where to compute; None: where the encoder's parameters are.

    Returns
    -------
    features : ndarray, shape (n_windows, n_chans * 2 * emb_dim)
        For each channel in turn, its mean token then the standard deviation
        (``ddof=0``).
    """
    device = next(encoder.parameters()).device if device is None else torch.device(device)
    was_training = encoder.training
    n, C, T = X.shape
    out = np.empty((n, C * 2 * encoder.emb_dim))
    try:
        encoder.eval()
        with torch.no_grad():
            for start in range(0, n, batch_size):
                batch = np.asarray(X[start : start + batch_size], dtype=np.float32)
                batch = torch.as_tensor(batch, device=device)
                B = batch.shape[0]
                tokens = encoder(batch.reshape(B * C, 1, T))  # (B * C, n_patches, emb_dim)
                read = torch.cat([tokens.mean(dim=1), tokens.std(dim=1, unbiased=False)], -1)
                out[start : start + B] = read.view(B, -1).float().cpu().numpy()
    finally:
        encoder.train(was_training)
    return out


def _reports_before(net):
    """The epochs ``net`` reported before its current one (the history's last row).

    Which epochs a net reports is a function of the epoch's number
    (:func:`~braindecode_pars.pretraining.callbacks._reports_epoch`), so this counts
    them over the history's earlier epochs: a run stopped and resumed counts as the
    run never stopped did, and the monitor probes the same epochs. A net without a
    report cadence (``eval_every_steps``) reports every epoch.
    """
    epoch = len(net.history)
    every_steps = getattr(net, "eval_every_steps", None)
    per_epoch = getattr(net, "epoch_steps_", None)
    if every_steps is None or per_epoch is None:
        return epoch - 1
    return sum(_reports_epoch(e, net.max_epochs, per_epoch, every_steps) for e in range(1, epoch))


class ProbeMonitor(Callback):
    """Log a label probe and a subject probe of the frozen encoder at the report cadence.

    A callback of :class:`~braindecode_pars.pretraining.PretrainNet`. On the epochs the
    net reports (its ``eval_every_steps`` cadence: the first, every so many, and the
    last), every ``every``-th of them and the run's last epoch, when the net reads its
    log, it computes the current encoder's features of the windows ``X``
    (:func:`_encoder_features`, in evaluation mode, no gradient, on the net's device)
    and records in that epoch's row of the history:

    - ``monitor_label``: :func:`label_probe` of ``y`` across ``groups``;
    - ``monitor_subject``: :func:`subject_probe` of ``groups`` (first half of each
      recording against the second);
    - ``monitor_seconds``: the wall time the two took (the features and the fits).

    **Cost**: the probes fit ``n_splits`` + 1 logistic regressions (up to 1,000 lbfgs
    iterations each) on ``n_chans * 2 * emb_dim`` features (19,456 at the paper's size
    with 19 channels), synchronously, within the training loop: seconds each time, the
    time of hundreds of training steps on a GPU. ``every`` spaces them out;
    ``monitor_seconds`` shows what they take.

    The epoch table prints them beside the pretext skill, and
    :func:`~braindecode_pars.viz.plot_training_curves` draws them. Training itself is
    untouched: no random draw is made and the encoder's mode is restored. Under
    DistributedDataParallel rank 0 alone computes them (every process holds the same
    weights) and sends the numbers to the others, so that every history is the same.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | mne.Epochs
        A small labelled set, read once (:func:`~braindecode_pars.io.read_windows`), at
        the encoder's sampling rate, in the unit an amplitude-aware encoder reads
        (checked when training begins), each recording's windows in the order of time.
    y : array-like | None
        The label of every window (None: from windows that carry one).
    groups : array-like | None
        The subject of every window, at least 2 subjects (None: the ``subject`` of
        braindecode windows).
    recordings : array-like | None
        The recording of every window, for the subject probe's halves; None: one
        recording per subject.
    sfreq : float | None
        The windows' sampling rate (None: from windows that carry one); when known, it
        must be the encoder's.
    n_splits : int
        Folds of the label probe (:func:`_grouped_folds`).
    C : float
        The probes' inverse penalty (:func:`probe_classifier`).
    batch_size : int
        Windows per forward pass.
    every : int
        Probe every ``every``-th reported epoch (the first reported one included) and
        the run's last epoch; 1: every reported epoch. Counted over the run's epochs,
        not the sitting's: a run stopped and resumed probes the epochs the run never
        stopped probes.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from braindecode_pars import PARS
    >>> from braindecode_pars.pretraining import PretrainNet
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((12, 2, 300)) * (1 + np.arange(12) % 3)[:, None, None]
    >>> monitor = ProbeMonitor(X, y=np.arange(12) % 2, groups=np.arange(12) % 3, sfreq=10)
    >>> model = PARS(n_times=300, sfreq=10, n_patches=10, emb_dim=16, depth=1, n_heads=2,
    ...              ff_dim=16)
    >>> data = torch.utils.data.TensorDataset(torch.randn(32, 1, 300), torch.zeros(32))
    >>> net = PretrainNet(model, max_epochs=2, batch_size=16, progress_bar=False,
    ...                   callbacks=[("monitor", monitor)]).fit(data)
    >>> sorted(k for k in net.history[-1] if k.startswith("monitor"))
    ['monitor_label', 'monitor_seconds', 'monitor_subject']
    """

    def __init__(
        self, X, y=None, groups=None, recordings=None, sfreq=None, n_splits=5, C=1.0,
        batch_size=8, every=1,
    ):  # fmt: skip
        self.X = X
        self.y = y
        self.groups = groups
        self.recordings = recordings
        self.sfreq = sfreq
        self.n_splits = n_splits
        self.C = C
        self.batch_size = batch_size
        self.every = every

    def initialize(self):
        """Read and check the labelled set once."""
        check_int("n_splits", self.n_splits, 2)
        check_int("batch_size", self.batch_size, 1)
        check_int("every", self.every, 1)
        check_range("C", self.C, 0, np.inf, low_open=True)
        windows = read_windows(self.X, self.y, self.groups, self.sfreq, name="X")
        if windows.y is None or windows.groups is None:
            missing = "y" if windows.y is None else "groups"
            raise ValueError(f"'{missing}' must be given: the windows carry none.")
        n = len(windows.X)
        self.X_ = windows.X
        self.y_ = _as_labels(windows.y, n, "y")
        self.groups_ = _as_labels(windows.groups, n, "groups")
        self.recordings_ = (
            None if self.recordings is None else _as_labels(self.recordings, n, "recordings")
        )
        self.sfreq_ = windows.sfreq
        _grouped_folds(self.groups_, self.n_splits)  # at least two subjects
        train, _ = _temporal_halves(self.groups_, self.recordings_)
        if set(self.groups_[train].tolist()) != set(self.groups_.tolist()):
            raise ValueError(
                "Every recording of 'X' needs at least 2 windows (a first and a second half)."
            )
        return self

    def on_train_begin(self, net, **kwargs):
        encoder = net.encoder
        if self.sfreq_ is not None and abs(float(self.sfreq_) - float(encoder.sfreq)) > 1e-6:
            raise ValueError(
                f"'X' is at sfreq={self.sfreq_:g} Hz but the encoder at {encoder.sfreq:g} Hz: "
                "give the monitor windows at the encoder's rate "
                "(braindecode_pars.io.resample_windows)."
            )
        T = self.X_.shape[-1]
        if T < encoder.patch_size:
            raise ValueError(
                f"'X' windows of {T} samples are shorter than one patch of the encoder "
                f"({encoder.patch_size} samples)."
            )
        if encoder.config.amplitude_aware:  # the unit, refused now rather than at a report
            encoder.check_unit(np.asarray(self.X_[:8], dtype=np.float32).reshape(-1, 1, T))

    def on_epoch_read(self, net, row):
        """Score the probes on ``row``, the epoch just reported (see the class)."""
        last = len(net.history) >= net.max_epochs
        reported = getattr(net, "reports_epoch_", True) or last
        if not reported or row is not net.history[-1] or MONITOR_KEYS["label"] in row:
            return
        if _reports_before(net) % self.every and not last:
            return
        shared = net.distributed_ and distributed._is_distributed()
        scores = self._scores(net) if not shared or distributed.rank() == 0 else None
        if shared:  # rank 0's numbers, to every process
            sent = [scores]
            torch.distributed.broadcast_object_list(sent, src=0)
            scores = sent[0]
        label, subject, seconds = scores
        row[MONITOR_KEYS["label"]], row[MONITOR_KEYS["subject"]] = label, subject
        row[_MONITOR_SECONDS] = seconds
        logger.debug(
            "Epoch %s: label probe %.3f, subject probe %.3f (%.2f s).",
            row.get("epoch", "?"), label, subject, seconds,
        )  # fmt: skip

    def _scores(self, net):
        """The label probe's and the subject probe's scores of the encoder now, and the
        seconds they took."""
        start = time.perf_counter()
        features = _encoder_features(net.encoder, self.X_, self.batch_size)
        label = label_probe(features, self.y_, self.groups_, self.n_splits, self.C)
        subject = subject_probe(features, self.groups_, self.recordings_, self.C)
        return label, subject, time.perf_counter() - start

"""The probes of a frozen encoder (``pretraining.monitor``): the protocol on data built for
it, and the callback against the same probes run by hand after pretraining."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.features import EncoderFeatures
from braindecode_pars.pretraining import PretrainNet, ProbeMonitor
from braindecode_pars.pretraining.monitor import (
    _MONITOR_SECONDS,
    MONITOR_KEYS,
    _encoder_features,
    _grouped_folds,
    _temporal_halves,
    label_probe,
    subject_probe,
)
from braindecode_pars.viz import plot_training_curves

from .._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ, N_TIMES = 10.0, 300
TINY = dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16)


def subjects_and_recordings(n_subjects=4, n_recordings=2, n_windows=10):
    groups = np.repeat(np.arange(n_subjects), n_recordings * n_windows)
    recordings = np.repeat(np.arange(n_subjects * n_recordings), n_windows)
    return groups, recordings


# -- the protocol, on data built for it ----------------------------------------------------
def test_temporal_halves_train_on_the_first_half_of_each_recording_only():
    groups, recordings = subjects_and_recordings(n_windows=9)
    train, test = _temporal_halves(groups, recordings)
    assert np.intersect1d(train, test).size == 0
    assert np.union1d(train, test).tolist() == list(range(len(groups)))
    for rec in np.unique(recordings):
        members = np.flatnonzero(recordings == rec)  # in the order of time
        assert np.isin(members[:4], train).all() and np.isin(members[4:], test).all()
        # no window of the second half is in the training set, nor any after it
        assert train[np.isin(train, members)].max() < test[np.isin(test, members)].min()
    # without recordings, each subject is one recording
    train, _ = _temporal_halves(groups)
    assert len(train) == 4 * 9


def test_the_subject_probe_reads_a_subject_offset_and_not_noise():
    rng = np.random.default_rng(SEED)
    groups, recordings = subjects_and_recordings(n_subjects=5, n_windows=30)
    noise = rng.standard_normal((len(groups), 6))
    offsets = 3.0 * rng.standard_normal((5, 6))
    score = subject_probe(noise + offsets[groups], groups, recordings)
    learned(score, above=0.95, what="subject from its offset")
    chance = subject_probe(noise, groups, recordings)
    learned(abs(chance - 1 / 5), below=0.12, what="subject from noise, off chance")


def test_the_label_probe_reads_a_label_across_subjects_and_not_noise():
    rng = np.random.default_rng(SEED + 1)
    groups, _ = subjects_and_recordings(n_subjects=6, n_windows=20)
    y = np.tile([0, 1], len(groups) // 2)
    noise = rng.standard_normal((len(groups), 5))
    signal = noise + 2.5 * y[:, None] * np.array([1.0, -1.0, 0.0, 0.0, 0.0])
    learned(label_probe(signal, y, groups), above=0.9, what="label")
    chance = label_probe(noise, y, groups)
    learned(abs(chance - 0.5), below=0.1, what="label from noise, off chance")
    # a subject offset that the label does not ride on gives no label across subjects
    offsets = 3.0 * rng.standard_normal((6, 5))
    chance = label_probe(noise + offsets[groups], y, groups)
    learned(abs(chance - 0.5), below=0.12, what="label from a subject offset, off chance")


def test_grouped_folds_keep_each_subject_on_one_side():
    groups = np.repeat(np.arange(8), 3)
    for n_splits, n_folds in ((5, 5), (8, 8), (10, 8)):  # GroupKFold, or one per subject
        folds = _grouped_folds(groups, n_splits)
        assert len(folds) == n_folds
        for train, test in folds:
            assert not set(groups[train]) & set(groups[test])
        assert sorted(np.concatenate([test for _, test in folds]).tolist()) == list(range(24))
    with pytest.raises(ValueError, match="'groups' must hold at least 2 groups"):
        _grouped_folds(np.zeros(5))


def test_the_probes_refuse_what_they_cannot_score():
    with pytest.raises(ValueError, match="'groups' must hold at least 2 subjects"):
        subject_probe(np.zeros((4, 2)), np.zeros(4))
    with pytest.raises(ValueError, match=r"Subjects \[1\] have no window in the first half"):
        subject_probe(np.zeros((5, 2)), [0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match=r"'y' must hold one entry per window \(4\)"):
        label_probe(np.zeros((4, 2)), [0, 1], [0, 0, 1, 1])


def test_encoder_features_are_those_of_encoder_features():
    encoder = PatchEncoder(sfreq=SFREQ, **TINY)
    X = np.random.default_rng(0).standard_normal((5, 3, N_TIMES)).astype(np.float32)
    ours = _encoder_features(encoder, X, batch_size=2)
    theirs = EncoderFeatures(
        encoder, sfreq=SFREQ, batch_size=2, patch_stride_seconds=1.0
    ).fit_transform(X)  # the monitor reads non-overlapping patches
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    assert encoder.training  # the mode it had


# -- the callback ----------------------------------------------------------------------------
def labelled_set(n_subjects=3, n_windows=8, n_chans=2, seed=0):
    """Windows (in the order of time per subject) whose label adds a weak 2 Hz rhythm and
    whose subject sets its amplitude and the phase of a weak 3 Hz rhythm: neither probe
    is perfect, nor at chance."""
    rng = np.random.default_rng(seed)
    t = np.arange(N_TIMES) / SFREQ
    X, y, groups = [], [], []
    for s in range(n_subjects):
        for i in range(n_windows):
            label = i % 2
            x = rng.standard_normal((n_chans, N_TIMES))
            x += 0.3 * np.sin(2 * np.pi * 3 * t + s) + 0.3 * label * np.sin(2 * np.pi * 2 * t)
            X.append((1 + s) * x)
            y.append(label)
            groups.append(s)
    return np.asarray(X, dtype=np.float32), np.asarray(y), np.asarray(groups)


def pretrain(callbacks=None, max_epochs=4, seed=0):
    torch.manual_seed(seed)
    model = PARS(n_times=N_TIMES, sfreq=SFREQ, n_patches=10, **TINY)
    data = torch.utils.data.TensorDataset(torch.randn(32, 1, N_TIMES), torch.zeros(32))
    net = PretrainNet(
        model,
        max_epochs=max_epochs,
        batch_size=16,
        lr=3e-3,
        progress_bar=False,
        eval_every_steps=4,
        callbacks=callbacks,
    )  # fmt: skip  (2 steps an epoch: epochs 1, 2 and 4 are reported)
    return net.fit(data)


def by_hand(encoder, X, y, groups):
    """The label probe (leave one subject out, predictions pooled) and the subject probe
    (first half of each subject's windows against the second), written out with
    scikit-learn on the features of EncoderFeatures."""
    features = EncoderFeatures(encoder, sfreq=SFREQ, patch_stride_seconds=1.0).fit_transform(X)

    def probe():
        return make_pipeline(
            StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
        )

    predicted = np.empty_like(y)
    for g in np.unique(groups):
        held = groups == g
        predicted[held] = probe().fit(features[~held], y[~held]).predict(features[held])
    label = balanced_accuracy_score(y, predicted)
    first = np.zeros(len(groups), dtype=bool)
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        first[members[: len(members) // 2]] = True
    model = probe().fit(features[first], groups[first])
    subject = balanced_accuracy_score(groups[~first], model.predict(features[~first]))
    return label, subject


def test_the_monitor_logs_the_probes_of_the_encoder_as_run_by_hand():
    X, y, groups = labelled_set(seed=SEED)
    net = pretrain([("monitor", ProbeMonitor(X, y, groups, sfreq=SFREQ))], seed=SEED)
    logged = [
        (row["epoch"], row.get(MONITOR_KEYS["label"]), row.get(MONITOR_KEYS["subject"]))
        for row in net.history
    ]
    assert [epoch for epoch, label, _ in logged if label is not None] == [1, 2, 4]
    assert all(subject is not None for _, label, subject in logged if label is not None)
    label, subject = by_hand(net.encoder, X, y, groups)  # the encoder after pretraining
    # 0.5 < label and 1 / 3 < subject < 1: values a wrong probe would miss (the label
    # probe reaches 1.0 at some seeds: 0.71 to 1.0 over seeds 0-9, so no bound below 1)
    learned(label, above=0.5, what="label probe")
    learned(subject, above=1 / 3, what="subject probe")
    learned(subject, below=1, what="subject probe, short of 1")
    assert net.history[-1][MONITOR_KEYS["label"]] == label
    assert net.history[-1][MONITOR_KEYS["subject"]] == subject
    # the monitor reads, it does not train: the losses are those of a run without it
    plain = pretrain(seed=SEED)
    assert net.history[:, "train_loss"] == plain.history[:, "train_loss"]
    # the training figure draws the logged values
    fig = plot_training_curves(net.history)
    (ax,) = [ax for ax in fig.axes if ax.get_title() == "probes of the frozen encoder"]
    lines = {line.get_label(): line for line in ax.get_lines()}
    drawn = lines["subject identity (temporal halves)"]
    assert drawn.get_xdata().tolist() == [1, 2, 4]
    assert drawn.get_ydata().tolist() == [s for _, label, s in logged if label is not None]
    assert len(plot_training_curves(plain.history).axes) < len(fig.axes)


def test_the_monitor_probes_on_its_own_cadence_and_records_its_time():
    """``every=2``: the first reported epoch, every second one after and the last (of the
    reported 1, 2 and 4: 1 and 4), with the seconds they took; the values are those of
    ``every=1`` on the same epochs (the monitor draws nothing)."""
    X, y, groups = labelled_set()
    sparse = pretrain([("monitor", ProbeMonitor(X, y, groups, sfreq=SFREQ, every=2))])
    probed = [row["epoch"] for row in sparse.history if MONITOR_KEYS["label"] in row]
    assert probed == [1, 4]
    timed = [row["epoch"] for row in sparse.history if row.get(_MONITOR_SECONDS, 0) > 0]
    assert timed == [1, 4]
    dense = pretrain([("monitor", ProbeMonitor(X, y, groups, sfreq=SFREQ))])
    for epoch in (1, 4):
        for key in MONITOR_KEYS.values():
            assert sparse.history[epoch - 1][key] == dense.history[epoch - 1][key]
        assert dense.history[epoch - 1][_MONITOR_SECONDS] > 0
    with pytest.raises(ValueError, match="'every' must be >= 1, but got 0"):
        ProbeMonitor(X, y, groups, every=0).initialize()


def test_the_monitor_refuses_windows_it_cannot_read():
    X, y, groups = labelled_set()
    with pytest.raises(ValueError, match="'X' is at sfreq=20 Hz but the encoder at 10 Hz"):
        pretrain([("monitor", ProbeMonitor(X, y, groups, sfreq=20.0))], max_epochs=1)
    with pytest.raises(ValueError, match="'groups' must hold at least 2 groups"):
        pretrain([("monitor", ProbeMonitor(X, y, np.zeros(len(y))))], max_epochs=1)
    with pytest.raises(ValueError, match="needs at least 2 windows"):
        ProbeMonitor(X[:3], y[:3], [0, 1, 2]).initialize()
    # an encoder that reads microvolts refuses the set in volts before the first step
    monitor = ProbeMonitor(X * 1e-6, y, groups, sfreq=SFREQ)
    model = PARS(n_times=N_TIMES, sfreq=SFREQ, n_patches=10, normalization="fixed", **TINY)
    net = PretrainNet(model, max_epochs=1, batch_size=16, progress_bar=False,
                      callbacks=[("monitor", monitor)])  # fmt: skip
    data = torch.utils.data.TensorDataset(30 * torch.randn(32, 1, N_TIMES), torch.zeros(32))
    with pytest.raises(ValueError, match="They look like 'V'"):
        net.fit(data)
    assert len(net.history) == 0


def test_the_pretrainer_logs_the_monitor_and_builds_the_normalisation_asked_for():
    """``PARSPretrainer(monitor=...)`` logs the probes at its report epochs, the encoder it
    returns has the normalisation asked for (amplitude in µV here: the windows' unit), and
    anything but a callback as ``monitor`` is refused before any work."""
    from braindecode_pars import PARSPretrainer

    X, y, groups = labelled_set()
    X_unlabeled = np.concatenate([X, X[::-1]]) * 10.0  # µV-sized, 48 windows of 2 channels
    pretrainer = PARSPretrainer(
        **TINY, n_patches=6, window_seconds=20.0, steps=12, batch_size=8, sfreq=SFREQ,
        normalization="fixed", unit="uV", monitor=ProbeMonitor(X * 10.0, y, groups, sfreq=SFREQ),
        random_state=0, verbose=0,
    )  # fmt: skip
    pretrainer.fit(X_unlabeled)
    assert pretrainer.encoder_.normalization == "fixed" and pretrainer.config_.unit == "uV"
    rows = [row for row in pretrainer.history_ if MONITOR_KEYS["label"] in row]
    assert rows and rows[-1]["epoch"] == len(pretrainer.history_)  # the last epoch reports
    label, subject = by_hand(pretrainer.encoder_, X * 10.0, y, groups)
    assert rows[-1][MONITOR_KEYS["label"]] == pytest.approx(label)
    assert rows[-1][MONITOR_KEYS["subject"]] == pytest.approx(subject)
    with pytest.raises(TypeError, match="'monitor' must be a ProbeMonitor.*got dict"):
        PARSPretrainer(**TINY, sfreq=SFREQ, monitor={"X": X}).fit(X_unlabeled)

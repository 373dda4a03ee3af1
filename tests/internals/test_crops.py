"""Fine-tuning on random crops and predicting by averaging over crops."""

import numpy as np
import pytest
import torch

from braindecode_pars import PARSFineTuner, PatchEncoder
from braindecode_pars.estimators._augmentation import standard_augmentation
from braindecode_pars.estimators._coded_windows import CodedWindows
from braindecode_pars.estimators._crops import FixedCrops, RandomCrops, crop_starts

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")
#: A 16-feature, one-block encoder (conftest.SMALL_ENCODER): fits in a fraction of a second.
TINY = SMALL_ENCODER


def tuner(sfreq=100, **params):
    """A PARSFineTuner over a new tiny encoder (training from scratch), seeded and quiet."""
    torch.manual_seed(SEED)
    encoder = PatchEncoder(sfreq=sfreq, **TINY)
    return PARSFineTuner(encoder=encoder, sfreq=sfreq, verbose=0, random_state=SEED, **params)


def _rhythm_task(n, seed, n_times=300):
    """Two classes told apart by the frequency of a rhythm under noise (6 vs 12 Hz)."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    t = np.arange(n_times) / 100
    f = np.where(y == 1, 12.0, 6.0)[:, None, None]
    phase = rng.uniform(0, 2 * np.pi, (n, 2, 1))
    X = np.sin(2 * np.pi * f * t + phase) + rng.standard_normal((n, 2, n_times))
    return X.astype(np.float32), y


def test_crop_starts_span_the_window():
    np.testing.assert_array_equal(crop_starts(1000, 500, 5), [0, 125, 250, 375, 500])
    np.testing.assert_array_equal(crop_starts(1000, 500, 1), [250])
    np.testing.assert_array_equal(crop_starts(500, 500, 3), [0])  # one crop fits
    with pytest.raises(ValueError, match="do not fit"):
        crop_starts(400, 500, 2)


def test_random_crops_are_slices_of_their_window_and_vary():
    X = np.arange(2 * 3 * 50, dtype=np.float32).reshape(2, 3, 50)
    crops = RandomCrops(CodedWindows(X, [0, 1]), 20)
    torch.manual_seed(0)
    starts = set()
    for _ in range(30):
        x, y = crops[1]
        start = int(x[0, 0]) - int(X[1, 0, 0])
        np.testing.assert_array_equal(x.numpy(), X[1, :, start : start + 20])
        assert y == 1
        starts.add(start)
    assert len(starts) > 5 and min(starts) >= 0 and max(starts) <= 30


def test_fixed_crops_enumerate_and_average_per_window():
    X = np.arange(2 * 1 * 10, dtype=np.float32).reshape(2, 1, 10)
    crops = FixedCrops(CodedWindows(X, [0, 1]), 4, [0, 3, 6])
    assert len(crops) == 6
    np.testing.assert_array_equal(crops[4][0].numpy(), X[1, :, 3:7])
    values = np.arange(12.0).reshape(6, 2)
    np.testing.assert_allclose(crops.average(values), [[2.0, 3.0], [8.0, 9.0]])


def test_a_classifier_on_crops_learns_and_averages_its_crops():
    X, y = _rhythm_task(80, SEED)
    Xt, yt = _rhythm_task(40, SEED + 1)
    # the token path open: at the default token_gate='auto', seeds 2, 5 and 8 scored 0.375
    # to 0.425 (at seed 2 the gate closed; open there: 0.975)
    clf = tuner(crop_seconds=1.5, n_eval_crops=3, max_epochs=15, lr=3e-3, token_gate=True)
    clf.fit(X, y)
    assert clf.module_.n_times == 150
    learned(clf.score(Xt, yt), above=0.75)  # chance: 0.5 (15 epochs on 80 windows)
    # the prediction of a window is the mean of the module's probabilities on 3 crops
    module = clf.module_.eval()
    with torch.no_grad():
        naive = np.mean(
            [torch.softmax(module(torch.as_tensor(Xt[:, :, s : s + 150])), -1).numpy()
             for s in (0, 75, 150)],
            axis=0,
        )  # fmt: skip
    np.testing.assert_allclose(clf.predict_proba(Xt), naive, rtol=1e-5, atol=1e-6)


def test_crops_longer_than_the_window_are_refused_before_training():
    X, y = _rhythm_task(20, 0)
    with pytest.raises(ValueError, match=r"'crop_seconds' must be between .* but got 5"):
        tuner(crop_seconds=5).fit(X, y)
    with pytest.raises(ValueError, match="crop_seconds"):
        tuner(crop_seconds=-1).fit(X, y)
    with pytest.raises(ValueError, match="n_eval_crops"):
        tuner(crop_seconds=1, n_eval_crops=0).fit(X, y)


def test_the_standard_augmentation_is_braindecodes_and_ignores_the_unit():
    from braindecode.augmentation import AugmentedDataLoader, FTSurrogate

    X, y = _rhythm_task(80, SEED)
    Xt, yt = _rhythm_task(40, SEED + 1)
    paper_head = dict(spatial_filters=None, band_power=None, token_gate=False, patch_stride=None)
    clf = tuner(augmentation="standard", max_epochs=15, lr=3e-3, lr_schedule="constant",
                **paper_head).fit(X, y)  # fmt: skip
    transforms = clf._augmentation()  # what fit gave braindecode's AugmentedDataLoader
    assert [type(t) for t in clf._fit_state["transforms"]] == [type(t) for t in transforms]
    assert isinstance(clf.get_iterator(CodedWindows(X, y), training=True), AugmentedDataLoader)
    # two channels: no channel dropout (a dropped channel is half the window)
    assert [type(t).__name__ for t in transforms] == ["FTSurrogate", "SmoothTimeMask"]
    assert transforms[1].mask_len_samples == 100  # one second at 100 Hz
    for n_chans, names in [(4, 2), (5, 3), (None, 3)]:
        preset = standard_augmentation(100.0, random_state=0, n_chans=n_chans)
        assert len(preset) == names
        if names == 3:
            assert type(preset[1]).__name__ == "ChannelsDropout" and preset[1].p_drop == 0.2
    learned(clf.score(Xt, yt), above=0.85)  # the rhythm survives phase surrogates
    # an FT surrogate keeps the amplitude spectrum of every channel, in any unit
    x = torch.as_tensor(X[:4] * 1e-6)
    out = FTSurrogate(1.0, random_state=0)(x)
    np.testing.assert_allclose(
        np.abs(np.fft.rfft(out.numpy(), axis=-1))[..., 1:-1],
        np.abs(np.fft.rfft(x.numpy(), axis=-1))[..., 1:-1],
        rtol=1e-3,
        atol=1e-12,
    )


def test_an_unknown_augmentation_preset_is_refused_before_training():
    X, y = _rhythm_task(20, 0)
    with pytest.raises(ValueError, match=r"'augmentation'.*'standard'.*'strong'"):
        tuner(augmentation="strong").fit(X, y)


def test_windows_stay_whole_by_default_and_bad_crops_are_refused():
    X, y = _rhythm_task(24, 0, n_times=3000)  # a 30-s epoch is never cut by default
    clf = tuner(max_epochs=1).fit(X, y)
    assert clf.crop_seconds is None and clf.n_crop_ == 3000 and clf.module_.n_times == 3000
    for bad in ("auto", "half", [5], True):
        with pytest.raises(ValueError, match=r"'crop_seconds'.*a positive number.*None.*got"):
            tuner(crop_seconds=bad).fit(X, y)


def test_augmented_fits_with_the_same_seed_are_the_same():
    X, y = _rhythm_task(40, 0)
    np.random.seed(1)  # noqa: NPY002 (the global generators must not matter)
    first = tuner(augmentation="standard", max_epochs=3).fit(X, y)
    np.random.seed(2)  # noqa: NPY002
    torch.manual_seed(2)
    second = tuner(augmentation="standard", max_epochs=3).fit(X, y)
    np.testing.assert_array_equal(first.predict_proba(X), second.predict_proba(X))
    plain = tuner(augmentation=None, max_epochs=3).fit(X, y)  # the augmentation did act
    assert not np.allclose(first.predict_proba(X), plain.predict_proba(X))


def test_validation_crops_of_a_class_missing_from_training_keep_a_finite_loss():
    from braindecode_pars.estimators._class_weights import class_weights

    np.testing.assert_allclose(class_weights([0, 0, 1], 3), [0.5, 1.0, 1.0])  # n / (3 n_c)
    X, y = _rhythm_task(24, 0, n_times=400)
    y = y.copy()
    y[[0, 1]] = 2  # class 2: two windows, both in the validation subject
    groups = np.repeat([0, 1, 2], 8)
    groups[[0, 1]] = 2
    # crops of one window fill whole batches; each validation batch a single class
    clf = tuner(sfreq=40, max_epochs=2, batch_size=2, n_eval_crops=2)
    clf.set_params(valid_fraction=0.34, min_valid_groups=3, random_state=1, crop_seconds=5.0)
    clf.fit(X, y, groups=groups)
    assert clf.n_crop_ < clf.n_times_  # 10 s at 40 Hz: 5-s crops
    assert np.isfinite(clf.history_[:, "valid_loss"]).all()

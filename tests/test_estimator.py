import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, LeaveOneGroupOut, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from braindecode_pars import PARSClassifier, PatchEncoder, save_encoder
from braindecode_pars.datasets import load_physionet_mi
from braindecode_pars.datasets.adapters import read_windows
from braindecode_pars.metrics import make_scorer

from .conftest import SMALL_CLASSIFIER

# the neural path (a trained spatial head over the frozen encoder, auto's choice before
# the probe); the default probe has its tests in test_finetune_strategies.py
SMALL = dict(SMALL_CLASSIFIER, sfreq=50, finetune="frozen")


def _toy(n=48, n_chans=3, T=100, seed=0):
    """Two classes: a 5 Hz or a 15 Hz rhythm on the first channel."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    t = np.arange(T) / 50
    X = rng.normal(size=(n, n_chans, T)).astype(np.float32) * 0.5
    X[:, 0] += np.sin(2 * np.pi * np.where(y == 0, 5, 15)[:, None] * t)
    return X, y


def test_learns_a_task_built_for_it_above_chance():
    X, y = _toy(96)
    Xt, yt = _toy(64, seed=1)
    clf = PARSClassifier(
        **{**SMALL, "max_epochs": 40, "lr": 3e-3, "encoder": dict(emb_dim=32, depth=1, n_heads=2)}
    ).fit(X, y)
    assert clf.score(Xt, yt) > 0.85
    losses = clf.history_[:, "train_loss"]
    assert losses[-1] < 0.6 * losses[0]
    assert clf.pretrain_history_ is not None and len(clf.pretrain_history_) == 2


def test_fit_predict_and_fitted_attributes():
    X, y = _toy()
    labels = np.where(y == 0, "rest", "move")
    clf = PARSClassifier(**SMALL).fit(X, labels)
    assert list(clf.classes_) == ["move", "rest"]
    proba = clf.predict_proba(X)
    assert proba.shape == (48, 2) and np.allclose(proba.sum(1), 1, atol=1e-5)
    assert set(clf.predict(X)) <= {"move", "rest"}
    assert clf.n_chans_ == 3 and clf.n_times_ == 100 and clf.sfreq_ == 50


def test_same_random_state_same_predictions_and_clone_before_and_after_fit():
    X, y = _toy()
    a = PARSClassifier(**SMALL)
    b = clone(a)

    def own(est):  # skorch lists its default callback objects too: new ones per instance
        return {k: v for k, v in est.get_params().items() if not k.startswith("callbacks__")}

    assert own(b) == own(a)
    pa = a.fit(X, y).predict_proba(X)
    pb = b.fit(X, y).predict_proba(X)
    np.testing.assert_allclose(pa, pb, rtol=1e-5, atol=1e-6)
    c = clone(a)  # after fit: same parameters, not fitted
    assert not hasattr(c, "module_")
    assert own(c) == own(a)
    c.set_params(encoder=dict(depth=2), max_epochs=1)
    assert c.get_params()["encoder"] == dict(depth=2)


def test_grid_search_over_pretraining_and_fine_tuning_finds_the_rate_that_learns():
    X, y = _toy(96)
    clf = PARSClassifier(**{**SMALL, "max_epochs": 30, "finetune": "full"})
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z * 2.0), clf)
    grid = GridSearchCV(
        pipe,
        {"parsclassifier__lr": [1e-12, 3e-3], "parsclassifier__pretrain_epochs": [0, 1]},
        cv=2,
    )
    grid.fit(X, y)
    # lr 1e-12 learns nothing (chance); lr 3e-3 learns the rhythm
    assert grid.best_params_["parsclassifier__lr"] == 3e-3
    scores = grid.cv_results_["mean_test_score"].reshape(2, 2)  # lr x pretrain_epochs
    assert scores[0].max() < 0.7 < scores[1].min()
    assert grid.predict(X).shape == (96,)


def test_starts_from_a_saved_encoder_and_refuses_a_mismatched_one(tmp_path):
    X, y = _toy()
    enc = PatchEncoder(sfreq=50, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    save_encoder(enc, tmp_path / "enc.pt")
    clf = PARSClassifier(
        **{**SMALL, "encoder": None, "pretrained_encoder": tmp_path / "enc.pt"}
    ).fit(X, y)
    assert clf.pretrain_history_ is None  # pretraining skipped
    assert clf.encoder_.emb_dim == 16
    save_encoder(
        PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=16), tmp_path / "enc100.pt"
    )
    with pytest.raises(ValueError, match="sfreq=100.* Hz but the data is at 50.0 Hz"):
        PARSClassifier(
            **{**SMALL, "encoder": None, "pretrained_encoder": tmp_path / "enc100.pt"}
        ).fit(X, y)
    with pytest.raises(ValueError, match="cuts 1.0-s patches but 'patch_seconds'=0.5"):
        PARSClassifier(
            **{
                **SMALL,
                "encoder": None,
                "pretrained_encoder": tmp_path / "enc.pt",
                "patch_seconds": 0.5,
            }
        ).fit(X, y)


class _Exploding(PARSClassifier):
    def _encoder(self, *args, **kwargs):  # pragma: no cover - must never be reached
        raise AssertionError("training started before the input was checked")


@pytest.mark.parametrize(
    "mutate, match",
    [
        pytest.param(
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), y),
            "NaN or infinite values in 1 window",
            id="nan",
        ),
        pytest.param(lambda X, y: (np.where(X > 2.5, np.inf, X), y), "NaN or infinite", id="inf"),
        pytest.param(lambda X, y: (X, None), "Labels are missing", id="no-labels"),
        pytest.param(
            lambda X, y: (X, np.where(np.arange(len(y)) == 3, None, y).astype(object)),
            "Labels are missing for 1 window",
            id="one-label-missing",
        ),
        pytest.param(lambda X, y: (X, np.zeros_like(y)), "at least two classes", id="one-class"),
        pytest.param(lambda X, y: (X[:, :, :20], y), "shorter than one patch", id="short"),
        pytest.param(lambda X, y: (X[:, 0], y), r"shape \(n_windows, n_chans, n_times\)", id="2d"),
        pytest.param(
            lambda X, y: (X.transpose(0, 2, 1)[:, :, :40], y), "axes are swapped", id="swapped"
        ),
    ],
)
def test_bad_data_is_refused_before_training(mutate, match):
    X, y = _toy()
    X, y = mutate(X, y)
    with pytest.raises(ValueError, match=match):
        _Exploding(**SMALL).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        pytest.param(dict(pos_mask_ratio=0), r"'pos_mask_ratio' must lie in \(0, 1\]", id="r"),
        pytest.param(dict(encoder=dict(emb_dim=15)), "must be even and divisible", id="emb"),
        pytest.param(dict(encoder="huge"), "Allowed values are 'small', 'paper'", id="size"),
        pytest.param(
            dict(pretrained_encoder="pars-small"), "leave 'encoder' as None", id="size-and-encoder"
        ),
        pytest.param(dict(finetune="lp-ft", max_epochs=1), "'max_epochs' must be >= 2", id="lpft"),
        pytest.param(dict(device="mps"), "allowed are 'cpu' and 'cuda'", id="mps"),
        pytest.param(dict(pretrain_epochs=-1), "'pretrain_epochs' must be >= 0", id="epochs"),
        pytest.param(dict(valid_fraction=1.0), "'valid_fraction' must lie in", id="valid"),
        pytest.param(
            dict(min_valid_groups="all"), r"'min_valid_groups' must be None \(no valid", id="mvg"
        ),
        pytest.param(dict(min_valid_groups=1), "'min_valid_groups' must be >= 2", id="mvg-1"),
        pytest.param(dict(sfreq=None), "do not carry their sampling rate", id="sfreq"),
    ],
)
def test_bad_parameters_are_refused_at_fit(params, match):
    X, y = _toy()
    clf = _Exploding(**{**SMALL, **params})  # __init__ validates nothing
    with pytest.raises((ValueError, TypeError), match=match):
        clf.fit(X, y)


def test_a_class_with_one_window_is_accepted_when_no_split_is_made():
    X, y = _toy()
    y = np.where(np.arange(len(y)) == 0, 7, y)  # class 7: a single window
    clf = PARSClassifier(**{**SMALL, "pretrain_epochs": 0, "max_epochs": 1}).fit(X, y)
    assert clf.validation_ == "none" and list(clf.classes_) == [0, 1, 7]


def test_predict_refuses_windows_of_another_shape():
    X, y = _toy()
    clf = PARSClassifier(**{**SMALL, "pretrain_epochs": 0, "max_epochs": 1}).fit(X, y)
    with pytest.raises(ValueError, match=r"fitted on \(3, 100\)"):
        clf.predict(X[:, :2])


def test_sklearn_tags_declare_three_d_input():
    tags = PARSClassifier().__sklearn_tags__()
    assert tags.input_tags.three_d_array and not tags.input_tags.two_d_array
    assert tags.estimator_type == "classifier"


@pytest.fixture(scope="module")
def mi():
    windows = load_physionet_mi()
    data = read_windows(windows)
    return windows, data.X, data.y, data.sfreq, windows.get_metadata()["block"].to_numpy()


def test_fit_on_braindecode_windows_reads_labels_and_sfreq(mi):
    windows = mi[0]
    clf = PARSClassifier(**{**SMALL, "sfreq": None, "pretrain_epochs": 1, "max_epochs": 1})
    clf.fit(windows)
    assert clf.sfreq_ == 200 and list(clf.classes_) == [0, 1, 2, 3]
    assert clf.n_chans_ == 64 and clf.n_times_ == 800


def test_cross_val_score_leave_one_group_out_equals_the_loop_by_hand(mi):
    _, X, y, sfreq, groups = mi
    clf = PARSClassifier(**{**SMALL, "sfreq": sfreq, "max_epochs": 2, "pretrain_epochs": 1})
    scores = cross_val_score(
        clf, X, y, groups=groups, cv=LeaveOneGroupOut(), scoring=make_scorer("kappa")
    )
    by_hand = []
    for g in np.unique(groups):  # each fold: fit without the held-out block, score on it
        torch.manual_seed(123)  # global state must not matter
        fitted = clone(clf).fit(X[groups != g], y[groups != g])
        by_hand.append(make_scorer("kappa")(fitted, X[groups == g], y[groups == g]))
    np.testing.assert_allclose(scores, by_hand, atol=1e-12)


# scikit-learn has no data checks for 3-D input: it says so with a SkipTestWarning and
# runs the checks that apply (cloning); the parameter checks below run explicitly.
@pytest.mark.filterwarnings("ignore:Can't test estimator PARSClassifier")
@parametrize_with_checks([PARSClassifier(sfreq=10)])
def test_scikit_learn_checks_for_a_three_d_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "check",
    [
        # check_no_attributes_set_in_init and check_set_params are not listed: skorch's
        # NeuralNet sets history_ and initialized_ in __init__ and validates some
        # set_params values itself, so every skorch net (braindecode's EEGClassifier
        # too) fails them by design
        estimator_checks.check_get_params_invariance,
        estimator_checks.check_parameters_default_constructible,
    ],
    ids=lambda c: c.__name__,
)
def test_scikit_learn_parameter_checks(check):
    check("PARSClassifier", PARSClassifier(sfreq=10))


def test_defaults_are_constructible_and_documented():
    estimator_checks.check_parameters_default_constructible("PARSClassifier", PARSClassifier())
    params = PARSClassifier().get_params()
    assert params["encoder"] is None  # the "small" size of the shipped encoder
    assert (params["n_patches"], params["pos_mask_ratio"]) == (40, 0.8)
    assert params["spatial_drop_prob"] == 0.5 and params["optimizer__weight_decay"] == 1e-4
    # fine-tuning: the development tasks' selection splits (see the class docstring)
    assert (params["lr"], params["batch_size"], params["max_epochs"]) == (3e-4, 16, 40)
    assert (params["finetune"], params["probe_C"], params["amplitude"]) == ("auto", 100.0, False)
    assert (params["crop_seconds"], params["min_valid_groups"]) == (None, None)


def test_windows_are_read_once_per_fit_and_once_per_predict(mi, monkeypatch):
    import braindecode_pars.datasets.adapters as adapters

    reads = []
    original = adapters._stack_braindecode

    def counting(*args, **kwargs):
        reads.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(adapters, "_stack_braindecode", counting)
    windows = mi[0]
    clf = PARSClassifier(**{**SMALL, "sfreq": None, "pretrain_epochs": 1, "max_epochs": 2})
    clf.fit(windows)
    assert len(reads) == 1
    assert clf.predict_proba(windows).shape == (len(windows), 4)
    assert len(reads) == 2


def test_nan_inside_a_preloaded_recording_is_found_in_its_window(mi):
    windows = load_physionet_mi(runs=[4])
    ds = windows.datasets[0]
    _, start, stop = ds.crop_inds[3]
    ds.raw._data[5, start + 10] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite values in 1 window"):
        _Exploding(**{**SMALL, "sfreq": None}).fit(windows)


def test_an_explicit_validation_set_keeps_the_epoch_of_lowest_validation_loss(mi):
    _, X, y, sfreq, blocks = mi
    train, valid = blocks != 3, blocks == 3
    params = {**SMALL, "sfreq": sfreq, "pretrain_epochs": 0, "max_epochs": 8, "lr": 3e-2}
    params.update(finetune="full", batch_size=64, spatial_drop_prob=0.0)
    clf = PARSClassifier(**params).fit(X[train], y[train], X_valid=X[valid], y_valid=y[valid])
    assert clf.validation_ == "X_valid" and clf.n_crop_ == X.shape[-1]
    losses = np.asarray(clf.history_[:, "valid_loss"])
    assert losses.argmin() < len(losses) - 1, "the test needs a best epoch before the last"
    # one validation batch: the kept weights' loss on it is the best recorded one
    clf.module_.eval()
    with torch.no_grad():
        logits = clf.module_(torch.as_tensor(X[valid]))
        codes = torch.as_tensor(np.searchsorted(clf.classes_, y[valid]))
        loss = torch.nn.functional.cross_entropy(logits, codes, weight=clf.class_weight_)
    np.testing.assert_allclose(loss.item(), losses.min(), rtol=1e-4)
    with pytest.raises(ValueError, match=r"'y_valid' holds classes \[9\]"):
        _Exploding(**SMALL).fit(
            X[train, :3, :100],
            y[train],
            X_valid=X[valid, :3, :100],
            y_valid=np.full(valid.sum(), 9),
        )
    with pytest.raises(ValueError, match="'X_valid' windows"):
        _Exploding(**SMALL).fit(
            X[train, :3, :100], y[train], X_valid=X[valid, :2, :100], y_valid=y[valid]
        )


def test_the_default_probe_in_cross_validation_over_blocks_of_windows(mi, tmp_path):
    """The probe through scikit-learn's cross-validation on braindecode windows equals
    a hand-written loop over the blocks with AlignedProbe (one subject: each side of a
    fold is one group), and without alignment with probe_pipeline; it clones,
    pickles, and refuses the neural-head-only calls."""
    import pickle

    from sklearn.base import clone
    from skorch.helper import SliceDataset

    from braindecode_pars import PatchEncoder
    from braindecode_pars.probe import AlignedProbe, probe_pipeline

    windows, X, y, sfreq, blocks = mi
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=sfreq, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    for align, make in (("groups", AlignedProbe), (None, probe_pipeline)):
        clf = PARSClassifier(
            pretrained_encoder=encoder, probe_align=align, verbose=0, random_state=0
        )
        scores = cross_val_score(
            clf, SliceDataset(windows), SliceDataset(windows, idx=1), groups=blocks,
            cv=LeaveOneGroupOut(),
        )  # fmt: skip
        expected = []
        for block in np.unique(blocks):
            train, test = blocks != block, blocks == block
            probe = make(encoder, sfreq=sfreq, tangent_space=True, C=100.0)
            expected.append(probe.fit(X[train], y[train]).score(X[test], y[test]))
        np.testing.assert_allclose(scores, expected)
    clf.set_params(probe_align="groups")
    fitted = clone(clf).fit(windows)
    assert fitted.finetune_ == "probe"
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    with pytest.raises(ValueError, match="save_params.*probe.*pickle"):
        fitted.save_params(f_params=tmp_path / "params.pt")
    with pytest.raises(ValueError, match="partial_fit.*probe.*refit it with fit"):
        fitted.partial_fit(X, y)

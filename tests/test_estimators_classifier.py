"""PARSClassifier, the composition of an encoder stage and a head: learning, fitted
attributes, clone and grid search over both stages, checks before any work, scikit-learn's
checks, braindecode windows, cross-validation, a validation set, the probe head."""

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, LeaveOneGroupOut, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe, PatchEncoder
from braindecode_pars.datasets.physionet_mi import load_physionet_mi
from braindecode_pars.metrics import make_scorer

from ._helpers import ExplodingPretrainer, bundled_mi, saved_small_encoder
from ._learning import SEED, learned
from .conftest import SMALL_ENCODER, SMALL_FINETUNER, SMALL_PRETRAINER

pytestmark = pytest.mark.usefixtures("one_thread")

ESTIMATORS = (PARSClassifier, PARSPretrainer, PARSProbe, PARSFineTuner)


def small(pretrainer=PARSPretrainer, **params):
    """The neural path: a tiny ``pretrainer`` (2 epochs of batch 16) and a frozen
    PARSFineTuner (4 epochs), seeded and quiet, at 50 Hz; ``params`` by scikit-learn's
    nested names (``encoder__max_epochs``, ``head__lr``)."""
    clf = PARSClassifier(
        pretrainer(**SMALL_PRETRAINER),
        PARSFineTuner(strategy="frozen", **SMALL_FINETUNER),
        sfreq=50,
        random_state=0,
        verbose=0,
    )
    return clf.set_params(**params)


def _toy(n=48, n_chans=3, T=100, seed=0):
    """Two classes: a 5 Hz or a 15 Hz rhythm on the first channel."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    t = np.arange(T) / 50
    X = rng.normal(size=(n, n_chans, T)).astype(np.float32) * 0.5
    X[:, 0] += np.sin(2 * np.pi * np.where(y == 0, 5, 15)[:, None] * t)
    return X, y


def test_learns_a_task_built_for_it_above_chance():
    X, y = _toy(96, seed=SEED)
    Xt, yt = _toy(64, seed=SEED + 1)
    clf = small(head__max_epochs=40, head__lr=3e-3, encoder__emb_dim=32, random_state=SEED)
    clf.fit(X, y)
    learned(clf.score(Xt, yt), above=0.85)
    losses = clf.head_.history_[:, "train_loss"]
    assert losses[-1] < 0.6 * losses[0]
    assert clf.pretrain_history_ is not None and len(clf.pretrain_history_) == 2
    assert clf.encoder_.emb_dim == 32 and clf.pretrainer_.encoder_ is clf.encoder_


def test_fit_predict_and_fitted_attributes():
    X, y = _toy()
    labels = np.where(y == 0, "rest", "move")
    clf = small().fit(X, labels)
    assert list(clf.classes_) == ["move", "rest"]
    proba = clf.predict_proba(X)
    assert proba.shape == (48, 2) and np.allclose(proba.sum(1), 1, atol=1e-5)
    assert set(clf.predict(X)) <= {"move", "rest"}
    assert clf.n_chans_ == 3 and clf.n_times_ == 100 and clf.sfreq_ == 50
    assert isinstance(clf.head_, PARSFineTuner) and isinstance(clf.pretrainer_, PARSPretrainer)


def test_same_random_state_same_predictions_and_clone_before_and_after_fit():
    X, y = _toy()
    a = small()
    b = clone(a)

    def own(est):  # the values, not the stage objects (new ones per clone); skorch lists
        # its default callback objects too: new ones per instance
        return {
            k: v
            for k, v in est.get_params().items()
            if "callbacks" not in k and not hasattr(v, "get_params")
        }

    assert own(b) == own(a)
    pa = a.fit(X, y).predict_proba(X)
    pb = b.fit(X, y).predict_proba(X)
    np.testing.assert_allclose(pa, pb, rtol=1e-5, atol=1e-6)
    c = clone(a)  # after fit: same parameters, not fitted
    assert not hasattr(c, "head_") and not hasattr(c.head, "module_")
    assert own(c) == own(a)
    c.set_params(encoder__depth=2, head__max_epochs=1)
    assert c.get_params()["encoder__depth"] == 2 and c.head.max_epochs == 1
    assert a.get_params()["encoder__depth"] == 1  # the clone's stages are its own


def test_grid_search_over_pretraining_and_fine_tuning_finds_the_rate_that_learns():
    X, y = _toy(96, seed=SEED)
    clf = small(head__max_epochs=30, head__strategy="full", random_state=SEED)
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z * 2.0), clf)
    grid = GridSearchCV(
        pipe,
        {
            "parsclassifier__head__lr": [1e-12, 3e-3],
            "parsclassifier__encoder__max_epochs": [0, 1],
        },
        cv=2,
    )
    grid.fit(X, y)
    # lr 3e-3 learns the rhythm; lr 1e-12 leaves the head as it was drawn, which on a rhythm
    # this strong scores anywhere from 0 to 1 (0.01 to 0.96 over seeds 0-9), so the bound
    # is on the rows that learn, and on the grid's choice (3e-3 rows: 0.97 to 1.0)
    lrs = [params["parsclassifier__head__lr"] for params in grid.cv_results_["params"]]
    scores = grid.cv_results_["mean_test_score"]
    learned(scores[np.equal(lrs, 3e-3)].min(), above=0.7, what="lr 3e-3, worst of its rows")
    lead = scores[np.equal(lrs, 3e-3)].max() - scores[np.equal(lrs, 1e-12)].max()
    learned(lead, above=0, what="lr 3e-3 over lr 1e-12, best rows")
    assert grid.best_params_["parsclassifier__head__lr"] == 3e-3
    assert grid.predict(X).shape == (96,)
    best = grid.best_estimator_[-1]
    assert best.head_.lr == 3e-3
    epochs = grid.best_params_["parsclassifier__encoder__max_epochs"]
    assert (best.pretrain_history_ is None) == (epochs == 0)


def test_starts_from_a_saved_encoder_and_resamples_for_one_at_another_rate(tmp_path):
    X, y = _toy()
    clf = small(encoder=saved_small_encoder(tmp_path / "enc.pt", 50)).fit(X, y)
    assert clf.pretrain_history_ is None and clf.pretrainer_ is None  # pretraining skipped
    assert clf.encoder_.emb_dim == 16
    assert (clf.head_.sfreq_, clf.head_.n_times_) == (50, 100)
    at_100 = saved_small_encoder(tmp_path / "enc100.pt", 100)
    other = small(encoder=at_100).fit(X, y)  # the windows resampled to the encoder's rate
    assert (other.head_.input_sfreq_, other.head_.sfreq_, other.head_.n_times_) == (50, 100, 200)
    assert other.predict(X).shape == (len(X),)


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
        small(ExplodingPretrainer).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        pytest.param(
            dict(encoder__pos_mask_ratio=0), r"'pos_mask_ratio' must lie in \(0, 1\]", id="r"
        ),
        pytest.param(dict(encoder__emb_dim=15), "'emb_dim' must be even", id="emb"),
        pytest.param(
            dict(encoder="huge"),
            "'encoder': there is no file .*not the name of a shipped",
            id="name",
        ),
        pytest.param(
            dict(head__strategy="lp-ft", head__max_epochs=1),
            "'max_epochs' must be >= 2",
            id="lpft",
        ),
        pytest.param(dict(encoder__device="mps"), "allowed are 'cpu' and 'cuda'", id="mps-encoder"),
        pytest.param(
            dict(head__device="mps"),
            "allowed are 'cpu' and 'cuda'",
            id="mps-head",
        ),
        pytest.param(dict(encoder__max_epochs=-1), "'max_epochs' must be >= 0", id="epochs"),
        pytest.param(
            dict(head__valid_fraction=1.0),
            "'valid_fraction' must lie in",
            id="valid",
        ),
        pytest.param(
            dict(head__min_valid_groups="all"),
            r"'min_valid_groups' parameter\. Allowed values are None \(no",
            id="mvg",
        ),
        pytest.param(
            dict(head__min_valid_groups=1),
            "'min_valid_groups' must be >= 2",
            id="mvg-1",
        ),
        pytest.param(dict(sfreq=None), "'X' does not carry its sampling rate", id="sfreq"),
    ],
)
def test_bad_parameters_are_refused_at_fit_before_any_work(params, match):
    X, y = _toy()
    clf = small(ExplodingPretrainer, **params)  # __init__ and set_params validate no value
    with pytest.raises((ValueError, TypeError, FileNotFoundError), match=match):
        clf.fit(X, y)


def test_a_class_with_one_window_is_accepted_when_no_split_is_made():
    X, y = _toy()
    y = np.where(np.arange(len(y)) == 0, 7, y)  # class 7: a single window
    clf = small(encoder__max_epochs=0, head__max_epochs=1).fit(X, y)
    assert clf.head_.validation_ == "none" and list(clf.classes_) == [0, 1, 7]


def test_predict_refuses_windows_of_another_shape():
    X, y = _toy()
    clf = small(encoder__max_epochs=0, head__max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match=r"fitted on \(3, 100\)"):
        clf.predict(X[:, :2])


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda c: c.__name__)
def test_sklearn_tags_declare_three_d_input(estimator):
    tags = estimator().__sklearn_tags__()
    assert tags.input_tags.three_d_array and not tags.input_tags.two_d_array
    if estimator is PARSPretrainer:
        assert tags.transformer_tags is not None and not tags.target_tags.required
    else:
        assert tags.estimator_type == "classifier"


@pytest.fixture(scope="module")
def mi():
    return bundled_mi()


def test_fit_on_braindecode_windows_reads_labels_and_sfreq(mi):
    windows = mi[0]
    clf = small(sfreq=None, encoder__max_epochs=1, head__max_epochs=1)
    clf.fit(windows)
    assert clf.sfreq_ == 200 and list(clf.classes_) == [0, 1, 2, 3]
    assert clf.n_chans_ == 64 and clf.n_times_ == 800
    assert clf.pretrainer_.sfreq_ == clf.head_.sfreq_ == 200


def test_cross_val_score_leave_one_group_out_equals_the_loop_by_hand(mi):
    _, X, y, sfreq, groups = mi
    clf = small(sfreq=sfreq, encoder__max_epochs=1, head__max_epochs=2)
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
# runs cloning alone. Its data checks run on the probe through a 2-D adapter, and the
# contract of every classifier is checked, in tests/test_sklearn_checks.py; the
# parameter checks below run explicitly.
@pytest.mark.filterwarnings("ignore:Can't test estimator")
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda c: c.__name__)
def test_scikit_learn_runs_only_its_cloning_check_on_three_d_input(estimator):
    results = estimator_checks.check_estimator(estimator(sfreq=10), on_fail=None)
    ran = [(r["check_name"], r["status"]) for r in results]
    assert ran == [("check_estimator_cloneable", "passed")]


PARAMETER_CHECKS = [
    estimator_checks.check_get_params_invariance,
    estimator_checks.check_parameters_default_constructible,
]
#: Checks a skorch net fails by design (NeuralNet sets history_ and initialized_ in
#: __init__ and validates some set_params values itself, as braindecode's EEGClassifier
#: does); the scikit-learn estimators pass them.
NOT_FOR_SKORCH = [
    estimator_checks.check_no_attributes_set_in_init,
    estimator_checks.check_set_params,
]


@pytest.mark.parametrize(
    "estimator, check",
    [(e, c) for e in ESTIMATORS for c in PARAMETER_CHECKS]
    + [(e, c) for e in ESTIMATORS if e is not PARSFineTuner for c in NOT_FOR_SKORCH],
    ids=lambda x: x.__name__,
)
def test_scikit_learn_parameter_checks(estimator, check):
    check(estimator.__name__, estimator(sfreq=10))


def test_defaults_are_constructible_and_documented():
    for estimator in ESTIMATORS:  # parameters stored as given: head=None stays None
        estimator_checks.check_parameters_default_constructible(estimator.__name__, estimator())
    for estimator in (PARSClassifier, PARSProbe):
        estimator_checks.check_no_attributes_set_in_init(estimator.__name__, estimator())
    params = PARSClassifier().get_params()
    assert params["encoder"] == "default" and params["head"] is None
    pretrainer = PARSPretrainer().get_params()
    assert (pretrainer["n_patches"], pretrainer["pos_mask_ratio"]) == (None, 0.8)  # scaled
    sizes = [pretrainer[k] for k in ("emb_dim", "depth", "n_heads", "ff_dim")]
    assert sizes == [64, 4, 4, 128]  # the small size
    head = PARSFineTuner().get_params()
    assert head["spatial_drop_prob"] == 0.0 and head["optimizer__weight_decay"] == 1e-4
    # fine-tuning: the development tasks' selection splits (see docs/benchmarks.rst)
    assert (head["lr"], head["batch_size"], head["max_epochs"]) == (1e-3, 4, 25)  # issue 86
    # the spatial front end reads band power; the broadband amplitude path is off (issue 86)
    assert (head["strategy"], head["amplitude"]) == ("full", False)
    front = [head[k] for k in ("spatial_filters", "band_power", "token_gate", "patch_stride")]
    assert front == [8, (8.0, 30.0), "auto", 0.5]  # the token decided on held-out windows
    assert (head["lr_schedule"], head["augmentation"]) == ("warmup-cosine", None)
    assert (head["crop_seconds"], head["min_valid_groups"]) == (None, None)
    # the probe's C: the selection splits at several label counts (bench_probe_c.py)
    probe = PARSProbe().get_params()
    assert (probe["C"], probe["band_power"], probe["tangent_space"]) == (3.0, True, True)
    assert (probe["readout"], probe["bands"], probe["crop_seconds"]) == ("mean+std", None, None)
    assert probe["align"] is None


def test_nan_inside_a_preloaded_recording_is_found_in_its_window():
    windows = load_physionet_mi(runs=[4])
    ds = windows.datasets[0]
    _, start, stop = ds.crop_inds[3]
    ds.raw._data[5, start + 10] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite values in 1 window"):
        small(ExplodingPretrainer, sfreq=None).fit(windows)


class _ExplodingHead(PARSFineTuner):
    def initialize(self):  # pragma: no cover - must never be reached
        raise AssertionError("training started before the input was checked")


def test_an_explicit_validation_set_keeps_the_epoch_of_lowest_validation_loss(mi):
    _, X, y, sfreq, blocks = mi
    train, valid = blocks != 3, blocks == 3
    torch.manual_seed(0)
    head = PARSFineTuner(  # the paper's head at a constant rate: the validation losses
        strategy="full", max_epochs=8, lr=3e-2, batch_size=64, spatial_drop_prob=0.0,
        amplitude=False, verbose=0, lr_schedule="constant", spatial_filters=None,
        band_power=None, token_gate=False, patch_stride=None,
    )  # fmt: skip
    encoder = PatchEncoder(sfreq=sfreq, **SMALL_ENCODER)
    clf = PARSClassifier(encoder, head, sfreq=sfreq, random_state=0, verbose=0)
    clf.fit(X[train], y[train], X_valid=X[valid], y_valid=y[valid])
    tuner = clf.head_
    assert tuner.validation_ == "X_valid" and tuner.n_crop_ == X.shape[-1]
    losses = np.asarray(tuner.history_[:, "valid_loss"])
    assert losses.argmin() < len(losses) - 1, "the test needs a best epoch before the last"
    # one validation batch: the kept weights' loss on it is the best recorded one
    tuner.module_.eval()
    with torch.no_grad():
        logits = tuner.module_(torch.as_tensor(X[valid]))
        codes = torch.as_tensor(np.searchsorted(tuner.classes_, y[valid]))
        loss = torch.nn.functional.cross_entropy(logits, codes, weight=tuner.class_weight_)
    np.testing.assert_allclose(loss.item(), losses.min(), rtol=1e-4)
    exploding = _ExplodingHead(encoder=PatchEncoder(sfreq=sfreq, **SMALL_ENCODER), sfreq=sfreq)
    with pytest.raises(ValueError, match=r"'y_valid' holds classes \[9\]"):
        exploding.fit(X[train], y[train], X_valid=X[valid], y_valid=np.full(valid.sum(), 9))
    with pytest.raises(ValueError, match="'X_valid' windows"):
        exploding.fit(X[train], y[train], X_valid=X[valid, :2], y_valid=y[valid])
    with pytest.raises(TypeError, match="'X_valid', which no stage's fit takes"):
        PARSClassifier(PatchEncoder(sfreq=sfreq, **SMALL_ENCODER), sfreq=sfreq).fit(
            X[train], y[train], X_valid=X[valid], y_valid=y[valid]
        )


@pytest.fixture(scope="module")
def mi8():
    """The bundled windows with their first 8 channels (the probe's cost grows with the
    channels), as arrays too, and their blocks."""
    return bundled_mi(n_chans=8)


def test_the_probe_head_in_cross_validation_over_blocks_of_windows(mi8):
    """The probe head through scikit-learn's cross-validation on braindecode windows
    equals a hand-written loop over the blocks with the probe fitted on arrays (one
    subject: each side of a fold is one group, aligned or not); it clones and pickles."""
    import pickle

    from skorch.helper import SliceDataset

    windows, X, y, sfreq, blocks = mi8
    assert X.shape[1:] == (8, 800)
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=sfreq, **SMALL_ENCODER)
    for align in ("groups", None):
        clf = PARSClassifier(encoder, PARSProbe(align=align), verbose=0, random_state=0)
        scores = cross_val_score(
            clf, SliceDataset(windows), SliceDataset(windows, idx=1), groups=blocks,
            cv=LeaveOneGroupOut(),
        )  # fmt: skip
        expected = []
        for block in np.unique(blocks):
            train, test = blocks != block, blocks == block
            probe = PARSProbe(encoder, align=align, sfreq=sfreq)
            expected.append(probe.fit(X[train], y[train]).score(X[test], y[test]))
        np.testing.assert_allclose(scores, expected)
    clf.set_params(head__align="groups")
    fitted = clone(clf).fit(windows)
    assert type(fitted.head_) is PARSProbe and fitted.head_.align == "groups"
    assert fitted.pretrainer_ is None and fitted.pretrain_history_ is None
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))

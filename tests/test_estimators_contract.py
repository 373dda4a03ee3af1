"""The scikit-learn and skorch contracts at every edge of the estimators (issue 37).

Each test checks a known answer that the flat ``PARSClassifier`` of b211f06 (a skorch
net that also held the probe) failed: ``partial_fit`` after ``fit``, ``set_params``
with an encoder instance, grid searches over both stages, ``classes=`` in another
order, unknown nested names, clone / pickle / cross-validation, groups reaching
``fit``, the unit of the windows, an interrupted fit, and reading ``X`` once.
"""

import pickle
import warnings

import mne
import numpy as np
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, GroupKFold, LeaveOneGroupOut, cross_val_score
from sklearn.utils.validation import check_is_fitted
from skorch.helper import SliceDataset

from braindecode_pars import (
    PARSClassifier,
    PARSFineTuner,
    PARSPretrainer,
    PARSProbe,
    PatchEncoder,
)

from ._helpers import scaled_subjects
from ._learning import SEED, learned
from .conftest import SMALL_ENCODER, InterruptAt

SFREQ = 50.0
pytestmark = pytest.mark.usefixtures("one_thread")
#: A 16-feature, one-block encoder (conftest.SMALL_ENCODER): fits in a fraction of a second.
TINY = SMALL_ENCODER
#: A frozen neural head that learns the rhythm task in a second.
#: the neural head of these contract tests (label codes, cloning, interrupts), without the
#: default augmentation: a few epochs have to fit the toy rhythms confidently
HEAD = dict(
    strategy="frozen", max_epochs=10, lr=1e-2, batch_size=16, verbose=0, random_state=0,
    augmentation=None,
)  # fmt: skip


def _encoder(seed=0):
    torch.manual_seed(seed)
    return PatchEncoder(sfreq=SFREQ, **TINY)


def _blind_encoder():
    """An encoder that sees nothing: its tokenizer is zero, so every window gives the
    same tokens (the bias and the positions)."""
    encoder = _encoder()
    with torch.no_grad():
        encoder.tokenizer.weight.zero_()
    return encoder


def _rhythm(n=48, n_chans=3, n_times=100, seed=0, n_subjects=4, noise=0.5):
    """Two classes: a 5 Hz or a 15 Hz rhythm on the first channel (starting at phase 0
    in every window), under noise; the subjects in turn, each holding both classes."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    t = np.arange(n_times) / SFREQ
    X = rng.normal(size=(n, n_chans, n_times)).astype(np.float32) * noise
    X[:, 0] += np.sin(2 * np.pi * np.where(y == 0, 5, 15)[:, None] * t)
    groups = (np.arange(n) // 2) % n_subjects
    return X, y, groups


def _windows(X, y, groups, scale=1.0):
    """braindecode windows of the same data: one recording per window (an mne
    RawArray), its label and subject in the description."""
    info = mne.create_info([f"EEG{c}" for c in range(X.shape[1])], SFREQ, ch_types="eeg")
    recordings = [
        RawDataset(
            mne.io.RawArray(scale * x.astype(np.float64), info, verbose="error"),
            {"target": int(label), "subject": int(group)},
            target_name="target",
        )
        for x, label, group in zip(X, y, groups, strict=True)
    ]
    return create_fixed_length_windows(
        BaseConcatDataset(recordings),
        window_size_samples=X.shape[2],
        window_stride_samples=X.shape[2],
        on_last_window="drop",
        preload=True,
    )


# -- partial_fit ----------------------------------------------------------------------------
def test_partial_fit_after_fit_trains_further():
    X, y, _ = _rhythm()
    labels = np.where(y == 0, "slow", "fast")
    tuner = PARSFineTuner(encoder=_encoder(), sfreq=SFREQ, **{**HEAD, "max_epochs": 3})
    tuner.fit(X, labels)
    losses = list(tuner.history_[:, "train_loss"])
    before = {k: v.clone() for k, v in tuner.module_.state_dict().items()}
    tuner.partial_fit(X, labels)  # string labels, coded by classes_ as fit codes them
    assert len(tuner.history_) == 6
    assert tuner.history_[:3, "train_loss"] == losses  # the first fit's epochs are kept
    after = tuner.module_.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert tuner.history_[-1, "train_loss"] < losses[0]  # it went on learning
    # through the composition: the fitted head is a skorch net, partial_fit is skorch's
    clf = PARSClassifier(_encoder(), PARSFineTuner(**{**HEAD, "max_epochs": 2}), sfreq=SFREQ)
    clf.fit(X, labels, groups=None)
    proba = clf.predict_proba(X)
    clf.head_.partial_fit(X, labels)
    assert len(clf.head_.history_) == 4
    assert not np.allclose(clf.predict_proba(X), proba)


# -- set_params and grid searches over encoders --------------------------------------------
def test_set_params_takes_an_encoder_instance():
    X, y, _ = _rhythm(seed=SEED)
    seeing, blind = _encoder(SEED), _blind_encoder()
    tuner = PARSFineTuner(sfreq=SFREQ, **{**HEAD, "max_epochs": 1, "random_state": SEED})
    assert tuner.set_params(encoder=seeing) is tuner and tuner.encoder is seeing
    tuner.fit(X, y)
    for name, value in seeing.state_dict().items():  # frozen: the given weights, as given
        assert torch.equal(tuner.encoder_.state_dict()[name], value)
    assert tuner.encoder_ is not seeing  # a copy is trained, never the caller's
    probe = PARSProbe(band_power=False, tangent_space=False, sfreq=SFREQ)
    train = np.arange(48) % 4 < 2  # both classes on each side
    scores = {}
    for name, encoder in (("seeing", seeing), ("blind", blind)):
        probe.set_params(encoder=encoder)
        assert probe.get_params()["encoder"] is encoder
        scores[name] = probe.fit(X[train], y[train]).score(X[~train], y[~train])
        reference = PARSProbe(encoder, band_power=False, tangent_space=False, sfreq=SFREQ)
        np.testing.assert_array_equal(
            probe.predict_proba(X), reference.fit(X[train], y[train]).predict_proba(X)
        )
    assert scores["blind"] == 0.5  # constant features: chance
    learned(scores["seeing"], above=0.7, what="the seeing encoder")


def _grid(X, y, groups, sfreq, seed=0):
    """A grid over an encoder-stage value (an encoder that sees, one that does not) and
    a head-stage value (an inverse penalty that lets the regression learn, and one so
    small that it keeps every probability at 0.5), scored by the log loss: only one of
    the four learns; a model that learns nothing scores ln 2."""
    seeing, blind = _encoder(seed), _blind_encoder()
    head = PARSProbe(band_power=False, tangent_space=False)  # the encoder's block alone
    grid = GridSearchCV(
        PARSClassifier(_encoder(), head, sfreq=sfreq, verbose=0),
        {"encoder": [blind, seeing], "head__C": [1e-12, 100.0]},
        scoring="neg_log_loss",
        cv=GroupKFold(2),
        error_score="raise",
    )
    grid.fit(X, y, groups=groups)
    return grid, seeing


@pytest.mark.parametrize("input", ["arrays", "windows"])
def test_grid_search_over_an_encoder_and_a_head_parameter_picks_the_one_that_learns(input):
    X, y, groups = _rhythm(seed=SEED)
    if input == "arrays":
        grid, seeing = _grid(X, y, groups, sfreq=SFREQ, seed=SEED)
    else:
        windows = _windows(X, y, groups)
        groups = windows.get_metadata()["subject"].to_numpy()
        # scikit-learn indexes a SliceDataset; its windows carry their sampling rate
        slices = SliceDataset(windows), SliceDataset(windows, idx=1)
        grid, seeing = _grid(*slices, groups, None, seed=SEED)
    scores = {
        (params["encoder"] is seeing, params["head__C"]): score
        for params, score in zip(
            grid.cv_results_["params"], grid.cv_results_["mean_test_score"], strict=True
        )
    }
    learned(scores.pop((True, 100.0)), above=-0.2, what="the one that learns, minus log loss")
    assert grid.best_params_["encoder"] is seeing and grid.best_params_["head__C"] == 100.0
    np.testing.assert_allclose(list(scores.values()), -np.log(2), rtol=1e-6)
    fitted = grid.best_estimator_
    assert fitted.head_.C == 100.0 and fitted.encoder_ is not seeing  # a clone's copy
    for name, value in seeing.state_dict().items():
        assert torch.equal(fitted.encoder_.state_dict()[name], value)


# -- classes= -------------------------------------------------------------------------------
def test_classes_in_another_order_predicts_the_labels():
    X, y, _ = _rhythm(seed=SEED)
    labels = np.where(y == 0, "a", "b")
    # the token path open, as written: token_gate='auto' (the default) closes it on this
    # task (band power alone already separates the held-out third), which leaves the
    # probabilities less sure after 10 epochs (0.59 to 0.79 over seeds 0-9, open: 0.72 to 0.87)
    head = {**HEAD, "random_state": SEED, "token_gate": True}
    params = dict(encoder=_encoder(SEED), sfreq=SFREQ, **{**head, "strategy": "full"})
    plain = PARSFineTuner(**params).fit(X, labels)
    ordered = PARSFineTuner(classes=["b", "a"], **params).fit(X, labels)
    assert list(plain.classes_) == ["a", "b"] and list(ordered.classes_) == ["b", "a"]
    learned(np.mean(plain.predict(X) == labels), above=0.9, what="plain")  # separable
    # b211f06: 0.0, every label swapped
    learned(np.mean(ordered.predict(X) == labels), above=0.9, what="classes in another order")
    # the known answer: classes=["b", "a"] codes "b" as 0 and "a" as 1, as a fit without
    # classes codes the labels with the names swapped; same seed, same codes, same fit
    swapped = np.where(labels == "a", "b", "a")
    reference = PARSFineTuner(**params).fit(X, swapped)
    proba = ordered.predict_proba(X)  # columns in the order of classes: "b", then "a"
    np.testing.assert_array_equal(proba, reference.predict_proba(X))
    np.testing.assert_array_equal(
        ordered.predict(X), np.where(reference.predict(X) == "a", "b", "a")
    )
    assert ordered.score(X, labels) == reference.score(X, swapped)
    # columns in the wrong order would give these below 0.5
    learned(proba[labels == "b", 0].mean(), above=0.65, what="probability of 'b' given b")
    learned(proba[labels == "a", 1].mean(), above=0.65, what="probability of 'a' given a")
    clf = PARSClassifier(_encoder(SEED), PARSFineTuner(classes=["b", "a"], **head), sfreq=SFREQ)
    clf.fit(X, labels)
    assert list(clf.classes_) == ["b", "a"]
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[clf.predict_proba(X).argmax(1)])


# -- nested names ---------------------------------------------------------------------------
def test_unknown_nested_names_are_refused_at_once_naming_the_valid_ones():
    clf = PARSClassifier(PARSPretrainer(), PARSProbe())
    with pytest.raises(ValueError, match=r"Invalid parameter 'foo' for estimator PARSPretrain"):
        clf.set_params(encoder__foo=1)
    with pytest.raises(ValueError, match=r"Valid parameters are: \[.*'depth'.*'steps'"):
        clf.set_params(encoder__foo=1)
    with pytest.raises(ValueError, match=r"Invalid parameter 'bar' for estimator PARSProbe.*'C'"):
        clf.set_params(head__bar=1)
    with pytest.raises(ValueError, match=r"Invalid parameter 'baz' for estimator PARSClass"):
        clf.set_params(baz=1)
    with pytest.raises(ValueError, match=r"(?s)Invalid parameter 'foo' .*'strategy'"):
        PARSClassifier(head=PARSFineTuner()).set_params(head__foo=1)
    # known names reach the stage
    clf.set_params(encoder__depth=2, encoder__steps=10, head__C=3.0)
    assert (clf.encoder.depth, clf.encoder.steps, clf.head.C) == (2, 10, 3.0)
    assert clf.get_params()["encoder__depth"] == 2
    # an encoder given by name (the default) or no encoder has no parameters to set: say
    # how to give the stage; the default head is an estimator, whose parameters are set
    with pytest.raises(ValueError, match=r"'encoder__depth'.*is 'default'.*as an instance"):
        PARSClassifier().set_params(encoder__depth=2)
    with pytest.raises(ValueError, match=r"'encoder__depth'.*is 'pars-small-v2'.*as an instance"):
        PARSClassifier(encoder="pars-small-v2").set_params(encoder__depth=2)
    with pytest.raises(ValueError, match=r"'encoder__depth'.*is None.*as an instance"):
        PARSClassifier(encoder=None).set_params(encoder__depth=2)
    # the default head (None) is stored as given: its parameters are set on an instance
    with pytest.raises(ValueError, match=r"'head__C'.*is None.*head=PARSProbe\(encoder="):
        PARSClassifier().set_params(head__C=2.0)
    assert PARSClassifier(head=PARSProbe()).set_params(head__C=2.0).head.C == 2.0
    # scikit-learn's rule: nested names are for set_params, not the constructor
    with pytest.raises(TypeError, match="encoder__depth"):
        PARSClassifier(encoder__depth=2)


# -- clone, pickle, cross-validation --------------------------------------------------------
@pytest.mark.parametrize(
    "head",
    [
        pytest.param(lambda: PARSProbe(), id="probe"),
        pytest.param(lambda: PARSFineTuner(**{**HEAD, "max_epochs": 3}), id="finetuner"),
    ],
)
def test_clone_pickle_and_cross_validation_equal_the_loop_by_hand(head):
    X, y, groups = _rhythm()
    clf = PARSClassifier(_encoder(), head(), sfreq=SFREQ, random_state=0, verbose=0)
    fitted = clone(clf).fit(X, y)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    fresh = clone(fitted)
    with pytest.raises(NotFittedError):
        check_is_fitted(fresh)
    assert (
        fresh.get_params()["head"].get_params()["random_state"]
        == (clf.get_params()["head"].get_params()["random_state"])
    )
    scores = cross_val_score(clf, X, y, groups=groups, cv=LeaveOneGroupOut())
    by_hand = []
    for g in np.unique(groups):
        train, test = groups != g, groups == g
        torch.manual_seed(int(g) + 100)  # the global state must not matter
        by_hand.append(clone(clf).fit(X[train], y[train]).score(X[test], y[test]))
    np.testing.assert_allclose(scores, by_hand)


# -- groups reaching fit --------------------------------------------------------------------
def test_groups_reach_fit_or_a_warning_says_how():
    X, y, groups = scaled_subjects((1.0, 3.0, 10.0), n=16)
    probe = PARSProbe(align="groups", sfreq=100)
    cv = LeaveOneGroupOut()
    with pytest.warns(UserWarning, match=r"fit has no groups.*'groups'"):
        unaligned = cross_val_score(probe, X, y, groups=groups, cv=cv)
    aligned = cross_val_score(probe, X, y, groups=groups, cv=cv, params={"groups": groups})
    by_hand = []
    for g in np.unique(groups):
        train, test = groups != g, groups == g
        fitted = clone(probe).fit(X[train], y[train], groups=groups[train])
        by_hand.append(fitted.score(X[test], y[test]))  # the test subject: one group
    np.testing.assert_allclose(aligned, by_hand)
    assert not np.allclose(aligned, unaligned)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the groups given: no warning
        cross_val_score(probe, X, y, groups=groups, cv=cv, params={"groups": groups})


# -- units ----------------------------------------------------------------------------------
def test_windows_in_another_unit_at_predict_warn_naming_the_factor():
    X, y, groups = _rhythm(n=24)
    windows = _windows(X, y, groups)
    probe = PARSProbe().fit(windows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the same windows: no warning
        same = probe.predict(windows)
    with pytest.warns(UserWarning, match=r"1e\+06 times the amplitude"):
        probe.predict(_windows(X, y, groups, scale=1e6))
    with pytest.warns(UserWarning, match=r"1e-06 times the amplitude"):
        probe.predict(X * 1e-6)
    assert same.shape == (24,)


# -- an interrupted fit ---------------------------------------------------------------------
def _interrupt_pretraining(monkeypatch, at=1):
    from braindecode_pars.pretraining.net import PretrainNet

    original = PretrainNet.get_default_callbacks

    def with_interrupt(self):
        return original(self) + [("interrupt", InterruptAt(at))]

    monkeypatch.setattr(PretrainNet, "get_default_callbacks", with_interrupt)


def test_an_interrupted_fit_says_how_to_keep_pretraining_and_leaves_the_estimator_unfitted(
    monkeypatch, tmp_path
):
    X, y, _ = _rhythm()
    pretrainer = PARSPretrainer(**TINY, n_patches=2, pos_mask_ratio=1.0, max_epochs=3, verbose=0)
    clf = PARSClassifier(pretrainer, PARSProbe(), sfreq=SFREQ, random_state=0, verbose=0)
    clf.fit(X, y)  # fitted once: the interrupted refit must not leave that fit behind
    check_is_fitted(clf)
    _interrupt_pretraining(monkeypatch)
    with pytest.raises(KeyboardInterrupt, match="set checkpoint_dir to keep finished epochs"):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    # with a checkpoint_dir, the message says where the epochs are and how to resume
    clf.set_params(encoder__checkpoint_dir=tmp_path)
    with pytest.raises(KeyboardInterrupt, match=rf"saved in '{tmp_path}.*resume"):
        clf.fit(X, y)
    assert (tmp_path / "pretrain").is_dir()
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


def test_an_interrupted_head_leaves_the_classifier_unfitted():
    X, y, _ = _rhythm()
    head = PARSFineTuner(**{**HEAD, "max_epochs": 5}, callbacks=[InterruptAt(2)])
    clf = PARSClassifier(_encoder(), head, sfreq=SFREQ)
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


def test_each_stage_says_what_its_own_verbose_asks(capfd):
    """The classifier's ``verbose`` is its own (the package's messages during ``fit``);
    each stage's ``verbose`` is the stage's and is never changed: quiet stages under a
    quiet classifier write nothing, a stage left at ``verbose=1`` writes its progress."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((16, 2, 100)), np.repeat([0, 1], 8)
    quiet = dict(
        encoder=PARSPretrainer(**TINY, steps=2, window_seconds=2.0, random_state=0, verbose=0),
        head=PARSFineTuner(max_epochs=1, random_state=0, verbose=0),
        sfreq=SFREQ,
    )
    PARSClassifier(**quiet, verbose=0).fit(X, y)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    head = PARSFineTuner(max_epochs=1, random_state=0, verbose=1)  # its table asked for
    fitted = PARSClassifier(**{**quiet, "head": head}, verbose=0).fit(X, y)
    out, err = capfd.readouterr()
    assert "epoch" in (out + err).lower()
    assert head.verbose == 1 and fitted.head_.verbose == 1


# -- the head contract (issue 46) ---------------------------------------------------------
class _MeanPowerHead(ClassifierMixin, BaseEstimator):
    """A head a user writes: an ``encoder`` parameter, ``fit(X, y)`` and an optional
    ``groups``; it records what it was given and classifies by each window's log
    power against the midpoint of the two classes' means."""

    def __init__(self, encoder=None, offset=0.0):
        self.encoder = encoder
        self.offset = offset

    def fit(self, X, y, groups=None):
        self.seen_ = dict(X=X, y=y, groups=groups)
        power = np.log(np.mean(np.asarray(X) ** 2, axis=(1, 2)))
        self.classes_ = np.unique(y)
        means = [power[y == c].mean() for c in self.classes_]
        self.threshold_ = np.mean(means) + self.offset
        self.high_ = int(np.argmax(means))
        return self

    def predict_proba(self, X):
        power = np.log(np.mean(np.asarray(X) ** 2, axis=(1, 2)))
        high = (power > self.threshold_).astype(float)
        proba = np.stack([1 - high, high], axis=1)
        return proba if self.high_ == 1 else proba[:, ::-1]

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


class _NoGroupsHead(_MeanPowerHead):
    def fit(self, X, y):
        return super().fit(X, y)


def _power_task(n=48, seed=0):
    rng = np.random.default_rng(seed)
    y = np.tile(["rest", "task"], n // 2)
    X = rng.standard_normal((n, 2, 100)) * np.where(y == "task", 2.0, 1.0)[:, None, None]
    return X, y, np.repeat(np.arange(4), n // 4)


def test_a_head_a_user_writes_gets_arrays_labels_and_requested_groups():
    import sklearn

    X, y, groups = _power_task()
    clf = PARSClassifier(head=_MeanPowerHead(), sfreq=50, verbose=0).fit(X, y, groups=groups)
    seen = clf.head_.seen_
    assert isinstance(seen["X"], np.ndarray) and seen["X"].shape == (48, 2, 100)
    np.testing.assert_array_equal(seen["y"], y)
    # without metadata routing: its fit takes 'groups' by name, so it gets them
    np.testing.assert_array_equal(seen["groups"], groups)
    # the head's own encoder (None) is honoured: no encoder
    assert clf.score(X, y) == 1.0 and clf.head_.encoder is clf.encoder_ is None
    # an encoder given to the classifier reaches the head loaded
    clf = PARSClassifier("pars-small-v2", _MeanPowerHead(), sfreq=50, verbose=0).fit(X, y)
    assert clf.head_.encoder is clf.encoder_ and clf.encoder_.emb_dim == 64
    with pytest.raises(TypeError, match="'X_valid', which no stage's fit takes"):
        PARSClassifier(head=_MeanPowerHead(), sfreq=50).fit(X, y, X_valid=X)
    # a head whose fit takes no groups: the classifier keeps them to itself
    clf = PARSClassifier(head=_NoGroupsHead(), sfreq=50, verbose=0).fit(X, y, groups=groups)
    assert clf.score(X, y) == 1.0
    with sklearn.config_context(enable_metadata_routing=True):
        requested = _MeanPowerHead().set_fit_request(groups=True)
        clf = PARSClassifier(head=requested, sfreq=50, verbose=0).fit(X, y, groups=groups)
        np.testing.assert_array_equal(clf.head_.seen_["groups"], groups)
        unrequested = _MeanPowerHead().set_fit_request(groups=False)
        clf = PARSClassifier(head=unrequested, sfreq=50, verbose=0).fit(X, y)
        assert clf.head_.seen_["groups"] is None
        clf.fit(X, y, groups=groups)  # the classifier reads them; the head declined them
        assert clf.head_.seen_["groups"] is None
        # and in cross-validation, routed by scikit-learn itself
        scores = cross_val_score(
            PARSClassifier(head=requested, sfreq=50, verbose=0), X, y,
            cv=LeaveOneGroupOut(), params={"groups": groups}, scoring="balanced_accuracy",
        )  # fmt: skip
        assert scores.min() == 1.0


def test_the_default_head_is_an_estimator_a_search_reaches():
    from sklearn.model_selection import GridSearchCV

    X, y, groups = _power_task(seed=SEED)
    clf = PARSClassifier(sfreq=50, verbose=0)
    assert clf.head is None and "head__C" not in clf.get_params()  # stored as given
    fitted = clf.fit(X, y)  # the default head: the probe over pars-small-v2
    assert isinstance(fitted.head_, PARSProbe) and fitted.head_.C == 3.0
    assert "encoder" in fitted.head_.block_weights_ and clf.head is None  # it was offered
    assert fitted.head_.encoder is fitted.encoder_ and fitted.encoder_.emb_dim == 64
    # the same model given as an instance: a search reaches its parameters
    clf = PARSClassifier(head=PARSProbe("pars-small-v2"), sfreq=50, verbose=0)
    assert clf.get_params()["head__C"] == 3.0 and clone(clf).head is not clf.head
    search = GridSearchCV(
        clf, {"head__C": [0.01, 1.0]}, scoring="balanced_accuracy", cv=LeaveOneGroupOut()
    ).fit(X, y, groups=groups)
    assert search.best_params_["head__C"] in (0.01, 1.0)
    learned(search.best_score_, above=0.8, what="the search's best")
    assert search.best_estimator_.encoder_.emb_dim == 64
    assert not hasattr(clf.head, "model_")  # the given head is cloned, never fitted


def test_the_stages_parameters_are_left_alone():
    X, y, groups = _power_task()
    head = PARSProbe(random_state=3)
    clf = PARSClassifier(head=head, sfreq=50, random_state=0, verbose=0).fit(X, y)
    assert clf.head_.random_state == 3 and head.random_state == 3
    clf = PARSClassifier(head=PARSProbe(), sfreq=50, random_state=5, verbose=0).fit(X, y)
    assert clf.head_.random_state == 5  # only where the stage's own is None
    assert clf.head.random_state is None and clf.head.sfreq is None
    assert clf.head_.sfreq == 50  # the windows' rate, as the contract says


# -- issue 57: the head's encoder, heads with predict only, names and groups at once ----------
class _LoudnessHead(BaseEstimator):
    """A head as a user may write one: ``fit`` and ``predict`` only (no
    ``predict_proba``, no ``score``, no ``encoder``): the louder windows are the second
    class."""

    def __init__(self, quantile=0.5):
        self.quantile = quantile

    def fit(self, X, y):
        power = np.mean(np.asarray(X) ** 2, axis=(1, 2))
        self.classes_ = np.unique(y)
        self.threshold_ = np.quantile(power, self.quantile)
        return self

    def predict(self, X):
        power = np.mean(np.asarray(X) ** 2, axis=(1, 2))
        return self.classes_[(power > self.threshold_).astype(int)]


def test_a_head_with_fit_and_predict_only_fits_predicts_and_scores():
    X, y, groups = _power_task(seed=SEED)
    clf = PARSClassifier(head=_LoudnessHead(), sfreq=50, verbose=0).fit(X, y)
    assert clf.encoder_ is None  # the head takes no encoder, so none is loaded
    # against the rule written out: the louder half of the windows is "task"
    power = np.mean(X**2, axis=(1, 2))
    expected = np.where(power > np.quantile(power.astype(np.float32), 0.5), "task", "rest")
    np.testing.assert_array_equal(clf.predict(X), expected)
    assert clf.score(X, y) == np.mean(expected == y)
    learned(clf.score(X, y), above=0.9, what="the louder half")
    weights = np.where(y == "task", 3.0, 1.0)
    assert clf.score(X, y, sample_weight=weights) == pytest.approx(
        np.average(expected == y, weights=weights)
    )
    with pytest.raises(AttributeError, match="predict_proba"):
        clf.predict_proba(X)  # what the head does not have
    # an encoder given for a head that cannot take it is refused, naming 'encoder'
    with pytest.raises(ValueError, match="'head' \\(_LoudnessHead\\) has no 'encoder' param"):
        PARSClassifier("pars-small-v2", _LoudnessHead(), sfreq=50).fit(X, y)


def test_the_head_s_own_encoder_is_honoured_directly_and_in_a_grid():
    X, y, groups = _power_task()
    # directly: the head's encoder=None is no encoder, not the default head's pars-small-v2
    clf = PARSClassifier(head=PARSProbe(encoder=None), sfreq=50, verbose=0).fit(X, y)
    assert clf.encoder_ is None and clf.head_.encoder is None
    assert set(clf.head_.block_weights_) == {"bandpower", "tangentspace"}
    clf = PARSClassifier(head=PARSProbe(encoder="pars-small-v2"), sfreq=50, verbose=0)
    clf.fit(X, y)
    assert clf.encoder_.emb_dim == 64 and clf.head_.encoder is clf.encoder_
    assert "encoder" in clf.head_.block_weights_  # offered (admitted or not by the folds)
    # in a grid over head__encoder: each candidate fits its own encoder, so the scores
    # differ (had the classifier replaced it, both would be the same model)
    search = GridSearchCV(  # every block's equal say: the encoder's block always fitted
        PARSClassifier(head=PARSProbe(block_weights=None), sfreq=50, verbose=0),
        {"head__encoder": [None, "pars-small-v2"]},
        scoring="neg_log_loss", cv=LeaveOneGroupOut(), error_score="raise",
    ).fit(X, y, groups=groups)  # fmt: skip
    first, second = search.cv_results_["split0_test_score"]
    assert abs(first - second) > 1e-6
    expected = [cross_val_score(
        PARSProbe(encoder=e, block_weights=None, sfreq=50), X, y, groups=groups,
        cv=LeaveOneGroupOut(),
        scoring="neg_log_loss") for e in (None, "pars-small-v2")]  # fmt: skip
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], np.mean(expected, 1))
    # the encoder given twice, the classifier's and the head's: refused naming 'encoder'
    for clf in (
        PARSClassifier("pars-small-v2", PARSProbe(encoder="pars-small"), sfreq=50),
        PARSClassifier(None, PARSProbe(encoder="pars-small"), sfreq=50),
        PARSClassifier(_encoder(), PARSFineTuner(encoder="pars-small"), sfreq=50),
    ):
        with pytest.raises(ValueError, match="head's own 'encoder'.*Give the encoder once"):
            clf.fit(X, y)
    with pytest.raises(ValueError, match="head's own 'encoder'"):
        GridSearchCV(
            PARSClassifier("pars-small-v2", PARSProbe(), sfreq=50, verbose=0),
            {"head__encoder": ["pars-small"]}, cv=LeaveOneGroupOut(), error_score="raise",
        ).fit(X, y, groups=groups)  # fmt: skip


def test_a_mistyped_fine_tuner_name_is_refused_before_pretraining():
    import time

    X, y, _ = _power_task()
    # 3,000 pretraining steps would take minutes: the name is refused before any of them
    clf = PARSClassifier(
        encoder=PARSPretrainer(steps=3000), head=PARSFineTuner(pretrain__lr=5), sfreq=50
    )
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"unexpected argument\(s\) pretrain__lr.*optimizer__"):
        clf.fit(X, y)
    assert time.perf_counter() - start < 1.0
    # skorch's misspelt prefix, and a name set later, are refused the same way
    with pytest.raises(ValueError, match="did you mean iterator_train__shuffle"):
        PARSFineTuner(iterator_train_shuffle=True).check_params()
    with pytest.raises(ValueError, match="optimizer_lr"):
        PARSFineTuner().set_params(optimizer_lr=1.0).check_params()
    PARSFineTuner(optimizer__betas=(0.9, 0.99), module__n_heads=2).check_params()  # known


@pytest.mark.parametrize("routing", [False, True], ids=["routing off", "routing on"])
def test_groups_reach_a_fine_tuner_head_with_and_without_routing(routing):
    import sklearn
    from sklearn.utils.metadata_routing import get_routing_for_object

    for stage in (PARSFineTuner(), PARSPretrainer()):  # requested, as the probe does
        assert get_routing_for_object(stage).consumes("fit", ["groups"]) == {"groups"}
    X, y, groups = _rhythm(n=36, n_subjects=6)
    head = PARSFineTuner(min_valid_groups=3, max_epochs=1, batch_size=16, verbose=0)
    with sklearn.config_context(enable_metadata_routing=routing):
        clf = PARSClassifier(None, head, sfreq=SFREQ, verbose=0).fit(X, y, groups=groups)
        assert clf.head_.validation_ == "groups" and "valid_loss" in clf.head_.history_[-1]
        # the windows' own subjects reach it too
        clf = PARSClassifier(None, head, verbose=0).fit(_windows(X, y, groups))
        assert clf.head_.validation_ == "groups"
        # and an encoder stage takes them
        stage = PARSPretrainer(**TINY, n_patches=2, max_epochs=1, batch_size=16, verbose=0)
        clf = PARSClassifier(stage, head, sfreq=SFREQ, verbose=0).fit(X, y, groups=groups)
        assert clf.head_.validation_ == "groups" and clf.pretrain_history_ is not None

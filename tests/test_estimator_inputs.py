"""What braindecode, skorch and scikit-learn users meet first with PARSClassifier."""

import functools

import numpy as np
import pytest
import sklearn
import torch
from braindecode.datasets import BaseConcatDataset
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    LeaveOneGroupOut,
    PredefinedSplit,
    cross_val_score,
    cross_validate,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from skorch.helper import SliceDataset
from torch.utils.data import Subset

import braindecode_pars
from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe, PatchEncoder
from braindecode_pars.datasets.bundled import BUNDLED_SUBJECTS, load_bundled_eegmat
from braindecode_pars.io.estimator_inputs import read_input
from braindecode_pars.io.windows import read_windows
from braindecode_pars.metrics import GroupScorer, group_cross_val_score, make_scorer

from ._helpers import (
    ExplodingPretrainer,
    bundled_mi,
    loso_scores_on_arrays,
    saved_small_encoder,
    slice_cv_scores,
)
from .conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")


def fast(pretrainer=PARSPretrainer, **params):
    """Tiny settings for the bundled EEG (90 windows, 64 channels, 4 s at 200 Hz), on the
    neural path: one pretraining epoch of batch 128, one frozen fine-tuning epoch of batch
    32, seeded and quiet; ``params`` by nested names."""
    clf = PARSClassifier(
        pretrainer(**SMALL_ENCODER, n_patches=4, max_epochs=1, batch_size=128, verbose=0),
        PARSFineTuner(strategy="frozen", max_epochs=1, batch_size=32, verbose=0),
        random_state=0,
        verbose=0,
    )
    return clf.set_params(**params)


@pytest.fixture(scope="module")
def mi():
    """The bundled windows and their blocks (3 groups of 30 windows)."""
    windows, *_, blocks = bundled_mi()
    return windows, blocks


def _toy(n=24, n_chans=2, n_times=100, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, n_chans, n_times)).astype(np.float32), np.repeat([0, 1], n // 2)


class _Untouchable:
    """Data that fails the test when read."""

    def _read(self, *args, **kwargs):
        raise AssertionError("the data was read before the parameters were checked")

    __len__ = __getitem__ = __array__ = __iter__ = _read


# -- braindecode windows through scikit-learn's model selection ---------------------------
@pytest.fixture(scope="module")
def by_arrays(mi):
    """The known answer: leave-one-block-out scores of the same data as arrays."""
    windows, blocks = mi
    data = read_windows(windows)
    clf = fast(sfreq=200)
    return cross_val_score(clf, data.X, data.y, groups=blocks, cv=LeaveOneGroupOut())


@pytest.mark.parametrize("with_y", [pytest.param(True, id="y"), pytest.param(False, id="no-y")])
def test_cross_val_score_on_windows_as_written(mi, by_arrays, with_y):
    windows, blocks = mi
    y = windows.get_metadata()["target"].to_numpy() if with_y else None
    clf = fast(sfreq=200)  # split windows carry no sampling rate
    scores = cross_val_score(
        clf, windows, y, groups=blocks, cv=LeaveOneGroupOut(), error_score="raise"
    )
    np.testing.assert_allclose(scores, by_arrays)  # the same fits as on arrays


def test_split_windows_without_sfreq_say_what_happened_and_the_one_line_fix(mi):
    windows, blocks = mi
    with pytest.raises(
        ValueError,
        match=r"'X' is a list of 60 window items \(x, y, inds\), which carry no sampling "
        r"rate: scikit-learn's cross-validation .* X = skorch.helper.SliceDataset\(windows\)",
    ) as raised:
        cross_val_score(
            fast(ExplodingPretrainer),
            windows,
            groups=blocks,
            cv=LeaveOneGroupOut(),
            error_score="raise",
        )
    assert "pass the braindecode windows" not in str(raised.value)


# -- over subjects, as the README writes it: the bundled EEGMAT windows of 4 subjects ----
@pytest.fixture(scope="module")
def eegmat_windows():
    """Four subjects of the bundled EEGMAT windows (10 s, 19 channels, 100 Hz), rest (0)
    and mental arithmetic (1) in each."""
    return load_bundled_eegmat(subjects=list(BUNDLED_SUBJECTS[:4]))


def test_cross_val_score_over_subjects_on_windows_as_the_readme_writes_it(eegmat_windows):
    windows = eegmat_windows
    X, meta = SliceDataset(windows), windows.get_metadata()
    y, subjects = meta["target"], meta["subject"]
    scores = cross_val_score(
        PARSProbe(), X, y, groups=subjects, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    expected = loso_scores_on_arrays(windows)  # the known answer: the same fits on arrays
    assert scores.shape == (4,) and np.isfinite(scores).all()
    np.testing.assert_allclose(scores, expected)


def test_cross_validate_and_grid_search_over_subjects_on_windows(eegmat_windows):
    windows = eegmat_windows
    X, meta = SliceDataset(windows), windows.get_metadata()
    y, subjects = meta["target"].to_numpy(), meta["subject"].to_numpy()
    data = read_windows(windows)
    common = dict(cv=GroupKFold(2), scoring="balanced_accuracy", error_score="raise")
    # every block at equal say: the default's inner folds read the subjects the windows
    # carry, which arrays without routed groups do not (loso_scores_on_arrays passes them)
    probe = functools.partial(PARSProbe, block_weights=None)
    expected = cross_validate(probe(sfreq=100), data.X, data.y, groups=subjects, **common)
    result = cross_validate(probe(), X, y, groups=subjects, **common)
    np.testing.assert_allclose(result["test_score"], expected["test_score"])
    # no labels given: fit and the package's scorer read the windows'
    scorer = make_scorer("balanced_accuracy")
    result = cross_validate(probe(), X, groups=subjects, cv=GroupKFold(2), scoring=scorer)
    np.testing.assert_allclose(result["test_score"], expected["test_score"])
    grid = GridSearchCV(probe(), {"C": [0.01, 1.0]}, **common).fit(X, y, groups=subjects)
    on_arrays = GridSearchCV(probe(sfreq=100), {"C": [0.01, 1.0]}, **common)
    on_arrays.fit(data.X, y, groups=subjects)
    np.testing.assert_allclose(
        grid.cv_results_["mean_test_score"], on_arrays.cv_results_["mean_test_score"]
    )
    assert grid.best_estimator_.sfreq_ == 100  # refitted on the windows, at their rate


def _labelled_by_subject(windows):
    """The windows with a label of each subject, as patient vs control: 0, 1, 0, 1... in
    the order of the subjects."""
    order = sorted({int(ds.description["subject"]) for ds in windows.datasets})
    for ds in windows.datasets:
        label = order.index(int(ds.description["subject"])) % 2
        ds.metadata["target"] = ds.description["target"] = label
        ds.y = [label] * len(ds.metadata)
    return windows


def test_group_scorer_reads_labels_and_subjects_of_windows():
    windows = _labelled_by_subject(load_bundled_eegmat(subjects=list(BUNDLED_SUBJECTS[:4])))
    X, meta = SliceDataset(windows), windows.get_metadata()
    y, subjects = meta["target"].to_numpy(), meta["subject"].to_numpy()
    assert sorted(set(zip(subjects, y, strict=True)))[0][1] in (0, 1)
    clf = PARSProbe().fit(X)
    expected = GroupScorer()(clf, read_windows(windows).X, y, groups=subjects)
    assert GroupScorer()(clf, X, None) == expected  # both read from the windows' metadata
    assert GroupScorer()(clf, X, SliceDataset(windows, idx=1)) == expected
    # two folds, each testing one subject of each label
    folds = PredefinedSplit(np.searchsorted(np.unique(subjects), subjects) // 2)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = cross_val_score(
            PARSProbe(), X, cv=folds, scoring=GroupScorer(), params={"groups": subjects}
        )
        given = cross_val_score(
            PARSProbe(), X, y, cv=folds, scoring=GroupScorer(), params={"groups": subjects}
        )
    assert routed.shape == (2,)
    np.testing.assert_allclose(routed, given)
    # in one call, the groups and labels read from the windows
    np.testing.assert_allclose(group_cross_val_score(PARSProbe(), X, cv=folds), routed)
    with pytest.raises(ValueError, match="'y_true' is None and 'X' carries no labels"):
        GroupScorer()(clf, read_windows(windows).X, None, groups=subjects)


@pytest.mark.parametrize("with_y", [pytest.param(True, id="y"), pytest.param(False, id="no-y")])
def test_cross_val_score_on_a_skorch_slice_dataset(mi, by_arrays, with_y):
    windows, blocks = mi
    y = SliceDataset(windows, idx=1) if with_y else None
    scores = cross_val_score(
        fast(),  # no sfreq: the SliceDataset keeps the windows' own
        SliceDataset(windows),
        y,
        groups=blocks,
        cv=LeaveOneGroupOut(),
        error_score="raise",
    )
    np.testing.assert_allclose(scores, by_arrays)


def test_cross_val_score_with_a_scorer_takes_labels_from_a_slice_dataset(mi, by_arrays):
    windows, blocks = mi
    data = read_windows(windows)
    clf = fast(sfreq=200)
    expected = cross_val_score(
        clf, data.X, data.y, groups=blocks, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    scores = slice_cv_scores(fast(), windows, blocks, error_score="raise")
    np.testing.assert_allclose(scores, expected)


@pytest.mark.parametrize(
    "wrap, sfreq",
    [pytest.param(None, 200, id="windows"), pytest.param(SliceDataset, None, id="slice-dataset")],
)
def test_grid_search_over_the_heads_max_epochs_on_windows(mi, wrap, sfreq):
    windows, blocks = mi
    starts = np.concatenate([[0], windows.cumulative_sizes[:-1]])
    two_blocks = BaseConcatDataset(  # two groups keep it quick: 2 x 2 fits and a refit
        [ds for ds, start in zip(windows.datasets, starts, strict=True) if blocks[start] != 3]
    )
    grid = GridSearchCV(
        fast(encoder__max_epochs=0, sfreq=sfreq),
        {"head__max_epochs": [1, 2]},
        cv=LeaveOneGroupOut(),
        error_score="raise",
    )
    X = two_blocks if wrap is None else wrap(two_blocks)
    groups = two_blocks.get_metadata()["block"].to_numpy()
    grid.fit(X, groups=groups)
    for i, params in enumerate(grid.cv_results_["params"]):  # each candidate, by hand
        by_hand = cross_val_score(
            clone(grid.estimator).set_params(**params), X, groups=groups, cv=LeaveOneGroupOut()
        )
        assert grid.cv_results_["mean_test_score"][i] == pytest.approx(by_hand.mean())
    assert grid.best_estimator_.sfreq_ == 200
    assert grid.predict(windows).shape == (len(windows),)
    assert 0 <= grid.score(windows) <= 1


def test_cross_validate_a_pipeline_on_windows(mi, by_arrays):
    windows, blocks = mi
    pipe = make_pipeline(FunctionTransformer(), fast(sfreq=200))
    result = cross_validate(
        pipe, windows, groups=blocks, cv=LeaveOneGroupOut(), error_score="raise"
    )
    np.testing.assert_allclose(result["test_score"], by_arrays)


def test_a_subset_of_windows_is_read_lazily_with_its_labels_and_sampling_rate(mi):
    windows, blocks = mi
    train = Subset(windows, np.flatnonzero(blocks != 3))
    test = Subset(windows, np.flatnonzero(blocks == 3))
    clf = fast().fit(train)
    assert clf.sfreq_ == 200 and (clf.n_chans_, clf.n_times_) == (64, 800)
    assert list(clf.classes_) == [0, 1, 2, 3]
    assert clf.predict(test).shape == (30,)
    targets = windows.get_metadata()["target"].to_numpy()[blocks == 3]
    assert clf.score(test) == pytest.approx(np.mean(clf.predict(test) == targets))


def test_labels_of_split_windows_are_the_windows_targets(mi):
    windows, _ = mi
    X, y = read_windows(windows).X, read_windows(windows).y
    items = [windows[i] for i in range(0, len(windows), 2)]  # as scikit-learn splits them
    data = read_input(items, sfreq=200)  # as every estimator reads X
    np.testing.assert_array_equal(data.y, y[::2])
    np.testing.assert_array_equal(data.X[3], X[6])
    assert data.sfreq == 200 and data.shape == (64, 800)
    sliced = SliceDataset(windows, indices=np.arange(0, len(windows), 2))
    data = read_input(sliced)
    np.testing.assert_array_equal(data.y, y[::2])
    assert data.sfreq == 200


def test_windows_checks_read_each_window_once_through_the_public_api(mi, monkeypatch):
    windows, _ = mi
    calls = []
    for ds in windows.datasets:  # braindecode's __getitem__ cuts a window with raw._getitem
        read = ds.raw._getitem
        monkeypatch.setattr(
            ds.raw, "_getitem", lambda *a, _read=read, **k: calls.append(1) or _read(*a, **k)
        )
    with pytest.raises(AssertionError, match="training started"):
        fast(ExplodingPretrainer).fit(windows)
    assert len(calls) == len(windows)  # every window cut once, for reading and checks


def test_predict_refuses_windows_at_another_sampling_rate(mi):
    windows, _ = mi
    X, y = read_windows(windows).X, read_windows(windows).y
    clf = PARSClassifier(PatchEncoder(sfreq=100, **SMALL_ENCODER), PARSProbe(), sfreq=100).fit(X, y)
    with pytest.raises(ValueError, match=r"'sfreq'=100.0 differs from .* windows \(200.0 Hz"):
        clf.predict(windows)
    with pytest.raises(ValueError, match=r"sampled at 200.0 Hz, but the estimator was fitted"):
        clf.head_.predict(windows)  # a stage alone says it in its own words


def test_slice_dataset_of_labels_as_X_is_refused(mi):
    windows, _ = mi
    with pytest.raises(ValueError, match=r"'X' is a SliceDataset of item 1 .* idx=0"):
        fast(ExplodingPretrainer).fit(SliceDataset(windows, idx=1))


def test_window_items_serve_as_unlabelled_pretraining_data():
    X, y = _toy()
    extra = [(x, -1, None) for x in _toy(n=6, seed=1)[0]]  # unlabelled window items
    clf = fast(sfreq=50).fit(X, y, X_unlabeled=extra)
    assert len(clf.pretrain_history_) == 1


# -- the package's names ---------------------------------------------------------------------
def test_every_public_model_net_and_estimator_is_exported():
    from braindecode_pars import MAE, MP3, DropPos  # noqa: F401
    from braindecode_pars.models.pretext import PRETEXT_MODELS

    expected = {
        "MultiChannelClassifier",
        "PatchEncoder",
        "PARS",
        "MAE",
        "MP3",
        "DropPos",
        "PretrainNet",
        "PARSClassifier",
        "PARSPretrainer",
        "PARSProbe",
        "PARSFineTuner",
        "load_encoder",
        "save_encoder",
    }
    assert expected <= set(braindecode_pars.__all__)
    assert {cls.__name__ for cls in PRETEXT_MODELS.values()} <= set(braindecode_pars.__all__)
    for name in braindecode_pars.__all__:
        assert getattr(braindecode_pars, name) is not None


# -- errors users meet -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "estimator", [PARSClassifier, PARSProbe, PARSFineTuner], ids=lambda c: c.__name__
)
@pytest.mark.parametrize(
    "method", [pytest.param(m, id=m) for m in ("predict", "predict_proba", "score")]
)
def test_using_an_unfitted_classifier_raises_not_fitted(estimator, method):
    X, y = _toy()
    args = (X, y) if method == "score" else (X,)
    with pytest.raises(NotFittedError, match=f"{estimator.__name__} instance is not"):
        getattr(estimator(sfreq=50), method)(*args)


def test_using_an_unfitted_pretrainer_raises_not_fitted():
    with pytest.raises(NotFittedError, match="PARSPretrainer instance is not fitted yet"):
        PARSPretrainer(sfreq=50).transform(_toy()[0])


def _truncated(path):
    saved_small_encoder(path, 50)
    path.write_bytes(path.read_bytes()[:200])


#: Every estimator that takes an encoder, given one by ``encoder=``.
TAKE_AN_ENCODER = [
    pytest.param(lambda e: PARSClassifier(e, sfreq=50), id="classifier"),
    pytest.param(lambda e: PARSProbe(e, sfreq=50), id="probe"),
    pytest.param(lambda e: PARSFineTuner(encoder=e, sfreq=50), id="finetuner"),
]


@pytest.mark.parametrize("make", TAKE_AN_ENCODER)
@pytest.mark.parametrize(
    "write",
    [
        pytest.param(_truncated, id="truncated"),
        pytest.param(lambda p: p.write_text("not an encoder\n"), id="text"),
        pytest.param(lambda p: torch.save([1, 2, 3], p), id="list"),
        pytest.param(lambda p: torch.save({"weights": torch.zeros(2)}, p), id="dict"),
    ],
)
def test_a_file_that_is_not_a_saved_encoder_is_refused_before_the_data_is_read(
    tmp_path, write, make
):
    path = tmp_path / "enc.pt"
    write(path)
    with pytest.raises(
        ValueError,
        match=r"'encoder': '.*enc\.pt' is not an encoder saved by "
        r"braindecode_pars\.save_encoder \(\w+",
    ):
        make(path).fit(_Untouchable())


@pytest.mark.parametrize("make", TAKE_AN_ENCODER)
@pytest.mark.parametrize(
    "value, error, match",
    [
        pytest.param("missing.pt", FileNotFoundError, "'encoder': there is no file", id="missing"),
        pytest.param(3, TypeError, r"'encoder' must be .* but got int \(3\)", id="int"),
    ],
)
def test_a_missing_or_mistyped_encoder_is_refused(tmp_path, value, error, match, make):
    value = tmp_path / value if isinstance(value, str) else value
    with pytest.raises(error, match=match):
        make(value).fit(_Untouchable())


@pytest.mark.parametrize(
    "stage",
    [
        "encoder",
        "head",
    ],
)
def test_cuda_without_a_gpu_is_refused_before_the_data_is_read(monkeypatch, stage):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    clf = fast(ExplodingPretrainer, sfreq=50)
    with pytest.raises(
        ValueError, match=r"Invalid value for 'device': 'cuda' but torch sees no GPU"
    ):
        clone(clf).set_params(**{f"{stage}__device": "cuda"}).fit(_Untouchable())
    with pytest.raises(ValueError, match=r"Invalid value for 'device': 'gpu' is not a torch"):
        clone(clf).set_params(**{f"{stage}__device": "gpu"}).fit(_Untouchable())


@pytest.mark.parametrize(
    "params, unlabeled, match",
    [
        pytest.param(
            {},
            np.zeros((4, 2, 60), np.float32),
            r"'X_unlabeled' holds windows of 60 samples, shorter than the pretraining "
            r"windows \(100 samples",
            id="short-unlabeled",
        ),
        pytest.param(
            {},
            [np.zeros((4, 2, 100), np.float32), np.zeros((4, 2, 80), np.float32)],
            "'X_unlabeled' holds windows of 80 samples",
            id="short-in-a-list",
        ),
        pytest.param(
            {"encoder__window_seconds": 3.0},
            None,
            r"'X' holds windows of 100 samples, shorter than the pretraining windows "
            r"\(150 samples: 'window_seconds'=3.0\)",
            id="longer-than-X",
        ),
        pytest.param(
            {"encoder__window_seconds": 0.5},
            None,
            r"'window_seconds'=0.5 gives pretraining windows of 25 samples, "
            r"not longer than one patch \(50 samples\)",
            id="shorter-than-a-patch",
        ),
        pytest.param(
            {"encoder__window_seconds": 1.0},
            None,
            r"'window_seconds'=1.0 gives pretraining windows of 50 samples, "
            r"not longer than one patch \(50 samples\): every patch would start at 0",
            id="one-patch",
        ),
        pytest.param(
            {},
            np.zeros((4, 100), np.float32),
            r"'X_unlabeled' must be windows of shape \(n_windows, n_chans, n_times\), "
            r"but got an array of shape \(4, 100\)",
            id="2d-unlabeled",
        ),
    ],
)
def test_pretraining_data_that_cannot_be_cropped_is_refused(params, unlabeled, match):
    X, y = _toy()
    with pytest.raises(ValueError, match=match):
        fast(ExplodingPretrainer, sfreq=50, **params).fit(X, y, X_unlabeled=unlabeled)


def test_unlabelled_windows_at_another_sampling_rate_are_refused(mi):
    windows, _ = mi
    X, y = _toy()
    match = r"'sfreq'=50.0 differs from the sampling rate of the 'X_unlabeled' windows \(200"
    with pytest.raises(ValueError, match=match):
        fast(ExplodingPretrainer, sfreq=50).fit(X, y, X_unlabeled=SliceDataset(windows))


# -- progress ------------------------------------------------------------------------------------
def test_progress_is_shown_by_default_and_silenced_by_verbose_0(capsys):
    assert PARSPretrainer().verbose == 1  # its plan and progress, alone
    assert PARSClassifier().verbose == 0  # scikit-learn's default, as the heads'
    assert PARSFineTuner().verbose == 0  # skorch's table of every epoch only when asked
    X, y = _toy()
    loud = dict(verbose=1, encoder__verbose=1, head__verbose=1)
    fast(sfreq=50, **loud).fit(X, y)
    out, err = capsys.readouterr()
    assert "train_loss" in out  # the fine-tuning epoch table, as skorch prints it
    assert err  # the progress bars
    fast(sfreq=50).fit(X, y)  # verbose=0 for the classifier and both stages
    assert capsys.readouterr() == ("", "")

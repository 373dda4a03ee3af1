"""PARSClassifier under MOABB's evaluations, offline: MOABB's FakeDataset, and the bundled
PhysioNet-MI subject 1 read by MOABB's PhysionetMI from files on disk (no download)."""

import logging

import numpy as np
import pytest

pytest.importorskip("moabb", reason="needs the [moabb] extra (pip install .[moabb])")

from moabb.datasets.fake import FakeDataset  # noqa: E402
from moabb.evaluations import (  # noqa: E402
    CrossSessionEvaluation,
    CrossSubjectEvaluation,
    WithinSessionEvaluation,
)
from moabb.paradigms import LeftRightImagery  # noqa: E402

from braindecode_pars import PARSClassifier, PARSPretrainer  # noqa: E402
from braindecode_pars.estimators import pretrainer as pretrainer_module  # noqa: E402
from braindecode_pars.moabb import MOABBAdapter, moabb_pipeline  # noqa: E402
from braindecode_pars.models.encoder import PatchEncoder  # noqa: E402

from .conftest import TINY  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 128.0  # FakeDataset's rate; the adapter resamples to 100 Hz


def fake(n_subjects=2, n_sessions=2, seed=0):
    return FakeDataset(
        event_list=["left_hand", "right_hand"],
        n_sessions=n_sessions,
        n_runs=1,
        n_subjects=n_subjects,
        paradigm="imagery",
        channels=("C3", "Cz", "C4"),
        sfreq=SFREQ,
        duration=60,
        n_events=20,
        seed=seed,
    )


def evaluation_of(evaluation, paradigm, dataset, path, **kwargs):
    """MOABB's ``evaluation`` (a class) of ``paradigm`` on ``dataset``, its results written
    afresh under ``path``, no model saved; ``kwargs`` go to the evaluation."""
    return evaluation(
        paradigm=paradigm,
        datasets=[dataset],
        overwrite=True,
        hdf5_path=str(path),
        save_model=False,
        **kwargs,
    )


def tiny_encoder():
    return PatchEncoder(sfreq=100.0, patch_seconds=1.0, **TINY)


def tiny_pretrainer():
    return PARSPretrainer(
        **TINY, n_patches=3, steps=2, batch_size=8, valid_fraction=0.0, random_state=0, verbose=0
    )


@pytest.mark.parametrize(
    "evaluation", [WithinSessionEvaluation, CrossSessionEvaluation, CrossSubjectEvaluation]
)
def test_moabb_evaluations_on_fake_dataset(evaluation, tmp_path):
    """The three evaluations score the adapter (arrays) over PARS and over the library's
    classical pipelines, beside a PARS pipeline on MOABB's epochs: one row per fold and
    pipeline, scores between 0 and 1."""
    from braindecode_pars.features import band_power_pipeline, riemann_pipeline

    paradigm = LeftRightImagery()
    pipelines = {
        "pars": MOABBAdapter(PARSClassifier(encoder=tiny_encoder(), verbose=0), sfreq=SFREQ),
        "band power": MOABBAdapter(band_power_pipeline(), sfreq=SFREQ),
        "tangent space": MOABBAdapter(riemann_pipeline(), sfreq=SFREQ),
    }
    ev = evaluation_of(evaluation, paradigm, fake(), tmp_path)
    results = ev.process(pipelines)
    assert set(results["pipeline"]) == set(pipelines)
    assert results.groupby("pipeline").size().nunique() == 1  # the same folds for each
    assert results["score"].between(0, 1).all()
    results = results[results["pipeline"] == "pars"]
    # the same pipeline on MOABB's epochs (return_epochs=True): the rate is read from them
    ev = evaluation_of(evaluation, paradigm, fake(), tmp_path / "epochs", return_epochs=True)
    epochs_results = ev.process({"pars": moabb_pipeline(tiny_encoder())})
    assert len(epochs_results) == len(results)


@pytest.mark.filterwarnings("ignore:Pretraining ended with a pretext skill")  # two steps
def test_cross_subject_unlabelled_target_reaches_pretraining(tmp_path, monkeypatch):
    """cs_mode="train_and_target_unlabeled_50p": MOABB routes half of the held-out
    subject's trials to fit; the adapter passes them on and pretraining reads them beside
    the training trials (the pretraining view's windows are counted)."""
    seen = []
    real = pretrainer_module.SingleChannelWindows

    class Counting(real):
        def __init__(self, sources, *args, **kwargs):
            seen.append([len(source) for source in sources])
            super().__init__(sources, *args, **kwargs)

    monkeypatch.setattr(pretrainer_module, "SingleChannelWindows", Counting)
    fits = []
    real_fit = MOABBAdapter.fit

    def recording_fit(self, X, y, X_target_unlabeled=None):
        real_fit(self, X, y, X_target_unlabeled=X_target_unlabeled)
        fits.append((len(X), None if X_target_unlabeled is None else len(X_target_unlabeled)))
        fits[-1] += (self.estimator_.n_target_unlabeled_,)
        return self

    monkeypatch.setattr(MOABBAdapter, "fit", recording_fit)
    dataset = fake(n_subjects=3, n_sessions=1)
    paradigm = LeftRightImagery()
    n_per_subject = len(paradigm.get_data(dataset, subjects=[1])[1])
    ev = evaluation_of(
        CrossSubjectEvaluation,
        paradigm,
        dataset,
        tmp_path,
        cs_mode="train_and_target_unlabeled_50p",
    )
    pipeline = moabb_pipeline(tiny_pretrainer(), sfreq=SFREQ, random_state=0)
    results = ev.process({"pars-adapt": pipeline})
    assert len(results) == 3 and len(fits) == 3
    for (n_train, n_target, n_read), sizes in zip(fits, seen, strict=True):
        assert n_train == 2 * n_per_subject
        assert n_target == n_per_subject // 2  # MOABB's 50 % slice of the held-out subject
        assert n_read == n_target  # PARSClassifier counted them
        assert sizes == [n_train, n_target]  # and pretraining read them beside X
    # without the unlabelled mode, nothing is routed and pretraining reads X alone
    seen.clear(), fits.clear()
    ev = evaluation_of(CrossSubjectEvaluation, paradigm, dataset, tmp_path / "plain")
    ev.process({"pars": moabb_pipeline(tiny_pretrainer(), sfreq=SFREQ, random_state=0)})
    assert [len(s) for s in seen] == [1, 1, 1]
    assert all(n_target is None for _, n_target, _ in fits)


def test_target_windows_with_a_fixed_encoder_are_logged_not_used(caplog):
    X = np.random.default_rng(0).normal(size=(8, 3, 300)).astype(np.float32)
    y = np.array([0, 1] * 4)
    clf = PARSClassifier(encoder=tiny_encoder(), sfreq=100.0, verbose=0)
    with caplog.at_level(logging.WARNING):
        clf.fit(X, y, X_target_unlabeled=X[:4])
    assert "'X_target_unlabeled' (4 windows) is not used" in caplog.text
    assert clf.n_target_unlabeled_ == 0


#: The imagery runs MOABB's PhysionetMI reads (left/right fist: 4, 8, 12; fists/feet: 6, 10, 14).
IMAGERY_RUNS = (4, 6, 8, 10, 12, 14)


@pytest.fixture
def physionet_offline(monkeypatch):
    """MOABB's PhysionetMI reading subject 1 from the bundled files (MNE's eegbci layout),
    with every download path made to fail: the test is skipped where the files are absent."""
    from moabb.datasets import download

    from braindecode_pars.datasets.physionet_mi import bundled_data_path, physionet_mi_run_path

    root = bundled_data_path()
    missing = [r for r in IMAGERY_RUNS if not physionet_mi_run_path(root, 1, r).is_file()]
    if missing:
        pytest.skip(f"needs PhysioNet-MI S001 runs {missing} under {root}/MNE-eegbci-data")
    monkeypatch.setenv("MNE_DATASETS_EEGBCI_PATH", str(root))
    # the dataset's own files, never NEMAR's mirror (MOABB 1.7 asks it first otherwise)
    monkeypatch.setenv("MOABB_DOWNLOAD_PROVIDER", "upstream")

    class NoDownload:
        """pooch checks the file's hash and returns it; a downloader call fails the test."""

        def __init__(self, url, *args, **kwargs):
            self.url, self.kwargs = url, {}

        def __call__(self, *args, **kwargs):
            raise AssertionError(f"MOABB tried to download {self.url}")

    monkeypatch.setattr(download, "choose_downloader", NoDownload)
    monkeypatch.setattr(download, "_store_lookup", lambda *args, **kwargs: None)
    return root


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_physionet_mi_subject_1_within_session_offline(physionet_offline, tmp_path):
    """MOABB's PhysionetMI, subject 1, left vs right fist imagery (runs 4, 8, 12, 45 trials
        of 3 s at 160 Hz, 64 channels), read offline: PARSClassifier over pars-small (resampled
        to 100 Hz) and CSP+LDA, each scored by WithinSessionEvaluation's 5-fold ROC-AUC (9 test
    trials a fold)."""
    from moabb.datasets import PhysionetMI
    from pyriemann.estimation import Covariances
    from pyriemann.spatialfilters import CSP
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.pipeline import make_pipeline

    dataset = PhysionetMI(imagined=True, executed=False)
    dataset.subject_list = [1]
    paradigm = LeftRightImagery()
    X, y, meta = paradigm.get_data(dataset, subjects=[1])
    assert X.shape == (45, 64, 481) and sorted(set(y)) == ["left_hand", "right_hand"]
    ev = evaluation_of(WithinSessionEvaluation, paradigm, dataset, tmp_path)
    pipelines = {
        "PARS": moabb_pipeline("pars-small", sfreq=160.0, random_state=0),
        "CSP+LDA": make_pipeline(Covariances("oas"), CSP(nfilter=6), LinearDiscriminantAnalysis()),
    }
    results = ev.process(pipelines).set_index("pipeline")
    assert sorted(results.index) == ["CSP+LDA", "PARS"]
    assert (results["samples"] == 45).all() and (results["samples_test"] == 9).all()
    assert (results["channels"] == 64).all()
    assert results["score"].between(0, 1).all()
    logging.getLogger(__name__).info("PhysionetMI S001: %s", results["score"].to_dict())

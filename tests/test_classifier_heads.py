"""PARSClassifier's heads: one that cannot take 3-D windows is refused before any work,
and the head's optional methods exist on the classifier only when the head has them."""

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.svm import LinearSVC

from braindecode_pars import PARSClassifier, PARSPretrainer, PARSProbe
from braindecode_pars.estimators.classifier import takes_windows
from braindecode_pars.features.blocks import BandPowerFeatures

SFREQ = 50


def _task(n=40, seed=0):
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    X = rng.standard_normal((n, 2, 100)) * np.where(y == 1, 2.0, 1.0)[:, None, None]
    return X, y


def _flat(X):
    return X.reshape(len(X), -1)


@pytest.mark.parametrize(
    "head, takes",
    [
        pytest.param(LogisticRegression(), False, id="LogisticRegression"),
        pytest.param(make_pipeline(StandardScaler(), LinearSVC()), False, id="2-D-pipeline"),
        pytest.param(GridSearchCV(LogisticRegression(), {"C": [1]}), False, id="search-of-2-D"),
        pytest.param(
            make_pipeline(BandPowerFeatures(sfreq=SFREQ), LinearSVC()), True, id="features-first"
        ),
        pytest.param(make_pipeline(FunctionTransformer(_flat), LinearSVC()), True, id="reshape"),
        pytest.param(FunctionTransformer(_flat, validate=True), False, id="validating"),
        pytest.param(PARSProbe(), True, id="PARSProbe"),
        pytest.param(DummyClassifier(), True, id="DummyClassifier"),
    ],
)
def test_which_heads_take_windows(head, takes):
    assert takes_windows(head) is takes


def test_a_plain_scikit_learn_head_is_refused_before_pretraining(monkeypatch):
    def no_pretraining(*args, **kwargs):
        raise AssertionError("pretraining started")

    monkeypatch.setattr(PARSPretrainer, "fit", no_pretraining)
    X, y = _task()
    clf = PARSClassifier(encoder=PARSPretrainer(), head=LogisticRegression(), sfreq=SFREQ)
    message = (
        r"'head' \(LogisticRegression\) cannot take the windows a head receives: 3-D arrays "
        r"of shape \(n_windows, n_channels, n_times\).*make_pipeline\(.*LogisticRegression"
        r"\(\.\.\.\)\).*PARSProbe\(\)"
    )
    with pytest.raises(ValueError, match=message):
        clf.fit(X, y)
    with pytest.raises(ValueError, match="Pipeline whose first step is StandardScaler"):
        PARSClassifier(None, make_pipeline(StandardScaler(), LinearSVC()), sfreq=SFREQ).fit(X, y)


def test_the_heads_optional_methods_exist_only_when_the_head_has_them():
    X, y = _task()
    svc = PARSClassifier(
        None, make_pipeline(BandPowerFeatures(sfreq=SFREQ), LinearSVC()), sfreq=SFREQ
    )
    logistic = make_pipeline(BandPowerFeatures(sfreq=SFREQ), LogisticRegression())
    lr = PARSClassifier(None, logistic, sfreq=SFREQ, verbose=0)
    for clf in (svc, svc.set_params(verbose=0).fit(X, y)):  # before and after fit
        assert hasattr(clf, "decision_function") and hasattr(clf, "predict")
        assert not hasattr(clf, "predict_proba") and not hasattr(clf, "transform")
    assert svc.decision_function(X).shape == (len(X),)
    lr.fit(X, y)
    assert hasattr(lr, "predict_proba") and hasattr(lr, "decision_function")
    assert lr.predict_proba(X).shape == (len(X), 2)
    assert not hasattr(lr, "transform")
    probe = PARSClassifier(None, sfreq=SFREQ)  # the default head, a PARSProbe
    assert hasattr(probe, "predict_proba") and hasattr(probe, "transform")
    # calibration reads the decision function of a head without probabilities
    calibrated = CalibratedClassifierCV(svc, cv=2).fit(X, y)
    assert calibrated.predict_proba(X).shape == (len(X), 2)
    soft = VotingClassifier([("svc", svc), ("lr", lr)], voting="soft").fit(X, y)
    with pytest.raises(AttributeError, match="predict_proba"):
        soft.predict_proba(X)  # refused for what it is, not inside the head

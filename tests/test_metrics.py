import numpy as np
import pytest
from sklearn.dummy import DummyClassifier

from braindecode_pars.metrics import (
    auroc,
    balanced_accuracy,
    cohen_kappa,
    f1_macro,
    group_cross_val_score,
    make_scorer,
    scores,
)

from ._learning import SEED, learned


def test_known_answers_by_hand():
    # recalls 2/3 and 1/1 -> 5/6; kappa: p_o = 3/4, p_e = (3*2 + 1*2)/16 = 1/2 -> 1/2
    y_true, y_pred = [0, 0, 0, 1], [0, 0, 1, 1]
    assert balanced_accuracy(y_true, y_pred) == pytest.approx(5 / 6)
    assert cohen_kappa(y_true, y_pred) == pytest.approx(0.5)
    # F1: class 0 precision 1, recall 2/3 -> 0.8; class 1 precision 1/2, recall 1 -> 2/3
    assert f1_macro(y_true, y_pred) == pytest.approx((0.8 + 2 / 3) / 2)
    assert f1_macro(y_true, y_pred, n_classes=3) == pytest.approx((0.8 + 2 / 3) / 3)
    assert balanced_accuracy([0, 0, 1, 1], [0, 0, 1, 1]) == 1.0
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    # AUROC: 3 of the 4 positive-negative pairs ordered right
    assert auroc([0, 0, 1, 1], [0.1, 0.6, 0.4, 0.9]) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="two classes"):
        auroc([0, 1], np.ones((2, 3)))
    out = scores([0, 0, 1, 1], np.array([[0.9, 0.1], [0.4, 0.6], [0.6, 0.4], [0.1, 0.9]]), 2)
    assert out == pytest.approx(
        {"balanced_accuracy": 0.5, "kappa": 0.0, "f1_macro": 0.5, "auroc": 0.75}
    )


def test_a_label_unknown_to_the_estimator_counts_as_a_miss():
    X = np.zeros((4, 1))
    clf = DummyClassifier(strategy="constant", constant="a").fit(X, ["a", "a", "b", "b"])
    # 'c' is in the test fold only: its windows are misses, not coded as 'b'
    assert make_scorer("balanced_accuracy")(clf, X, ["a", "a", "c", "c"]) == pytest.approx(0.5)
    assert make_scorer("kappa")(clf, X, ["a", "a", "c", "c"]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="Allowed values are 'balanced_accuracy'"):
        make_scorer("accuracy")


class _Fixed:
    """A fitted classifier whose probabilities are given: P(class "p") per window."""

    classes_ = np.array(["c", "p"])

    def __init__(self, p):
        self.p = np.asarray(p, dtype=float)

    def predict_proba(self, X):
        return np.column_stack([1 - self.p[X], self.p[X]])

    def predict(self, X):
        return self.classes_[(self.p[X] > 0.5).astype(int)]


def test_group_scorer_decides_each_subject_by_its_windows():
    from braindecode_pars.metrics import GroupScorer

    # subjects A, B patients ("p"), C, D controls; 3 windows each
    groups = np.repeat(["A", "B", "C", "D"], 3)
    y = np.repeat(["p", "p", "c", "c"], 3)
    # A: 2 of 3 windows right, mean 0.6 -> p; B: 1 of 3 right but mean 0.6 -> p by
    # probability, c by majority; C: mean 0.3 -> c; D: 2 of 3 wrong, mean 0.55 -> p
    p = [0.9, 0.6, 0.3, 0.95, 0.45, 0.4, 0.1, 0.2, 0.6, 0.4, 0.6, 0.65]
    clf, X = _Fixed(p), np.arange(12)
    # windows: 6 of 12 right
    assert np.mean(clf.predict(X) == y) == pytest.approx(6 / 12)
    # mean probability: A p, B p, C c, D p -> patients 2/2, controls 1/2 -> 0.75
    assert GroupScorer()(clf, X, y, groups=groups) == pytest.approx(0.75)
    # majority: A p, B c, C c, D p -> recalls 1/2 and 1/2
    assert GroupScorer(vote="majority")(clf, X, y, groups=groups) == pytest.approx(0.5)
    assert GroupScorer(metric="accuracy")(clf, X, y, groups=groups) == pytest.approx(0.75)


def test_group_scorer_refuses_what_it_cannot_score():
    from braindecode_pars.metrics import GroupScorer, GroupsNotRoutedError

    clf, X = _Fixed([0.9, 0.1]), np.arange(2)
    with pytest.raises(GroupsNotRoutedError, match="needs 'groups'"):
        GroupScorer()(clf, X, np.array(["p", "c"]))
    with pytest.raises(ValueError, match="needs 'groups'"):  # as scikit-learn's routing errors
        GroupScorer()(clf, X, np.array(["p", "c"]))
    with pytest.raises(ValueError, match="one label per group"):
        GroupScorer()(clf, X, np.array(["p", "c"]), groups=np.array([0, 0]))
    with pytest.raises(ValueError, match="'vote'"):
        GroupScorer(vote="median")


def test_group_scorer_gets_groups_by_metadata_routing_in_cross_validation():
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold, cross_val_score

    from braindecode_pars.metrics import GroupScorer

    rng = np.random.default_rng(SEED)
    subjects = np.repeat(np.arange(12), 10)
    trait = (np.arange(12) % 2)[subjects]  # 6 patients, 6 controls
    # one noisy feature: windows are often wrong, subjects (10 windows) rarely
    X = (trait + rng.normal(0, 1.2, len(trait)))[:, None]
    y = np.where(trait == 1, "p", "c")
    cv = GroupKFold(n_splits=3)
    window = cross_val_score(LogisticRegression(), X, y, groups=subjects, cv=cv)
    with sklearn.config_context(enable_metadata_routing=True):
        clf = LogisticRegression().set_fit_request(sample_weight=False)
        subject = cross_val_score(
            clf, X, y, cv=cv, scoring=GroupScorer(), params={"groups": subjects}
        )  # fmt: skip
    # the same folds scored by hand over subjects
    by_hand = []
    for train, test in cv.split(X, y, subjects):
        fitted = LogisticRegression().fit(X[train], y[train])
        by_hand.append(GroupScorer()(fitted, X[test], y[test], groups=subjects[test]))
    assert subject == pytest.approx(by_hand)
    # subject.mean() > window.mean() + 0.05 (0.11 to 0.32 over seeds 0-9)
    learned(subject.mean() - window.mean(), above=0.05, what="accuracy, subjects over windows")
    # the same in one call, routing on (and off again after it)
    assert group_cross_val_score(
        LogisticRegression(), X, y, groups=subjects, cv=cv
    ) == pytest.approx(by_hand)  # fmt: skip
    assert not sklearn.get_config()["enable_metadata_routing"]


@pytest.mark.parametrize("cv", [5, None], ids=["int", "None"])
def test_group_cross_val_score_refuses_a_splitter_that_splits_groups(cv):
    from sklearn.linear_model import LogisticRegression

    X, y, groups = np.zeros((8, 1)), np.arange(8) % 2, np.arange(8) // 2
    with pytest.raises(ValueError, match=rf"'cv' parameter.*StratifiedGroupKFold.*got {cv}"):
        group_cross_val_score(LogisticRegression(), X, y, groups=groups, cv=cv)
    with pytest.raises(ValueError, match="'groups' is None and 'X' carries no groups"):
        group_cross_val_score(LogisticRegression(), X, y, cv=[(np.arange(4), np.arange(4, 8))])

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier

from braindecode_pars.metrics import (
    auroc,
    balanced_accuracy,
    cohen_kappa,
    f1_macro,
    make_scorer,
    scores,
)


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

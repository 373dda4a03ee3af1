import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, f1_score, roc_auc_score

from braindecode_pars.metrics import auroc, balanced_accuracy, cohen_kappa, f1_macro, scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_torchmetrics_scores_equal_scikit_learns(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 4, 200)
    y_pred = np.where(rng.random(200) < 0.6, y_true, rng.integers(0, 4, 200))
    assert balanced_accuracy(y_true, y_pred, 4) == pytest.approx(
        balanced_accuracy_score(y_true, y_pred)
    )
    assert cohen_kappa(y_true, y_pred, 4) == pytest.approx(
        cohen_kappa_score(y_true, y_pred), abs=1e-6
    )
    assert f1_macro(y_true, y_pred, 4) == pytest.approx(
        f1_score(y_true, y_pred, average="macro"), abs=1e-6
    )
    p = rng.random(200)
    yb = (p + rng.normal(scale=0.5, size=200) > 0.5).astype(int)
    assert auroc(yb, p) == pytest.approx(roc_auc_score(yb, p), abs=1e-6)
    out = scores(yb, np.stack([1 - p, p], 1), 2)
    assert set(out) == {"balanced_accuracy", "kappa", "f1_macro", "auroc"}


def test_known_answers():
    assert balanced_accuracy([0, 0, 1, 1], [0, 0, 1, 1]) == 1.0
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="two classes"):
        auroc([0, 1], np.ones((2, 3)))

"""Every block of the probe earns its say on the user's own labels
(``PARSProbe(block_weights="auto")``, the default of ``PARSProbe()`` and of
``PARSClassifier()``'s head).

Known answers: the time-blocked folds against a loop written by hand; the paired gain
against scikit-learn's balanced accuracy and its floor against the variance of every
sign flip; the Bonferroni margin against a bisection of the normal tail; the rule's
null (band power alone) fitted with a warning where nothing can be compared; and two
built tasks, one where the encoder cannot help (the label on 8-13 Hz power over 1/f
noise) and one where only the encoder carries the label (the order of two bursts, band
power equal in both classes), with one group and with four in ``fit``.
"""

import itertools
import logging
import math

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import PARSClassifier, PARSProbe
from braindecode_pars.features import recipe as recipe_module
from braindecode_pars.features.recipe import (
    EVIDENCE_DELTA,
    ProbeRecipe,
    TimeParts,
    _InnerFolds,
    admits,
    compare_recipes,
    corrected_margin,
    earn_blocks,
    paired_gain,
)

from ._helpers import alpha_power_task, burst_order_task
from ._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")
LOGGER = "braindecode_pars"


# -- the folds by time ----------------------------------------------------------------------
def _parts_by_hand(y, groups, n_parts, gap):
    """TimeParts written as a plain loop: within each group and class, window number
    ``i`` of ``n`` goes to part ``i * n_parts // n``; the training windows of part ``j``
    are the others, less those within ``gap`` places of a held-out window in their
    group's order."""
    part = {}
    for g in dict.fromkeys(groups):
        members = [i for i in range(len(y)) if groups[i] == g]
        for label in dict.fromkeys(y[i] for i in members):
            of_class = [i for i in members if y[i] == label]
            for rank, i in enumerate(of_class):
                part[i] = rank * n_parts // len(of_class)
    folds = []
    for j in range(n_parts):
        test = [i for i in range(len(y)) if part[i] == j]
        if not test:
            continue
        train = []
        for i in range(len(y)):
            if part[i] == j:
                continue
            members = [m for m in range(len(y)) if groups[m] == groups[i]]
            place = members.index(i)
            around = members[max(place - gap, 0) : place + gap + 1]
            if not any(part[m] == j for m in around):
                train.append(i)
        folds.append((train, test))
    return folds


@pytest.mark.parametrize("n_parts, gap", [(3, 1), (5, 1), (4, 0), (3, 2)])
def test_time_parts_equal_a_loop_by_hand(n_parts, gap):
    rng = np.random.default_rng(SEED)
    y = rng.integers(0, 3, 40)
    groups = np.repeat([7, 2, 5], [15, 10, 15])  # groups in their own order, not sorted
    got = [(tr.tolist(), te.tolist()) for tr, te in TimeParts(n_parts, gap).split(y, y, groups)]
    assert got == _parts_by_hand(y.tolist(), groups.tolist(), n_parts, gap)


def test_time_parts_hold_out_every_class_of_a_recording_of_one_class_each():
    """EEGMAT's design: a subject's rest windows, then its arithmetic windows. Parts cut
    over the whole subject would hold out rest alone and leave one class to train on;
    cut within each class, every fold trains and scores on both, each part contiguous."""
    y = np.repeat([0, 1], [18, 6])
    folds = list(TimeParts(3).split(y, y))
    assert len(folds) == 3
    for train, test in folds:
        assert set(y[train]) == set(y[test]) == {0, 1}
        for label in (0, 1):
            held = test[y[test] == label]
            assert np.all(np.diff(held) == 1)  # contiguous within its class
    assert sorted(np.concatenate([test for _, test in folds]).tolist()) == list(range(24))


def test_time_parts_refuse_bad_settings_naming_them():
    y = np.zeros(6)
    with pytest.raises(ValueError, match="'n_parts' must be >= 2, but got 1"):
        list(TimeParts(1).split(y, y))
    with pytest.raises(ValueError, match="'gap' must be >= 0, but got -1"):
        list(TimeParts(3, gap=-1).split(y, y))
    with pytest.raises(ValueError, match="one entry per window, but got 6, 6 and 5"):
        list(TimeParts(3).split(y, y, np.zeros(5)))


# -- the evidence: paired gain, its floor, the margin ---------------------------------------
@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_paired_gain_is_the_difference_of_balanced_accuracies_and_its_floor_the_sign_flips():
    rng = np.random.default_rng(SEED + 1)
    labels = (rng.integers(0, 3, 7), rng.integers(0, 2, 6))
    null = tuple(rng.integers(0, 3, len(t)) for t in labels)
    challenger = tuple(
        np.where(rng.random(len(t)) < 0.5, t, n) for t, n in zip(labels, null, strict=True)
    )
    folds = _InnerFolds(
        "KFold", 1, (1, 1), (True, True), np.zeros((2, 2)),
        tests=(np.arange(7), np.arange(6)), labels=labels, predictions=(null, challenger),
    )  # fmt: skip
    gains, floor = paired_gain(folds, 1, 0)
    expected = [
        balanced_accuracy_score(t, c) - balanced_accuracy_score(t, n)
        for t, c, n in zip(labels, challenger, null, strict=True)
    ]
    np.testing.assert_allclose(gains, expected, atol=1e-12)
    # the floor: the standard deviation of the mean gain over every flip of which of the
    # two predicts each window on which they differ (equally likely were they the same)
    means = []
    differ = [np.flatnonzero(c != n) for c, n in zip(challenger, null, strict=True)]
    slots = [(k, i) for k, d in enumerate(differ) for i in d]
    for flips in itertools.product((False, True), repeat=len(slots)):
        swapped = [c.copy() for c in challenger], [n.copy() for n in null]
        for (k, i), flip in zip(slots, flips, strict=True):
            if flip:
                swapped[0][k][i], swapped[1][k][i] = null[k][i], challenger[k][i]
        means.append(
            np.mean([balanced_accuracy_score(t, c) - balanced_accuracy_score(t, n)
                     for t, c, n in zip(labels, *swapped, strict=True)])
        )  # fmt: skip
    assert len(slots) >= 4  # enough windows differ for the check to mean something
    assert floor == pytest.approx(np.std(means), rel=1e-9)


def test_admits_needs_more_than_its_bar_and_a_steady_one_window_gain_is_not_enough():
    # three folds that agree on a gain of one window in 60: a spread of 0, but the floor
    ok, bar = admits([1 / 60] * 3, floor=math.sqrt(3) / 180)
    assert not ok and bar == pytest.approx(max(2 * math.sqrt(3) / 180, EVIDENCE_DELTA))
    # a gain past two standard errors but under delta is refused; delta=0 admits it
    gains = [0.012, 0.014, 0.016, 0.018]
    assert admits(gains, floor=0.001, margin=2, delta=0.02) == (False, 0.02)
    assert admits(gains, floor=0.001, margin=2, delta=0.0)[0]
    assert admits([0.5], floor=0.0, delta=0.0) == (False, pytest.approx(math.nan, nan_ok=True))


def test_the_margin_of_three_weights_shares_the_one_sided_level_among_them():
    def tail(z):  # the normal upper tail, without scipy
        return 0.5 * math.erfc(z / math.sqrt(2))

    for margin, n in [(2.0, 3), (1.0, 2), (2.0, 1)]:
        low, high = 0.0, 10.0
        for _ in range(200):  # bisect tail(z) = tail(margin) / n
            mid = (low + high) / 2
            low, high = (mid, high) if tail(mid) > tail(margin) / n else (low, mid)
        assert corrected_margin(margin, n) == pytest.approx(low, abs=1e-9)


# -- what the probe fits ----------------------------------------------------------------------
def test_where_nothing_can_be_compared_the_null_is_fitted_with_a_warning(caplog):
    X, _ = alpha_power_task(4, SEED + 2)
    y = np.array([0, 1, 0, 1])  # two windows a class: two parts of five hold any
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(sfreq=100.0).fit(X, y)
    assert str(probe.recipe_) == "bandpower (C=3)"
    assert probe.block_weights_ == {"bandpower": 1.0, "tangentspace": 0.0}
    (record,) = [r for r in caplog.records if "block_weights='auto'" in r.getMessage()]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith("block_weights='auto' could not compare the blocks: the inner")
    assert "dropped tangentspace without evidence" in message
    assert "fewer than 3 of them scored, on 1 group." in message


def test_the_comparison_is_logged_at_info_and_kept_on_the_probe(caplog):
    X, y = alpha_power_task(60, SEED + 3)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(sfreq=100.0).fit(X, y)  # no groups: one recording, by time
    (record,) = [r for r in caplog.records if "block_weights='auto'" in r.getMessage()]
    assert record.levelno == logging.INFO
    parts = recipe_module.TIME_PARTS
    assert probe.inner_folds_.startswith(f"{parts} folds of TimeParts over 1 group")
    assert record.getMessage().startswith(
        f"block_weights='auto', inner comparison over {probe.inner_folds_}: bandpower (C=3) scored "
    )
    assert record.getMessage().endswith(f"Fitted {probe.recipe_}.")
    assert list(probe.recipe_scores_.index) == ["bandpower (C=3)", "bandpower+tangentspace (C=3)"]
    groups = np.repeat([0, 1, 2], 20)
    by_group = PARSProbe(sfreq=100.0).fit(X, y, groups=groups)
    assert by_group.inner_folds_.startswith("3 folds of LeaveOneGroupOut over 3 groups")


def test_earn_blocks_offers_the_tangent_space_then_the_encoder_on_the_same_folds():
    """On features built so that only the tangent space's block and the encoder's carry
    the label, each beside the blocks before it: both are admitted, the encoder at one
    of its weights, and the scores are those of compare_recipes on the same folds."""
    rng = np.random.default_rng(SEED + 4)
    n = 90
    y = np.tile([0, 1], n // 2)
    seen = rng.random(n) < 0.5  # the windows whose label the covariances see; the encoder
    A = rng.standard_normal((n, 2, 50))  # sees the others
    covariances = np.einsum("nct,ndt->ncd", A, A) / 50
    covariances += (seen * y)[:, None, None] * np.eye(2) * 3.0  # more variance
    encoder = rng.standard_normal((n, 8)) + 3.0 * ((2 * y - 1) * ~seen)[:, None]
    features = {
        "encoder": encoder,
        "bandpower": rng.standard_normal((n, 4)),
        "tangentspace": covariances,
    }
    full = ProbeRecipe(("encoder", "bandpower", "tangentspace"))
    cv = TimeParts(3)
    evidence = earn_blocks(full, features, y, np.zeros(n), cv=cv, random_state=0)
    (ts, enc) = evidence.decisions
    assert (ts.block, ts.weight, enc.block) == ("tangentspace", 1.0, "encoder")
    assert enc.weight in (0.25, 0.5, 1.0) and evidence.recipe.weight("encoder") == enc.weight
    assert evidence.recipe.blocks == ("encoder", "bandpower", "tangentspace")
    base = ProbeRecipe(("bandpower", "tangentspace"))
    scores = compare_recipes(
        [base, *(full.weighted({"encoder": w}) for w in (0.25, 0.5, 1.0))],
        features, y, np.zeros(n), random_state=0, cv=cv,
    )  # fmt: skip
    np.testing.assert_allclose(evidence.scores["mean"].to_numpy()[1:], scores["mean"].to_numpy())


# -- the built tasks (done when) --------------------------------------------------------------
def _groups(n_groups):
    return np.repeat(np.arange(n_groups), 120 // n_groups)


@pytest.mark.parametrize("n_groups", [1, 4])
def test_where_the_encoder_cannot_help_the_default_is_within_2_points_of_the_probes(n_groups):
    """One channel whose label rides on its 8-13 Hz power over a 1/f background, 120
    windows to fit, 300 to score: ``PARSClassifier()`` within 0.02 of the better of
    ``PARSProbe()`` and ``PARSProbe(tangent_space=False)``. Before every block had to
    earn its say (equal say): 0.863 against 0.885 at seed 0 (one group). The gap is the
    mean over three draws (seeds SEED to SEED + 2): one draw's gap reached -0.025 (one
    group, seed 4 of 0-9), where a few of 300 windows decide it."""
    groups = _groups(n_groups)
    better, gaps = [], []
    for seed in (SEED, SEED + 1, SEED + 2):
        X, y = alpha_power_task(120, seed)
        X_new, y_new = alpha_power_task(300, seed + 1000)
        default = PARSClassifier(sfreq=100.0, verbose=0).fit(X, y, groups=groups)
        scores = [
            balanced_accuracy_score(y_new, probe.fit(X, y, groups=groups).predict(X_new))
            for probe in (PARSProbe(sfreq=100.0), PARSProbe(sfreq=100.0, tangent_space=False))
        ]
        better.append(max(scores))
        gaps.append(balanced_accuracy_score(y_new, default.predict(X_new)) - max(scores))
    learned(min(better), above=0.75, what="the better probe (the label is there to find)")
    what = "PARSClassifier() less the better probe, mean of 3 draws"
    learned(np.mean(gaps), above=-0.02, at_least=True, what=what)


@pytest.mark.parametrize("n_groups", [1, 4])
def test_where_only_the_encoder_carries_the_label_the_default_keeps_it(n_groups):
    """The order of two bursts, band power equal in both classes, 120 windows to fit and
    300 to score: ``PARSClassifier()`` admits the encoder's block and scores at least
    0.95, where ``PARSProbe()`` (no encoder) stays near chance."""
    X, y = burst_order_task(120, SEED)
    X_new, y_new = burst_order_task(300, SEED + 1000)
    groups = _groups(n_groups)
    default = PARSClassifier(sfreq=100.0, verbose=0).fit(X, y, groups=groups)
    assert default.head_.block_weights_["encoder"] > 0
    score = balanced_accuracy_score(y_new, default.predict(X_new))
    learned(score, above=0.95, at_least=True, what="PARSClassifier() on the burst order")

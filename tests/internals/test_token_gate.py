"""``PARSFineTuner(token_gate="auto")``'s decision (estimators/_token_gate.py) and the
closed token path of ``MultiChannelClassifier(token_gate="closed")``."""

import math

import numpy as np
import pytest
import torch

from braindecode_pars import MultiChannelClassifier, PARSFineTuner, PatchEncoder
from braindecode_pars._util.checks import InvalidParameterError
from braindecode_pars.estimators._token_gate import gate_evidence, inner_split

TINY = dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16)


def _sign_test(k, n):
    """P(X >= k) for X ~ Binomial(n, 1/2), summed term by term."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n


@pytest.mark.parametrize(
    "only_open, only_closed, opens",
    [(6, 0, True), (4, 0, False), (5, 1, False), (9, 1, True), (0, 0, False), (2, 5, False)],
)
def test_the_gate_opens_only_on_a_sign_test_of_the_windows_the_fits_disagree_on(
    only_open, only_closed, opens
):
    both = 10  # windows both fits get right, and as many both get wrong
    y = np.array([0, 1] * ((only_open + only_closed + 2 * both + 1) // 2 + 1))
    y = y[: only_open + only_closed + 2 * both]
    wrong = 1 - y
    pred_open = np.concatenate([y[:only_open], wrong[only_open : only_open + only_closed]])
    pred_closed = np.concatenate([wrong[:only_open], y[only_open : only_open + only_closed]])
    rest = y[only_open + only_closed :]
    shared = np.concatenate([rest[:both], 1 - rest[both:]])
    pred_open, pred_closed = (
        np.concatenate([pred_open, shared]),
        np.concatenate([pred_closed, shared]),
    )
    opened, evidence = gate_evidence(y, pred_open, pred_closed)
    assert opened is opens
    assert (evidence["only_open"], evidence["only_closed"]) == (only_open, only_closed)
    n = only_open + only_closed
    expected = _sign_test(only_open, n) if n else 1.0
    assert evidence["p"] == pytest.approx(expected, rel=1e-9)
    assert evidence["n_held_out"] == len(y)


def test_the_held_out_part_is_whole_groups_or_the_last_third_of_each_class():
    codes = np.array([0, 1] * 9)  # 9 windows a class, in time order
    train, held, how = inner_split(codes, None, seed=0)
    assert how == "time blocks"
    assert held.tolist() == [12, 13, 14, 15, 16, 17]  # the last 3 of each class
    assert sorted([*train, *held]) == list(range(18))
    groups = np.repeat(np.arange(6), 3)
    train, held, how = inner_split(codes, groups, seed=0)
    assert how == "groups"
    assert set(groups[held]).isdisjoint(groups[train])  # whole groups
    assert len(set(groups[held])) == 2  # a third of 6
    assert set(codes[held]) == set(codes[train]) == {0, 1}
    one = inner_split(np.array([0, 0, 0, 1]), None, seed=0)
    assert one is None  # a class of one window: nothing to hold out


def _fit_data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3, 200)).astype(np.float32) * 1e-5
    y = np.tile([0, 1], n // 2)
    X[y == 1, 0] *= 3.0  # band power carries the label: the front end alone reads it
    return X, y


@pytest.mark.usefixtures("one_thread")
def test_a_closed_token_path_never_runs_nor_changes_the_encoder():
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **TINY)
    calls = []
    X, y = _fit_data()
    model = MultiChannelClassifier(
        n_outputs=2, n_chans=3, n_times=200, encoder=encoder, spatial_filters=2,
        band_power=(8, 30), token_gate="closed",
    )  # fmt: skip
    model.encoder.register_forward_hook(lambda *a: calls.append(1))
    features = model(torch.as_tensor(X[:4]), return_features=True)["features"]
    assert calls == [] and model.gate is None
    assert features.shape == (4, 16 + 2)
    torch.testing.assert_close(features[:, :16], torch.zeros(4, 16))
    clf = PARSFineTuner(
        encoder=encoder, sfreq=100, max_epochs=2, token_gate="closed", random_state=0
    ).fit(X, y)
    assert clf.token_gate_ == "closed" and clf.token_gate_evidence_ is None
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(clf.encoder_.state_dict()[name], value, msg=name)
    assert np.all(clf.transform(X)[:, :16] == 0)


def test_a_closed_token_path_survives_saving(tmp_path):
    torch.manual_seed(0)
    model = MultiChannelClassifier(
        n_outputs=2, n_chans=3, n_times=200, sfreq=100, spatial_filters=2, band_power=(8, 30),
        token_gate="closed", emb_dim=16, depth=1, encoder_n_heads=2, ff_dim=16, n_heads=2,
    ).eval()  # fmt: skip
    model.band_log_variance.set_statistics(model.virtual_channels(torch.randn(8, 3, 200)))
    model.save_pretrained(tmp_path)
    loaded = MultiChannelClassifier.from_pretrained(tmp_path)
    assert loaded.token_gate == "closed" and loaded.gate is None
    X = torch.randn(4, 3, 200)
    torch.testing.assert_close(loaded(X), model(X))


@pytest.mark.usefixtures("one_thread")
def test_auto_decides_on_held_out_windows_and_refits_with_its_choice():
    X, y = _fit_data(30)
    encoder = PatchEncoder(sfreq=100, **TINY)
    clf = PARSFineTuner(encoder=encoder, sfreq=100, max_epochs=3, random_state=0)
    assert clf.token_gate == "auto"
    clf.fit(X, y, groups=np.repeat(np.arange(3), 10))
    evidence = clf.token_gate_evidence_
    assert evidence["held_out"] == "groups" and evidence["n_held_out"] == 10
    assert clf.token_gate_ in (True, "closed")
    assert clf.module_.token_gate == clf.token_gate_
    shown = evidence["open"] > evidence["closed"] and evidence["p"] <= 0.05
    assert (clf.token_gate_ is True) == shown
    assert len(clf.history_) == 3  # the refit on all 30 windows
    message = r"'token_gate'.*'auto', True, False and 'closed', but got 'maybe'"
    with pytest.raises(InvalidParameterError, match=message):
        PARSFineTuner(token_gate="maybe").fit(X, y)

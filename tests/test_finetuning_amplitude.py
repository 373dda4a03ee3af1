"""Fine-tuning sees relative amplitude across channels: the lateralisation of motor
imagery reduced to its core (``relative_amplitude_task``), which the encoder's
normalisation per channel and window hides from the pooled tokens."""

import numpy as np
import pytest
import torch
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import MultiChannelClassifier, PARSFineTuner

from ._helpers import relative_amplitude_task
from ._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")

#: Epochs of the fits below: the default's 200 take about 3 minutes per fit on one thread
#: (both reach 1.0 there, ``benchmarks/results/finetuning_amplitude.md``)
EPOCHS = 20


def test_the_task_hides_its_label_from_each_channel_alone_and_shows_it_in_their_ratio():
    Xf, yf, Xs, ys, sfreq = relative_amplitude_task()
    assert Xf.shape == Xs.shape == (160, 2, 400) and sfreq == 100.0
    assert np.bincount(yf).tolist() == np.bincount(ys).tolist() == [80, 80]
    log_std = np.log(Xf.std(axis=-1))
    ratio = log_std[:, 0] - log_std[:, 1]
    np.testing.assert_allclose(np.abs(ratio), np.log(2.0), atol=0.25)  # a 2:1 ratio
    assert ((ratio > 0) == (yf == 0)).all()
    # the gain hides the class from one channel: its best threshold is far from perfect
    one = np.sort(log_std[:, 0])
    best = max(balanced_accuracy_score(yf, (log_std[:, 0] < t).astype(int)) for t in one)
    assert best < 0.8
    # and the same seed draws the same windows, another seed others
    np.testing.assert_array_equal(relative_amplitude_task()[0], Xf)
    assert not np.allclose(relative_amplitude_task(seed=1)[0], Xf)


def test_the_relative_amplitude_is_blind_to_gain_and_unit_and_flat_channels():
    torch.manual_seed(0)
    model = MultiChannelClassifier(
        n_outputs=2, n_chans=3, n_times=200, sfreq=100, amplitude="relative",
        emb_dim=16, depth=1, encoder_n_heads=2, ff_dim=16, n_heads=2,
    )  # fmt: skip
    X = torch.randn(8, 3, 200) * torch.tensor([1.0, 2.0, 4.0])[:, None]
    model.train()
    model.amplitude_features(X)  # the training statistics
    model.eval()
    z = model.amplitude_features(X)
    gain = torch.logspace(-6, 3, 8)[:, None, None]  # a gain per window, volts to counts
    torch.testing.assert_close(model.amplitude_features(X * gain), z, atol=1e-4, rtol=0)
    # z is the log amplitude minus the window's mean over channels, standardised
    log_std = X.std(-1).log()
    relative = log_std - log_std.mean(-1, keepdim=True)
    norm = model.amplitude_norm
    expected = (relative - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
    torch.testing.assert_close(z, expected, atol=1e-5, rtol=0)
    # a channel zeroed (channel dropout) leaves the others' relative amplitudes among them
    X[:, 2] = 0
    z = model.amplitude_features(X)
    half = (log_std[:, 0] - log_std[:, 1]) / 2
    expected_0 = (half - norm.running_mean[0]) / torch.sqrt(norm.running_var[0] + norm.eps)
    torch.testing.assert_close(z[:, 0], expected_0, atol=1e-5, rtol=0)
    torch.testing.assert_close(z[:, 2], torch.zeros(8), atol=1e-5, rtol=0)  # at the mean
    # they reach the pooled token through one map of all channels
    assert model(X, return_features=True)["features"].shape == (8, 16)
    assert model.amplitude_proj.in_features == 3
    model.reset_head(4)
    assert model(X).shape == (8, 4)


@pytest.mark.parametrize("encoder", [None, "default"], ids=["scratch", "pars-small-v2"])
def test_the_default_fine_tuner_learns_relative_amplitude_across_channels(encoder):
    Xf, yf, Xs, ys, sfreq = relative_amplitude_task(seed=SEED)
    clf = PARSFineTuner(encoder=encoder, max_epochs=EPOCHS, sfreq=sfreq, random_state=SEED)
    clf.fit(Xf, yf)
    losses = [h["train_loss"] for h in clf.history_]
    assert np.mean(losses[-3:]) < 0.5 * losses[0]  # learning, not guessing
    learned(balanced_accuracy_score(ys, clf.predict(Xs)), above=0.95, at_least=True)

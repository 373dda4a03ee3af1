"""One default encoder, as users read it: the fine-tuning the README shows,
``PARSClassifier(head=PARSFineTuner(strategy="full"))``, starts from the shipped
``pars-small-v2`` and its log says so; the fine-tuner keeps scikit-learn's rules and is
quiet at its defaults."""

import logging

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch.callbacks import Callback

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PatchEncoder
from braindecode_pars.weights import DEFAULT_ENCODER

from .conftest import TINY

pytestmark = pytest.mark.usefixtures("one_thread")


class StartingEncoder(Callback):
    """Keep a copy of the module's encoder weights when training begins."""

    def on_train_begin(self, net, **kwargs):
        self.state_ = {k: v.clone() for k, v in net.module_.encoder.state_dict().items()}


def _windows(n=24, n_chans=2, n_times=200, seed=0):
    """Two classes at 100 Hz, the shipped encoders' rate: a 10 Hz rhythm or none."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, n_chans, n_times)).astype(np.float32)
    X[y == 1] += 2 * np.sin(2 * np.pi * 10 * np.arange(n_times) / 100).astype(np.float32)
    return X, y


def _quick(**params):
    # token_gate=True: the encoder's path stays in the model, so its starting weights are
    # the ones that train ("auto" may close it on 24 windows, and then fits three times)
    base = dict(max_epochs=1, batch_size=8, augmentation=None, random_state=0, token_gate=True)
    return {**base, **params}


def _same(state, encoder):
    reference = encoder.state_dict()
    return state.keys() == reference.keys() and all(
        torch.equal(state[k], reference[k]) for k in state
    )


def _starting_state(estimator):
    return dict(estimator.callbacks_)["start"].state_


def test_the_papers_fine_tuning_call_starts_from_the_shipped_encoder_and_says_so(caplog):
    X, y = _windows()
    head = PARSFineTuner(strategy="full", callbacks=[("start", StartingEncoder())], **_quick())
    clf = PARSClassifier(head=head, sfreq=100, verbose=0)
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        clf.fit(X, y)
    shipped = PatchEncoder.from_pretrained(DEFAULT_ENCODER)
    assert _same(_starting_state(clf.head_), shipped)
    assert not _same(clf.head_.encoder_.state_dict(), shipped)  # "full": every weight trains
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "Fitting the head, PARSFineTuner, over the shipped encoder 'pars-small-v2'" in said
    assert (
        "Fine-tuning (strategy='full') from the PatchEncoder of its 'encoder' parameter "
        "(64 features" in said
    )
    assert "for 1 epoch on cpu" in said and "1 epochs" not in said
    # the parameters stay as given (scikit-learn's rule): the head's own is "default"
    assert clf.head.get_params()["encoder"] == "default"
    assert clone(clf).get_params()["head__encoder"] == "default"


def test_the_fine_tuner_alone_starts_from_the_shipped_encoder_or_from_scratch(caplog):
    X, y = _windows()
    start = [("start", StartingEncoder())]
    with caplog.at_level(logging.INFO, logger="braindecode_pars.estimators.finetuner"):
        alone = PARSFineTuner(sfreq=100, callbacks=start, **_quick()).fit(X, y)
    assert _same(_starting_state(alone), PatchEncoder.from_pretrained(DEFAULT_ENCODER))
    (said,) = [r.getMessage() for r in caplog.records if "Fine-tuning" in r.getMessage()]
    assert "from the shipped encoder 'pars-small-v2' (encoder='default')" in said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="braindecode_pars.estimators.finetuner"):
        scratch = PARSFineTuner(encoder=None, sfreq=100, callbacks=start, **_quick()).fit(X, y)
    assert not _same(_starting_state(scratch), PatchEncoder.from_pretrained(DEFAULT_ENCODER))
    (said,) = [r.getMessage() for r in caplog.records if "Fine-tuning" in r.getMessage()]
    assert "from a new, randomly initialised encoder (encoder=None" in said
    # a new encoder is the seed's draw: the same seed, the same starting weights
    again = PARSFineTuner(encoder=None, sfreq=100, callbacks=start, **_quick()).fit(X, y)
    first, second = _starting_state(scratch), _starting_state(again)
    assert all(torch.equal(v, second[k]) for k, v in first.items())


def test_a_classifier_encoder_replaces_the_heads_default_and_two_encoders_are_refused():
    X, y = _windows()
    encoder = PatchEncoder(sfreq=100, **TINY)
    head = PARSFineTuner(strategy="frozen", callbacks=[("start", StartingEncoder())], **_quick())
    clf = PARSClassifier(encoder, head, sfreq=100, verbose=0).fit(X, y)
    assert _same(_starting_state(clf.head_), encoder)  # not the shipped one
    scratch = PARSClassifier(None, head, sfreq=100, verbose=0).fit(X, y)
    assert scratch.encoder_ is None and scratch.head_.encoder is None  # from scratch
    pretrained = PARSClassifier(
        PARSPretrainer(max_epochs=0, **TINY, verbose=0), head, sfreq=100, verbose=0
    ).fit(X, y)
    assert _same(_starting_state(pretrained.head_), pretrained.encoder_)
    with pytest.raises(ValueError, match="Two encoders: the head's own 'encoder' is 'pars-small'"):
        PARSClassifier(encoder, PARSFineTuner(encoder="pars-small"), sfreq=100).fit(X, y)


def test_the_default_encoder_at_another_rate_resamples_the_windows_as_the_probe_does(caplog):
    from braindecode_pars.io import resample_windows

    X, y = _windows()  # 200 samples, read as 4 s at 50 Hz
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        tuner = PARSFineTuner(sfreq=50, **_quick()).fit(X, y)
    said = [r.getMessage() for r in caplog.records]
    resampled = [m for m in said if "resampled from 50 Hz to 100 Hz" in m]
    assert len(resampled) == 1 and "the windows are at 50 Hz" in resampled[0]
    assert (tuner.input_sfreq_, tuner.input_n_times_) == (50, 200)
    assert (tuner.sfreq_, tuner.n_times_) == (100, 400)
    # the same model as on windows resampled first, and predict takes the 50-Hz windows
    at_100 = resample_windows(X, sfreq=50, new_sfreq=100)
    first = PARSFineTuner(sfreq=100, **_quick()).fit(at_100, y)
    np.testing.assert_allclose(
        tuner.predict_proba(X), first.predict_proba(at_100), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match=r"shape \(2, 400\) .* fitted on \(2, 200\)"):
        tuner.predict(at_100)
    assert PARSFineTuner(encoder=None, sfreq=50, **_quick()).fit(X, y).sfreq_ == 50


def test_the_fine_tuner_is_quiet_at_its_defaults_and_prints_its_table_at_verbose_1(
    capfd, monkeypatch
):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # nobody set up logging
    X, y = _windows()
    assert PARSFineTuner().verbose == 0
    PARSFineTuner(sfreq=100, **_quick(max_epochs=2, token_gate="auto")).fit(X, y)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    PARSFineTuner(sfreq=100, verbose=1, **_quick(max_epochs=2)).fit(X, y)
    out, err = capfd.readouterr()
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert "train_loss" in out and len(rows) == 2  # skorch's table: a row per epoch
    assert "Fine-tuning (strategy='full') from the shipped encoder" in err  # what fit does

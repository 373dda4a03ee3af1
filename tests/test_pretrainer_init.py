"""PARSPretrainer(init_encoder=...): pretext training continued from a given encoder,
the test-subject adaptation of PARSClassifier with X_target_unlabeled."""

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSPretrainer, PARSProbe, load_encoder
from braindecode_pars.datasets import load_bundled_eegmat
from braindecode_pars.io.windows import read_windows

from ._learning import SEED, learned


@pytest.fixture(scope="module")
def eeg():
    """Real EEG windows (the bundled EEGMAT subjects), 10 s at 100 Hz, µV."""
    data = read_windows(load_bundled_eegmat())
    return data.X[:, :4].astype(np.float32), data.y, float(data.sfreq)


def _params(encoder):
    return torch.cat([p.detach().flatten() for p in encoder.parameters()])


def test_no_epochs_keeps_a_copy_of_the_initial_encoder(eeg):
    X, _, sfreq = eeg
    start = load_encoder("pars-small")
    stage = PARSPretrainer(init_encoder=start, max_epochs=0, sfreq=sfreq, verbose=0).fit(X[:8])
    assert torch.equal(_params(stage.encoder_), _params(start))
    assert stage.encoder_ is not start
    assert stage.config_ == start.config


def test_training_starts_from_the_initial_weights(eeg, one_thread):
    """One epoch at a negligible learning rate stays at the initial weights; the same
    run without init_encoder starts elsewhere."""
    X, _, sfreq = eeg
    start = load_encoder("pars-small")
    common = dict(max_epochs=1, lr=1e-12, sfreq=sfreq, valid_fraction=None, verbose=0)
    kept = PARSPretrainer(init_encoder="pars-small", random_state=0, **common).fit(X[:16])
    new = PARSPretrainer(random_state=0, **common).fit(X[:16])
    assert torch.allclose(_params(kept.encoder_), _params(start), atol=1e-6)
    assert not torch.allclose(_params(new.encoder_), _params(start), atol=1e-2)


def test_continued_pretraining_keeps_the_skill_a_new_encoder_lacks(eeg, one_thread):
    """After a few steps on real EEG the shipped encoder's pretext skill is already
    high; a new encoder's is near zero."""
    X, _, sfreq = eeg
    common = dict(steps=20, sfreq=sfreq, random_state=SEED, valid_fraction=None, verbose=0)
    kept = PARSPretrainer(init_encoder="pars-small", **common).fit(X)
    new = PARSPretrainer(**common).fit(X)
    skill_kept = kept.history_[-1]["train_skill"]
    skill_new = new.history_[-1]["train_skill"]
    # 0.10 to 0.35 over seeds 0-9, the new encoder's 0.00 to 0.02
    learned(skill_kept, above=0.05, what="training skill, the shipped encoder continued")
    # skill_kept > skill_new + 0.05
    learned(skill_kept - skill_new, above=0.05, what="training skill, continued less new")


def test_a_size_that_differs_from_the_initial_encoder_is_refused(eeg):
    X, _, sfreq = eeg
    with pytest.raises(ValueError, match=r"emb_dim=32 \(init_encoder has 64\)"):
        PARSPretrainer(init_encoder="pars-small", emb_dim=32, sfreq=sfreq).fit(X[:4])


def test_another_sampling_rate_is_refused_naming_the_parameter(eeg):
    X, _, _ = eeg
    with pytest.raises(ValueError, match="'init_encoder' works at sfreq=100.0 Hz"):
        PARSPretrainer(init_encoder="pars-small", sfreq=200.0).fit(X[:4])


def test_an_unknown_initial_encoder_is_refused():
    with pytest.raises((TypeError, ValueError), match="init_encoder"):
        PARSPretrainer(init_encoder=3.5, sfreq=100.0).fit(np.zeros((2, 1, 1000), np.float32))


def test_classifier_adapts_a_shipped_encoder_to_the_target_windows(eeg, one_thread):
    """Test-subject adaptation: the target windows reach the continued pretraining."""
    X, y, sfreq = eeg
    stage = PARSPretrainer(init_encoder="pars-small", steps=5, valid_fraction=None)
    clf = PARSClassifier(encoder=stage, head=PARSProbe(), sfreq=sfreq, random_state=0, verbose=0)
    clf.fit(X[:20], y[:20], X_target_unlabeled=X[20:30])
    assert clf.n_target_unlabeled_ == 10
    assert clf.predict(X[30:]).shape == (len(X) - 30,)

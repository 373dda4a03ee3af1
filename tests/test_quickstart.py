"""The code of docs/quickstart.rst's section "The encoder as a braindecode backbone",
run as written on windows built for it: two rhythms a frozen or fine-tuned shipped
encoder must tell apart."""

import numpy as np
import pytest

from ._learning import SEED, learned
from .test_usage import ROOT, section_code

SECTION = "The encoder as a braindecode backbone"
SFREQ = 100.0

pytestmark = pytest.mark.usefixtures("one_thread")


def two_rhythms(n, seed):
    """``n`` windows of 2 channels and 2 s at 100 Hz in microvolts: class 0 a 4 Hz
    rhythm, class 1 a 25 Hz one, each at a random phase and amplitude in noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(2 * SFREQ)) / SFREQ
    y = np.arange(n) % 2
    freq = np.where(y == 0, 4.0, 25.0)[:, None, None]
    phase = rng.uniform(0, 2 * np.pi, (n, 2, 1))
    amplitude = rng.uniform(5, 20, (n, 1, 1))
    X = amplitude * np.sin(2 * np.pi * freq * t + phase) + 3 * rng.standard_normal((n, 2, t.size))
    return X.astype(np.float32), y.astype(np.int64)


def test_the_section_shows_a_frozen_and_a_fine_tuned_backbone():
    (block,) = section_code(ROOT / "docs" / "quickstart.rst", SECTION)
    assert "EEGClassifier(" in block and 'Freezer("encoder.*")' in block
    assert "PARSBackbone(" in block and "MultiChannelClassifier(" in block


def test_the_sections_code_runs_as_written_and_learns(capsys):
    (block,) = section_code(ROOT / "docs" / "quickstart.rst", SECTION)
    X_train, y_train = two_rhythms(64, seed=SEED)  # the models' seeds are the page's
    X_test, y_test = two_rhythms(40, seed=SEED + 1)
    namespace = dict(X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)
    exec(compile(block, "docs/quickstart.rst", "exec"), namespace)
    frozen, finetuned = namespace["frozen"], namespace["finetuned"]
    for net in (frozen, finetuned):
        losses = net.history[:, "train_loss"]
        assert losses[-1] < 0.5 * losses[0], losses  # the loss falls
    # the frozen encoder did not move; the fine-tuned one did
    from braindecode_pars import load_encoder

    shipped = load_encoder("pars-small-v2").state_dict()
    for key, value in frozen.module_.encoder.state_dict().items():
        assert np.array_equal(value.numpy(), shipped[key].numpy()), key
    moved = finetuned.module_.encoder.state_dict()
    assert any(not np.array_equal(moved[k].numpy(), v.numpy()) for k, v in shipped.items())
    scores = [float(s) for s in capsys.readouterr().out.splitlines()[-1].split()]
    assert len(scores) == 2, scores
    learned(min(scores), above=0.9, at_least=True, what="worst of the two")  # chance is 0.5

"""Each warning once: a leave-one-subject-out run shows each of the library's warnings
once, not once per fold, and the classifier's ``verbose=0`` quiets its stages' plans."""

import collections
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import LeaveOneGroupOut, cross_val_score

import braindecode_pars
from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer

from .conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")

PACKAGE = str(Path(braindecode_pars.__file__).parent)
#: 3.5-s windows at 40 Hz: crops shorter than PARS's default draws its patches from, so
#: every fold's pretraining warns of their overlap (a text no other test's draw gives).
SFREQ, N_TIMES = 40.0, 140


def _subjects(n_subjects=6, per_subject=6, seed=0):
    """Windows of 2 channels of ``n_subjects`` subjects, two classes in each, class 1
    with a 10-Hz rhythm on the first channel; the subject of each window."""
    rng = np.random.default_rng(seed)
    n = n_subjects * per_subject
    X = rng.standard_normal((n, 2, N_TIMES)).astype(np.float32)
    y = np.tile([0, 1], n // 2)
    t = np.arange(N_TIMES) / SFREQ
    X[y == 1, 0] += 1.5 * np.sin(2 * np.pi * 10 * t).astype(np.float32)
    groups = np.repeat(np.arange(n_subjects), per_subject)
    return X, y, groups


def _no_logging_setup(monkeypatch):
    """A session where nobody configured logging (pytest's capture handlers taken off
    the root logger), so that only ``verbose`` decides what reaches stderr."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])


def _the_librarys(caught):
    """The warnings raised at a line of the package, by (category, text)."""
    return collections.Counter(
        (w.category.__name__, str(w.message)) for w in caught if w.filename.startswith(PACKAGE)
    )


def test_a_leave_one_subject_out_run_shows_each_warning_once_and_no_plan_at_verbose_0(
    capfd, monkeypatch
):
    _no_logging_setup(monkeypatch)
    X, y, groups = _subjects()
    stage = PARSPretrainer(**SMALL_ENCODER, steps=10, batch_size=16, random_state=0)
    clf = PARSClassifier(encoder=stage, sfreq=SFREQ, verbose=0)
    assert stage.verbose == 1  # the pretrainer at its default: its progress is its own
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's default action: once per location
        scores = cross_val_score(
            clf, X, y, groups=groups, cv=LeaveOneGroupOut(), params={"groups": groups}
        )
    assert len(scores) == 6 and np.all(np.isfinite(scores))
    said = _the_librarys(caught)
    assert said and max(said.values()) == 1, said  # no warning of the library twice
    overlap = [text for (_, text) in said if text.startswith("PARS draws 14 patches")]
    assert len(overlap) == 1, said  # raised in every fold, shown in the first
    assert "from each 3.5-s pretraining crop" in overlap[0]
    out, err = capfd.readouterr()
    assert "Pretraining PARS with" not in err and "Fitting the head" not in err
    progress = [line for line in err.splitlines() if line.startswith("pretraining PARS: ")]
    assert progress or "|" in err  # the stage's own verbose=1: plain lines, or a bar
    assert "UserWarning" not in err  # recorded above, not printed


def test_the_classifiers_verbose_0_quiets_its_stages_plans_not_their_own_progress(
    capfd, monkeypatch
):
    _no_logging_setup(monkeypatch)
    X, y, _ = _subjects(n_subjects=2, per_subject=8)
    loud = dict(
        encoder=PARSPretrainer(**SMALL_ENCODER, steps=2, batch_size=16, random_state=0, verbose=1),
        head=PARSFineTuner(max_epochs=1, batch_size=16, random_state=0, verbose=1),
        sfreq=SFREQ,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short crops, no skill: said elsewhere
        PARSClassifier(**loud).fit(X, y)  # verbose=0, the default
        out, err = capfd.readouterr()
        assert "Pretraining PARS with" not in err and "Fine-tuning (strategy=" not in err
        assert "Fitting the head" not in err
        assert "train_loss" in out  # the fine-tuner's table: its own verbose=1 asks for it
        PARSClassifier(**loud, verbose=1).fit(X, y)
        out, err = capfd.readouterr()
        assert "Pretraining PARS with a 16 x 1 encoder" in err
        assert "Fine-tuning (strategy=" in err and "Fitting the head, PARSFineTuner" in err
        # a quiet classifier leaves nothing behind: the pretrainer alone says its plan
        PARSClassifier(**loud).fit(X, y)
        capfd.readouterr()
        PARSPretrainer(**SMALL_ENCODER, steps=2, batch_size=16, sfreq=SFREQ).fit(X)
    assert "Pretraining PARS with a 16 x 1 encoder" in capfd.readouterr().err

"""The README's section "Use", run as written on the bundled EEGMAT windows, and the
units advice it gives."""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest
import sklearn
from sklearn.model_selection import cross_val_score

from braindecode_pars import PARSProbe
from braindecode_pars.datasets.bundled import BUNDLED_SUBJECTS, load_bundled_eegmat
from braindecode_pars.io import read_windows

from ._helpers import loso_scores_on_arrays

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("one_thread")


def use_blocks():
    """The ``python`` blocks of the README's section "Use", in order."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Use\n") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def run(block, namespace):
    """Run ``block`` in ``namespace``; what it printed, one float a line."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), sklearn.config_context():
        exec(compile(block, "README.md", "exec"), namespace)  # set_config undone after
    return [float(line) for line in printed.getvalue().split()]


def test_the_section_has_its_three_examples_in_order():
    blocks = use_blocks()
    assert len(blocks) == 3
    assert "SliceDataset(windows)" in blocks[0] and "LeaveOneGroupOut()" in blocks[0]
    assert "StratifiedGroupKFold(5)" in blocks[1] and "GroupScorer()" in blocks[1]
    assert "PARSPretrainer(steps=3000)" in blocks[2]


def test_cross_validation_over_windows_runs_as_written():
    namespace = {}
    means = run(use_blocks()[0], namespace)
    assert len(means) == 2 and all(0 <= m <= 1 for m in means)
    # the probe's mean, against the same fits on the windows read as arrays
    data = read_windows(namespace["windows"])
    assert data.X.shape == (96, 19, 1000) and sorted(set(data.groups)) == [0, 1, 2, 3]
    assert means[1] == pytest.approx(loso_scores_on_arrays(namespace["windows"]).mean())


def test_the_group_scorer_example_runs_as_written_on_a_label_of_each_subject():
    # the example's label belongs to the subject (EEGMAT's count quality); the block runs
    # as written after the first block's imports, and its score is the one of the same
    # folds on the windows read as arrays
    from sklearn.model_selection import StratifiedGroupKFold

    from braindecode_pars.metrics import GroupScorer

    first = use_blocks()[0]
    imports = "\n".join(
        line for line in first.splitlines() if line.startswith(("from ", "import "))
    )
    namespace = {}
    exec(imports, namespace)
    (score,) = run(use_blocks()[1], namespace)
    meta = namespace["meta"]
    assert meta["count_quality"].groupby(meta["subject"]).nunique().max() == 1  # per subject
    data = read_windows(namespace["windows"])
    with sklearn.config_context(enable_metadata_routing=True):
        expected = cross_val_score(
            PARSProbe(sfreq=100), data.X, meta["count_quality"].to_numpy(),
            cv=StratifiedGroupKFold(5), scoring=GroupScorer(), params={"groups": data.groups},
        )  # fmt: skip
    assert score == pytest.approx(expected.mean())
    assert not sklearn.get_config()["enable_metadata_routing"]  # the test left it as it was


@pytest.mark.filterwarnings("ignore:Pretraining ended with a pretext skill")
def test_pretraining_then_the_encoder_question_runs_at_a_few_steps(tmp_path, monkeypatch):
    from skorch.helper import SliceDataset

    monkeypatch.chdir(tmp_path)  # the example saves its encoder in the working folder
    labelled = load_bundled_eegmat(subjects=list(BUNDLED_SUBJECTS[:3]))
    meta = labelled.get_metadata()
    namespace = {
        "X": SliceDataset(labelled),
        "y": meta["target"],
        "subjects": meta["subject"],
        "X_unlabeled": load_bundled_eegmat(subjects=list(BUNDLED_SUBJECTS[3:5])),
    }
    exec("from braindecode_pars import PARSClassifier, PARSProbe", namespace)
    block = use_blocks()[2]
    assert block.count("steps=3000") == 1
    skill, gain = run(block.replace("steps=3000", "steps=2"), namespace)
    assert skill < 1 and np.isfinite(gain)
    assert (tmp_path / "my-encoder" / "config.json").is_file()


def test_volts_and_microvolts_give_the_same_predictions_and_a_mix_warns():
    data = read_windows(load_bundled_eegmat(subjects=list(BUNDLED_SUBJECTS[:2])))
    microvolts = PARSProbe(sfreq=100).fit(data.X, data.y)
    volts = PARSProbe(sfreq=100).fit(data.X * 1e-6, data.y)
    np.testing.assert_allclose(
        microvolts.predict_proba(data.X), volts.predict_proba(data.X * 1e-6), atol=1e-6
    )
    with pytest.warns(UserWarning, match="scale|unit"):
        microvolts.predict(data.X * 1e-6)

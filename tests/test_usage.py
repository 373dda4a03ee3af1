"""The code of docs/usage.rst's section "From your own recordings to a nested search",
run as written, in order, on a small study of EDF files written here."""

import re
from pathlib import Path

import mne
import numpy as np
import pytest
import sklearn

from ._learning import SEED, learned

ROOT = Path(__file__).resolve().parents[1]
SECTION = "From your own recordings to a nested search"
SFREQ = 100.0
SUBJECTS = ("01", "02", "03", "04", "05", "06")

pytestmark = pytest.mark.usefixtures("one_thread")


def section_code(page=ROOT / "docs" / "usage.rst", title=SECTION):
    """The ``.. code-block:: python`` blocks of the section ``title``, dedented."""
    text = page.read_text()
    start = text.index(f"\n{title}\n")
    following = re.search(r"\n[^\n]+\n-{3,}\n", text[start + len(title) + 2 :])
    body = text[start : start + len(title) + 2 + (following.start() if following else len(text))]
    blocks = []
    for found in re.finditer(r"\.\. code-block:: python\n\n((?:(?:   [^\n]*)?\n)+)", body):
        lines = found[1].split("\n")
        blocks.append("\n".join(line[3:] for line in lines).rstrip() + "\n")
    return blocks


def write_study(root, seed=0):
    """``study/sub-XX/eeg/sub-XX_task-{rest,arith}_run-1.edf``: 60 s of 3 channels at
    100 Hz, a strong 10 Hz rhythm at rest (strongest at Pz), a weak one during
    arithmetic (each subject at its own amplitude); and ``study/participants.tsv``."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(60 * SFREQ)) / SFREQ
    for i, subject in enumerate(SUBJECTS):
        for task, alpha in (("rest", 3.0), ("arith", 0.5)):
            rhythm = alpha * np.array([[0.2], [0.6], [1.4]]) * np.sin(2 * np.pi * 10 * t)
            data = rng.standard_normal((3, len(t))) + rhythm  # strongest over Pz
            scale = 1e-5 * (1 + 0.3 * i)  # volts
            raw = mne.io.RawArray(
                scale * data, mne.create_info(["Fz", "Cz", "Pz"], SFREQ, "eeg"), verbose="error"
            )
            path = root / "study" / f"sub-{subject}" / "eeg"
            path.mkdir(parents=True, exist_ok=True)
            name = f"sub-{subject}_task-{task}_run-1.edf"
            mne.export.export_raw(path / name, raw, fmt="edf", verbose="error")
    groups = ["patient" if int(s) % 2 else "control" for s in SUBJECTS]
    rows = [f"sub-{s}\t{g}" for s, g in zip(SUBJECTS, groups, strict=True)]
    (root / "study" / "participants.tsv").write_text("participant_id\tgroup\n" + "\n".join(rows))


def test_the_section_has_its_three_examples():
    blocks = section_code()
    assert len(blocks) == 3
    assert "load_labelled_recordings" in blocks[0]
    assert "Pipeline" in blocks[1] and "pars__groups" in blocks[1]
    assert "GridSearchCV" in blocks[2] and "enable_metadata_routing=True" in blocks[2]


def test_the_sections_code_runs_as_written(tmp_path, monkeypatch):
    write_study(tmp_path, seed=SEED)  # the models' seeds are the page's
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "usage"}
    for block in section_code():
        exec(compile(block, "docs/usage.rst", "exec"), namespace)
    assert not sklearn.get_config()["enable_metadata_routing"]  # left as it was
    windows, y, groups = namespace["windows"], namespace["y"], namespace["groups"]
    # 12 files of 60 s: 6 windows of 10 s each, in microvolts, labelled by their names
    assert windows.X.shape == (72, 3, 1000)
    assert sorted(set(y)) == ["arith", "rest"] and (y == "rest").sum() == 36
    assert sorted(set(groups)) == list(SUBJECTS)
    assert 5 < np.sqrt(np.mean(windows.X[groups == "01"] ** 2)) < 100
    by_subject = namespace["by_subject"]
    expected = np.where(np.isin(groups, ["01", "03", "05"]), "patient", "control")
    np.testing.assert_array_equal(by_subject.y, expected)
    np.testing.assert_array_equal(by_subject.groups, np.char.add("sub-", groups.astype(str)))
    # rest and arithmetic differ by their 10 Hz rhythm: every fold well above chance
    assert namespace["scores"].shape == (3,) and namespace["nested"].shape == (3,)
    learned(namespace["scores"].min(), above=0.9, what="worst fold")
    learned(namespace["nested"].min(), above=0.9, what="worst fold, nested search")
    assert any(Path("feature_cache").rglob("output.pkl"))  # the features were cached

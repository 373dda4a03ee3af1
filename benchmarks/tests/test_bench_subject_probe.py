"""The subject-probe benchmark: its protocol on data built for it (a feature that encodes
the subject, noise, a feature that only memorises windows), its random encoder, its
report, and a tiny run of the script."""

import numpy as np
import pytest
import torch

from benchmarks import bench_subject_probe
from benchmarks.lib import subject_probe
from braindecode_pars import load_encoder
from tests._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")


def built(n_subjects=3, n_recordings=2, n_windows=30, n_chans=2, n_times=200, seed=0):
    """:class:`ProbeData` of noise windows: each subject's recordings in the order of
    time, the label alternating within each recording."""
    rng = np.random.default_rng(seed)
    n = n_subjects * n_recordings * n_windows
    subjects = np.repeat(np.arange(n_subjects), n_recordings * n_windows)
    recordings = np.repeat(np.arange(n_subjects * n_recordings), n_windows)
    return subject_probe.ProbeData(
        name="built",
        X=rng.standard_normal((n, n_chans, n_times)).astype(np.float32),
        y=np.tile([0, 1], n // 2),
        subjects=subjects,
        recordings=recordings,
        label_groups=subjects,
        label_across="subjects",
        sfreq=100.0,
    )


def subject_offset(data, seed=1):
    """Features that encode the subject: a per-subject offset (4 apart on its own axis)
    plus unit noise."""
    rng = np.random.default_rng(seed)
    offsets = 4.0 * np.eye(data.n_subjects, 4)

    def features(X, sfreq):
        return rng.standard_normal((len(X), 4)) + offsets[data.subjects]

    return features


def noise(X, sfreq, seed=2):
    return np.random.default_rng(seed).standard_normal((len(X), 4))


def test_subject_identity_from_a_subject_feature_is_near_one_and_from_noise_near_chance():
    data = built(seed=SEED)
    score = subject_probe.score(data, subject_offset(data, seed=SEED + 1))["subject"]
    learned(score, above=0.95, what="subject from its offset")
    chance = subject_probe.score(data, lambda X, sfreq: noise(X, sfreq, seed=SEED + 2))["subject"]
    learned(abs(chance - 1 / 3), below=0.15, what="subject from noise, off chance")
    # the label rides on neither
    label = subject_probe.score(data, subject_offset(data, seed=SEED + 1))["label"]
    learned(abs(label - 0.5), below=0.15, what="label from the subject's offset, off chance")


def test_no_window_of_the_second_half_is_in_the_training_set():
    """Features that tell every window apart and nothing else (one column per window): a
    probe trained on a window predicts that window's subject, one that never saw it
    can only guess. The probe scores exactly chance: no window it is scored on was in
    its training set."""
    data = built(n_windows=10)
    one_hot = subject_probe.score(data, lambda X, sfreq: np.eye(len(X)))
    assert one_hot["subject"] == pytest.approx(1 / data.n_subjects)
    # the same probe scored on the windows it was trained on would find every subject
    from braindecode_pars.pretraining.monitor import probe_classifier

    fitted = probe_classifier().fit(np.eye(len(data.X)), data.subjects)
    assert (fitted.predict(np.eye(len(data.X))) == data.subjects).all()


def test_one_subject_gets_the_label_probe_only_and_the_report_says_so():
    data = built(n_subjects=1, n_recordings=3)
    data.label_groups, data.label_across = data.recordings, "blocks of runs"
    result = subject_probe.score(data, noise)
    assert result["subject"] is None and 0 <= result["label"] <= 1
    rows = [{"dataset": "built", "features": "noise", **result}]
    text = "\n".join(subject_probe.report_lines(rows, [data], command="c", machine="m", date="d"))
    assert "One subject: the subject probe needs several" in text
    assert "| noise | not measured |" in text and "| chance | - | 0.500 | |" in text


def test_the_random_encoder_is_the_default_encoders_size_and_seeded():
    shipped = load_encoder("pars-small-v2")
    state = torch.get_rng_state()
    a, b = subject_probe.random_encoder(seed=0), subject_probe.random_encoder(seed=0)
    assert torch.equal(torch.get_rng_state(), state)  # torch's generator untouched
    assert a.config == shipped.config and a.sfreq == shipped.sfreq
    same = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in same)
    assert not torch.equal(a.tokenizer.weight, shipped.tokenizer.weight)
    other = subject_probe.random_encoder(seed=1)
    assert not torch.equal(a.tokenizer.weight, other.tokenizer.weight)


def test_a_quick_run_writes_a_table_of_every_feature_set(tmp_path):
    out = tmp_path / "subject_probe.md"
    rows = bench_subject_probe.main(["--quick", "--out", str(out)])
    text = out.read_text()
    names = list(subject_probe.feature_sets())
    assert [row["features"] for row in rows] == names
    for name in names:
        assert f"| {name} | " in text
    assert "| chance | 0.333 | 0.500 | |" in text
    assert "python -m benchmarks.bench_subject_probe --quick --out" in text
    # the table holds the scores of the library's probes on the same windows
    data = subject_probe.eegmat_bundled(
        bench_subject_probe.QUICK_SUBJECTS, bench_subject_probe.QUICK_WINDOWS
    )
    assert data.n_subjects == 3 and len(data.X) == 3 * 2 * 4
    band = subject_probe.score(data, subject_probe.feature_sets()["log band power"])
    assert rows[0]["subject"] == band["subject"] and rows[0]["label"] == band["label"]
    # an encoder of one's own (a saved folder) is read like a shipped one
    folder = tmp_path / "saved"
    subject_probe.random_encoder(seed=5).save_pretrained(folder)
    rows = bench_subject_probe.main(["--quick", "--encoders", str(folder)])
    assert [row["features"] for row in rows][1] == f"`{folder}`"
    assert len(rows) == 3  # band power, that encoder, the random one

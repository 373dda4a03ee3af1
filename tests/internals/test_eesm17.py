import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer
from braindecode_pars.datasets.eesm17 import (
    EESM17_EAR_CHANNELS,
    EESM17_STAGES,
    ChannelNoise,
    _channel_noise,
    _leave_one_subject_out,
    load_eesm17,
)

from ..conftest import SMALL_ENCODER


def test_bids_recordings_give_ear_eeg_sleep_stage_windows(eesm17):
    root, stages = eesm17
    windows = load_eesm17(root)
    md = windows.get_metadata()
    expected = [EESM17_STAGES[s] for sub in sorted(stages) for s in stages[sub] if s != "invalid"]
    assert md.target.tolist() == expected  # the invalid epoch is left out
    X, _, _ = windows[0]
    assert X.shape == (12, 6000)  # 12 ear channels, 30 s at 200 Hz (EOG left out)
    raw = windows.datasets[2].raw
    assert tuple(raw.ch_names) == EESM17_EAR_CHANNELS  # matched without regard to case
    assert raw.info["sfreq"] == 200 and raw.info["highpass"] == pytest.approx(0.3)
    freqs = np.fft.rfftfreq(raw.n_times, 1 / 200)
    power = (np.abs(np.fft.rfft(raw.get_data(), axis=1)) ** 2).mean(0)
    near = (np.abs(freqs - 50) > 2) & (np.abs(freqs - 50) < 6)
    assert power[np.abs(freqs - 50) < 0.3].mean() < 0.1 * power[near].mean()  # 50 Hz notch
    assert sorted(windows.description.subject) == ["001", "002", "003"]


def test_leave_one_subject_out_folds(eesm17):
    root, _ = eesm17
    windows = load_eesm17(root)
    folds = list(_leave_one_subject_out(windows))
    assert [s for s, _, _ in folds] == ["001", "002", "003"]
    for subject, train, test in folds:
        assert set(test.description.subject) == {subject}
        assert subject not in set(train.description.subject)


def test_subject_selection_custom_stage_names_and_errors(eesm17, tmp_path):
    root, _ = eesm17
    only = load_eesm17(root, subjects=["002"], stages={"REM": 0, "W": 1})
    assert only.get_metadata().target.tolist() == [0, 1]
    with pytest.raises(FileNotFoundError, match="is not a BIDS dataset"):
        load_eesm17(tmp_path)
    with pytest.raises(ValueError, match=r"lacks the channels \['EXX'\]"):
        load_eesm17(root, subjects=["001"], channels=("ELA", "EXX"))
    with pytest.raises(ValueError, match="needs two subjects"):
        next(_leave_one_subject_out(only))


def test_channel_noise_touches_only_chosen_channels_at_the_set_level():
    X = torch.randn(64, 12, 1000) * 5
    out, _ = _channel_noise(X.clone(), None, std=0.5, channel_probability=0.25, random_state=0)
    changed = (out - X).abs().amax(dim=-1) > 0
    assert 0.2 < changed.float().mean() < 0.3  # about a quarter of the channels
    ratio = (out - X)[changed].std(dim=-1) / X[changed].std(dim=-1)
    assert ratio.mean().item() == pytest.approx(0.5, rel=0.05)  # relative to each channel
    aug = ChannelNoise(probability=1.0, std=0.5, channel_probability=1.0, random_state=0)
    assert not torch.equal(aug(X)[0] if isinstance(aug(X), tuple) else aug(X), X)
    with pytest.raises(ValueError, match="'channel_probability' must lie in"):
        ChannelNoise(channel_probability=2)


def test_estimator_fine_tunes_with_the_augmentation(eesm17):
    root, _ = eesm17
    windows = load_eesm17(root, stages={"W": 0, "N1": 1, "N2": 2, "N3": 3})  # 2+ per class
    seen = []

    class Recording(ChannelNoise):
        def forward(self, X, y=None):
            seen.append(X.shape)
            return super().forward(X, y)

    head = PARSFineTuner(
        augmentation=[Recording(probability=1.0)], max_epochs=2, batch_size=4, verbose=0
    )
    clf = PARSClassifier(  # a new small encoder, every weight trained
        encoder=PARSPretrainer(max_epochs=0, **SMALL_ENCODER), head=head, random_state=0, verbose=0
    )
    clf.fit(windows)
    assert clf.head_.n_crop_ == 6000  # whole 30-s sleep epochs (200 Hz), never cut by default
    assert seen and all(shape[1:] == (12, 6000) for shape in seen)
    assert clf.predict(windows[0][0][None]).shape == (1,)


def test_fetch_needs_openneuro_py_and_names_it(tmp_path, monkeypatch):
    import builtins

    from braindecode_pars.datasets.eesm17 import fetch_eesm17

    real_import = builtins.__import__

    def no_openneuro(name, *args, **kwargs):
        if name == "openneuro":
            raise ImportError("No module named 'openneuro'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openneuro)
    with pytest.raises(ImportError, match="pip install openneuro-py"):
        fetch_eesm17(tmp_path)


def test_fetch_asks_openneuro_for_ds004348(tmp_path, monkeypatch):
    import sys
    import types

    from braindecode_pars.datasets.eesm17 import fetch_eesm17

    calls = []
    fake = types.ModuleType("openneuro")
    fake.download = lambda **kwargs: calls.append(kwargs)
    monkeypatch.setitem(sys.modules, "openneuro", fake)
    assert fetch_eesm17(tmp_path, subjects=["001"]) == tmp_path
    assert calls == [{"dataset": "ds004348", "target_dir": str(tmp_path), "include": ["sub-001"]}]


def test_cached_windows_equal_those_in_memory_and_keep_subject_labels(eesm17, tmp_path):
    root, _ = eesm17
    memory = load_eesm17(root)
    cached = load_eesm17(root, cache_dir=tmp_path / "cache")
    assert not any(ds.raw.preload for ds in cached.datasets)
    assert cached.description.subject.tolist() == ["001", "002", "003"]  # strings, as read
    assert cached.get_metadata().target.tolist() == memory.get_metadata().target.tolist()
    for i in (0, len(memory) - 1):
        np.testing.assert_allclose(cached[i][0], memory[i][0], rtol=1e-6)
    assert [s for s, _, _ in _leave_one_subject_out(cached)] == ["001", "002", "003"]
    with pytest.raises(FileExistsError, match=r"they differ in \['stages'\]"):
        load_eesm17(root, stages={"W": 0, "N2": 1}, cache_dir=tmp_path / "cache")

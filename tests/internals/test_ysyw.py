import json

import mne
import numpy as np
import pytest
import wfdb
from braindecode.datasets import BaseConcatDataset

import braindecode_pars.datasets.ysyw as ysyw_module
from braindecode_pars.datasets.ysyw import (
    SLEEP_STAGES,
    YSYW_CHANNELS,
    _load_ysyw_pretraining,
    _read_ysyw_record,
    _ysyw_subject_split,
    load_ysyw,
    ysyw_split,
)

from ..ysyw_fixtures import write_record


def test_record_reads_six_eeg_channels_in_volts_and_the_stages(ysyw):
    root, stages = ysyw
    raw = _read_ysyw_record(root / "training" / "tr03-0005")
    assert tuple(raw.ch_names) == YSYW_CHANNELS and raw.info["sfreq"] == 200
    assert 1e-7 < np.std(raw.get_data()) < 1e-3  # volts, as MNE expects
    ann = raw.annotations
    assert list(ann.description) == stages["tr03-0005"]  # arousals left out
    np.testing.assert_allclose(ann.onset, [0.005, 30.005, 60.005, 90.005])
    assert set(ann.duration) == {30.0}


def test_an_epoch_cut_by_the_end_of_the_recording_is_left_out(tmp_path):
    folder = write_record(tmp_path, "tr09-0001", ["W", "N1"], arousal=False)
    # shorten the record to 59 s: the second epoch no longer fits
    rec = wfdb.rdrecord(str(folder / "tr09-0001"))
    assert rec.sig_len == 2 * 6000 + 200
    wfdb.wrsamp(
        "tr09-0001",
        fs=200,
        units=rec.units,
        sig_name=rec.sig_name,
        p_signal=rec.p_signal[:11800],
        fmt=["16"] * 6,
        write_dir=str(folder),
    )
    (folder / "tr09-0001.mat").unlink()
    raw = _read_ysyw_record(folder)
    assert list(raw.annotations.description) == ["W"]


def test_windows_carry_the_five_stages_and_drop_undefined(ysyw):
    root, stages = ysyw
    windows = load_ysyw(root)
    md = windows.get_metadata()
    expected = [SLEEP_STAGES[s] for r in sorted(stages) for s in stages[r] if s != "undefined"]
    assert md.target.tolist() == expected  # 19 epochs: the undefined one is left out
    X, y, _ = windows[0]
    assert X.shape == (6, 6000)
    raw = windows.datasets[0].raw
    assert raw.info["highpass"] == pytest.approx(0.3) and raw.info["lowpass"] == pytest.approx(75)
    assert 1 < np.std(raw.get_data()) < 1e4  # microvolts after preprocessing


def test_split_is_sixty_twenty_twenty_of_the_annotated_patients(ysyw):
    root, stages = ysyw
    split = _ysyw_subject_split(root, random_state=3)
    assert [len(split[k]) for k in ("train", "valid", "test")] == [3, 1, 1]
    assert sorted(sum(split.values(), [])) == sorted(stages)
    assert split == _ysyw_subject_split(root, random_state=3)
    windows = load_ysyw(root, records=split["valid"])
    assert list(windows.description.record) == split["valid"]


def test_pretraining_uses_both_sets_but_not_held_out_patients(ysyw):
    root, _ = ysyw
    split = _ysyw_subject_split(root, random_state=0)
    held_out = split["valid"] + split["test"]
    windows = _load_ysyw_pretraining(root, exclude_records=held_out)
    records = set(windows.description.record)
    assert {"te03-0001", "te05-0047"} <= records
    assert not records & set(held_out)
    assert windows[0][0].shape == (6, 6000)


def test_errors_name_what_is_wrong(ysyw, tmp_path):
    root, _ = ysyw
    with pytest.raises(FileNotFoundError, match="YSYW training folder"):
        load_ysyw(tmp_path)
    with pytest.raises(ValueError, match=r"Records \['tr99-0001'\] are not under"):
        load_ysyw(root, records=["tr99-0001"])
    with pytest.raises(ValueError, match="three numbers summing to 1"):
        _ysyw_subject_split(root, fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="lacks the signals"):
        _read_ysyw_record(root / "training" / "tr03-0005", channels=("Fp1-M2",))


def test_fetch_delegates_to_braindecode_and_returns_the_root(tmp_path, monkeypatch):
    import braindecode.datasets.sleep_physio_challe_18 as pc18

    from braindecode_pars.datasets.ysyw import fetch_ysyw

    calls = []

    def fake_fetch(subjects, path=None):  # braindecode's return: [mat, hea, arousal] per record
        calls.append((subjects, path))
        rec = tmp_path / "pc18-sleep-data" / "training" / "tr03-0005"
        return [[str(rec / "tr03-0005.mat"), str(rec / "tr03-0005.hea"), None]]

    monkeypatch.setattr(pc18, "fetch_pc18_data", fake_fetch)
    assert fetch_ysyw([989], path=str(tmp_path)) == tmp_path / "pc18-sleep-data"
    assert calls == [([989], str(tmp_path))]


def _refuse(*args, **kwargs):
    raise AssertionError("called although the file says it all")


def test_the_split_is_written_once_then_read_from_its_file(ysyw, tmp_path, monkeypatch):
    root, stages = ysyw
    file = tmp_path / "split.json"
    split = ysyw_split(root, file, random_state=3)
    assert split == _ysyw_subject_split(root, random_state=3)
    content = json.loads(file.read_text())
    assert content["random_state"] == 3 and content["records"] == split

    monkeypatch.setattr(ysyw_module, "_ysyw_subject_split", _refuse)
    assert ysyw_split(root, file, random_state=3) == split  # read, not drawn again
    with pytest.raises(
        ValueError,
        match=r"'random_state'=0 differs from the split file '.*split\.json', drawn with "
        r"random_state=3; pass random_state=3",
    ):
        ysyw_split(root, file)

    by_hand = tmp_path / "by_hand.json"  # a split written by hand: read as it is
    parts = {"train": ["tr03-0005", "tr03-0029"], "valid": ["tr04-0014"], "test": []}
    by_hand.write_text(json.dumps({"records": parts}))
    with pytest.raises(ValueError, match=r"\['tr05-1034', 'tr07-0168'\] \(2 in all\) are in no"):
        ysyw_split(root, by_hand)
    parts["test"] = ["tr05-1034", "tr07-0168"]
    by_hand.write_text(json.dumps({"records": parts}))
    assert ysyw_split(root, by_hand, random_state=5) == parts  # no seed in the file
    parts["valid"].append("tr03-0005")
    by_hand.write_text(json.dumps({"records": parts}))
    with pytest.raises(ValueError, match=r"puts \['tr03-0005'\] in two parts"):
        ysyw_split(root, by_hand)
    by_hand.write_text("not json")
    with pytest.raises(ValueError, match="is not a YSYW split file"):
        ysyw_split(root, by_hand)


def test_cached_windows_are_lazy_float32_and_equal_those_in_memory(ysyw, tmp_path, monkeypatch):
    root, _ = ysyw
    records = ["tr03-0005", "tr04-0014"]
    memory = load_ysyw(root, records=records)
    cached = load_ysyw(root, records=records, cache_dir=tmp_path / "cache")
    assert not any(ds.raw.preload for ds in cached.datasets)  # read from disk as used
    fif = sorted((tmp_path / "cache").rglob("*-raw.fif"))
    assert len(fif) == 2 and mne.io.read_raw_fif(fif[0], verbose="error").orig_format == "single"
    md, md_cached = memory.get_metadata(), cached.get_metadata()
    assert md_cached.target.tolist() == md.target.tolist()
    assert md_cached.record.tolist() == md.record.tolist()
    assert len(cached) == len(memory) == 7
    for i in range(len(memory)):
        x, y, _ = cached[i]
        np.testing.assert_allclose(x, memory[i][0], rtol=1e-6)
        assert y == memory[i][1]

    monkeypatch.setattr(ysyw_module, "_read_ysyw_record", _refuse)
    again = load_ysyw(root, records=records, cache_dir=tmp_path / "cache")
    assert len(again) == 7  # the folder is read as it is
    with pytest.raises(FileExistsError, match=r"other settings \(they differ in \['records'\]\)"):
        load_ysyw(root, records=["tr03-0005"], cache_dir=tmp_path / "cache")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds files that are not a cache"):
        load_ysyw(root, records=records, cache_dir=tmp_path / "other")


def test_pretraining_stream_reads_one_record_at_a_time_as_the_reader_does(ysyw):
    root, _ = ysyw
    held_out = ["tr03-0029", "tr05-1034"]
    memory = _load_ysyw_pretraining(root, exclude_records=held_out)
    stream = _load_ysyw_pretraining(root, exclude_records=held_out, lazy=True)
    assert len(stream) == 5
    streamed = BaseConcatDataset([ds for windows in stream for ds in windows.datasets])
    assert streamed.description.record.tolist() == memory.description.record.tolist()
    assert len(streamed) == len(memory)
    for i in (0, len(memory) - 1):
        np.testing.assert_array_equal(streamed[i][0], memory[i][0])

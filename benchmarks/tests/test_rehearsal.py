"""The scale rehearsal and its parts at a tiny size: the page cache dropped and measured,
the synthetic TUEG tree and the whole rehearsal (slow)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import rehearsal_tueg
from benchmarks.lib import page_cache
from benchmarks.lib import tueg_tree as tree_module
from braindecode_pars.datasets.tuh import TUH_CHANNELS_19, read_tuh_edf

ROOT = Path(__file__).resolve().parents[2]


def test_dropping_a_files_pages_evicts_them_and_mincore_sees_it(tmp_path):
    path = tmp_path / "data.bin"
    np.random.default_rng(0).standard_normal(8 << 20).tofile(path)  # 64 MB, just written
    path.read_bytes()
    assert page_cache.cached_fraction(path) == 1.0
    page_cache.drop_cached_pages(path)
    assert page_cache.cached_fraction(path) < 0.02
    with open(path, "rb") as f:  # its first 4 MB read back, and what read-ahead takes
        f.read(4 << 20)
    assert 0.06 <= page_cache.cached_fraction(path) < 0.5


def test_the_synthetic_tree_is_laid_out_and_read_as_tueg(tmp_path):
    summary = tree_module.make_tree(tmp_path, gb=0.006, minutes=(0.5, 1.0), seed=1)
    files = sorted(Path(summary["edf"]).rglob("*.edf"))
    assert len(files) == summary["files"] and summary["files"] >= 5
    assert sum(f.stat().st_size for f in files) == summary["bytes"] >= 0.006e9
    assert summary["truncated"] and summary["unreadable"]
    layout = re.compile(
        r"tuh_eeg/v2\.0\.0/edf/\d{3}/(?P<s>[a-z]{8})/s\d{3}_\d{4}_\d{2}_\d{2}/"
        r"(01_tcp_ar|02_tcp_le|03_tcp_ar_a)/(?P=s)_s\d{3}_t\d{3}\.edf$"
    )
    rates = set()
    for f in files:
        assert layout.search(f.as_posix()), f  # TUH's names: subject_sNNN_tNNN.edf
        if str(f) in summary["unreadable"]:
            with pytest.raises(ValueError):
                read_tuh_edf(f)
            continue
        raw = read_tuh_edf(f, preload=True)  # the reader's 19 channels, in its order
        assert raw.ch_names == list(TUH_CHANNELS_19)
        assert 5e-6 < raw.get_data().std() < 2e-4  # EEG in volts once read
        rates.add(raw.info["sfreq"])
        le = "02_tcp_le" in f.as_posix()
        names = read_tuh_edf.__globals__["mne"].io.read_raw_edf(f, verbose="error").ch_names
        assert all(n.endswith("-LE") == le for n in names if n.startswith("EEG"))
        if "03_tcp_ar_a" in f.as_posix():
            assert not {"EEG A1-REF", "EEG A2-REF"} & set(names)
    assert len(rates) >= 2


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.faults  # make test-faults
def test_the_rehearsal_stores_reads_and_pretrains_each_killed_and_resumed(tmp_path):
    rehearsal = rehearsal_tueg
    results = tmp_path / "rehearsal.md"
    argv = ["--work", str(tmp_path / "work"), "--gb", "0.012", "--minutes", "1", "2",
            "--crops", "600", "--steps", "160", "--batch-size", "4", "--encoder", "tiny",
            "--results", str(results)]  # fmt: skip
    done = rehearsal.main(argv)
    tree, store, read, train = (done[s] for s in ("tree", "store", "read", "pretrain"))
    # the store: killed with part of the recordings in its journal, resumed to the end;
    # the files cut in their header are skipped and named, those cut short are stored
    assert store["killed"] and 0 < store["recordings_at_kill"] < tree["files"]
    assert sorted(store["skipped"]) == sorted(tree["unreadable"])
    assert store["n_recordings"] == tree["files"] - len(tree["unreadable"])
    assert store["jobs"] == 2 and store["hours_per_tb_edf"] > 0
    assert all(r["cached_before"] == (r["cache"] == "warm") for r in read["rows"])
    # pretraining: killed after its first saved epoch, resumed from it, finished
    assert train["killed"] and train["resumed"] and train["finished"]
    assert 1 <= train["epochs_at_kill"] < train["epochs"] and train["steps"] >= 160
    text = results.read_text()
    assert "## Extrapolation to TUEG" in text and "hours per TB of EDF" in text
    assert (tmp_path / "work" / "rehearsal.log").stat().st_size > 0
    # run again: every stage is done, nothing is redone
    again = rehearsal.main(argv)
    assert json.dumps(again["store"]) == json.dumps(store)
    assert again["report"]["stage_seconds"] == done["report"]["stage_seconds"]

import json
import logging

import numpy as np
import pytest
import torch

from benchmarks.lib.paper_datasets import load_recipe
from braindecode_pars.datasets.corpus import pretraining_corpus
from braindecode_pars.datasets.tuh import _tuh_subjects
from braindecode_pars.datasets.ysyw import _ysyw_subject_split
from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.store import read_window_store, write_window_store


@pytest.fixture(scope="module")
def sources(ysyw, tuh_corpora):
    """The arguments of pretraining_corpus: every source's folder."""
    return {"ysyw_path": ysyw[0], **{f"{k}_path": v for k, v in tuh_corpora.items()}}


def test_corpus_combines_sources_without_any_fine_tuning_test_patient(sources, tmp_path):
    corpus = pretraining_corpus(**sources)
    desc = corpus.description
    assert set(desc.source) == {"ysyw", "tueg"}
    split = _ysyw_subject_split(sources["ysyw_path"])
    ysyw_records = set(desc.loc[desc.source == "ysyw", "record"])
    assert not ysyw_records & set(split["valid"] + split["test"])
    assert {"te03-0001", "te05-0047"} <= ysyw_records  # unannotated patients are in
    tueg_subjects = set(desc.loc[desc.source == "tueg", "subject"])
    finetuning = set(_tuh_subjects(sources["tuab_path"]) + _tuh_subjects(sources["tusz_path"]))
    assert tueg_subjects == {"aaaaaaax"} and not tueg_subjects & finetuning

    # one view over 6-channel YSYW and 19-channel TUEG recordings, and as a store
    view = SingleChannelWindows(corpus)
    torch.manual_seed(0)
    assert all(view[i][0].shape == (1, 6000) for i in range(len(view)))
    write_window_store(corpus, tmp_path / "store")
    stored = SingleChannelWindows.from_store(tmp_path / "store")
    assert sorted(r.shape[0] for r in stored.recordings) == sorted(
        r.shape[0] for r in view.recordings
    )


def test_corpus_needs_a_source():
    with pytest.raises(ValueError, match="at least one of 'ysyw_path' and 'tueg_path'"):
        pretraining_corpus()


@pytest.mark.parametrize(
    "given, missing",
    [
        pytest.param((), r"'tuab_path' and 'tusz_path' missing", id="neither"),
        pytest.param(("tuab",), r"'tusz_path' missing", id="no TUSZ"),
        pytest.param(("tusz",), r"'tuab_path' missing", id="no TUAB"),
    ],
)
def test_a_corpus_with_test_patients_is_refused_unless_allowed(tuh_corpora, caplog, given, missing):
    paths = {f"{name}_path": tuh_corpora[name] for name in given}
    with pytest.raises(ValueError, match=missing + r".*or allow_test_patients=True to pretrain"):
        pretraining_corpus(tueg_path=tuh_corpora["tueg"], **paths)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.datasets.corpus"):
        corpus = pretraining_corpus(
            tueg_path=tuh_corpora["tueg"], allow_test_patients=True, **paths
        )
    assert any("test patients included" in r.getMessage() for r in caplog.records)
    kept = set(corpus.description.subject)
    assert "aaaaaaax" in kept
    assert ("aaaaaaaa" in kept) == ("tuab" not in given)  # a TUAB patient
    assert ("aaaaaaac" in kept) == (given == ())  # a TUAB and TUSZ patient


def test_the_corpus_and_the_recipe_read_the_same_split_file(ysyw, tmp_path):
    root, _ = ysyw
    file = tmp_path / "split.json"
    drawn = _ysyw_subject_split(root, random_state=0)
    # a split that the seed would not give: every patient the seed trains on is tested on
    parts = {"train": drawn["valid"] + drawn["test"], "valid": [], "test": drawn["train"]}
    file.write_text(json.dumps({"records": parts}))
    corpus = pretraining_corpus(ysyw_path=root, ysyw_split_file=file)
    records = set(corpus.description.record)
    assert records == set(parts["train"]) | {"te03-0001", "te05-0047"}
    recipe = load_recipe("ysyw", root, split_file=file)
    assert sorted(set(recipe["test"].description.record)) == sorted(parts["test"])
    assert list(recipe) == ["train", "test"]  # an empty part is left out, as for TUH
    assert not records & set(recipe["test"].description.record)


def test_a_lazy_corpus_writes_the_same_store_as_the_corpus_in_memory(sources, tmp_path):
    stream = pretraining_corpus(**sources, lazy=True)
    assert len(stream) == 5 + 1  # YSYW: 3 train and 2 test-set records; TUEG: 1 patient
    write_window_store(stream, tmp_path / "stream")
    write_window_store(pretraining_corpus(**sources), tmp_path / "memory")
    a, index_a, info_a = read_window_store(tmp_path / "stream")
    b, index_b, info_b = read_window_store(tmp_path / "memory")
    np.testing.assert_array_equal(index_a, index_b)
    # the stream's files are fingerprinted for a resumed build; windows in memory have none
    assert info_a["build"].pop("source") is not None and info_b["build"].pop("source") is None
    assert info_a == info_b
    assert [r["description"]["source"] for r in info_a["recordings"]] == ["ysyw"] * 5 + ["tueg"]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)

import pytest
import torch

from braindecode_pars.datasets import (
    SingleChannelWindows,
    pretraining_corpus,
    write_window_store,
    ysyw_subject_split,
)
from braindecode_pars.datasets.tuh import tuh_subjects


@pytest.fixture(scope="module")
def sources(ysyw, tuh_corpora):
    """The arguments of pretraining_corpus: every source's folder."""
    return {"ysyw_path": ysyw[0], **{f"{k}_path": v for k, v in tuh_corpora.items()}}


def test_corpus_combines_sources_without_any_fine_tuning_test_patient(sources, tmp_path):
    corpus = pretraining_corpus(**sources)
    desc = corpus.description
    assert set(desc.source) == {"ysyw", "tueg"}
    split = ysyw_subject_split(sources["ysyw_path"])
    ysyw_records = set(desc.loc[desc.source == "ysyw", "record"])
    assert not ysyw_records & set(split["valid"] + split["test"])
    assert {"te03-0001", "te05-0047"} <= ysyw_records  # unannotated patients are in
    tueg_subjects = set(desc.loc[desc.source == "tueg", "subject"])
    finetuning = set(tuh_subjects(sources["tuab_path"]) + tuh_subjects(sources["tusz_path"]))
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


def test_store_command_writes_the_paper_corpus(sources, tmp_path):
    from braindecode_pars.cli import main

    main(
        [
            "store",
            "--out",
            str(tmp_path / "store"),
            "--ysyw",
            str(sources["ysyw_path"]),
            "--tueg",
            str(sources["tueg_path"]),
            "--tuab",
            str(sources["tuab_path"]),
            "--tusz",
            str(sources["tusz_path"]),
        ]
    )
    view = SingleChannelWindows.from_store(tmp_path / "store")
    assert len(view.recordings) == len(pretraining_corpus(**sources).datasets)

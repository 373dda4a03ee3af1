"""The published OpenEEG-Bench rows of docs/oeb.rst: the table is written from the
per-seed transcription, and the transcription holds the source's known values."""

import pandas as pd

from benchmarks import oeb_reference


def test_the_published_table_is_the_transcription_summarised():
    bench = oeb_reference
    df = pd.read_csv(bench.RESULTS / "oeb_published_reference.csv")
    table = (bench.RESULTS / "oeb_published_reference.md").read_text()
    assert "\n".join(bench.reference_table(df)) in table
    # three seeds per network and dataset, one for REVE; every score a balanced accuracy
    counts = df.groupby(["backbone", "dataset"]).seed.nunique()
    assert set(counts.drop("REVE", level="backbone")) == {3}
    assert set(counts.loc["REVE"]) == {1}
    assert df.test_balanced_accuracy.between(0, 1).all()


def test_the_transcription_against_the_source_by_hand():
    """Values read off the source files (naive arithmetic on three seeds)."""
    bench = oeb_reference
    df = pd.read_csv(bench.RESULTS / "oeb_published_reference.csv").set_index(
        ["backbone", "dataset", "seed"]
    )
    acc = df.test_balanced_accuracy
    eegnet_physionet = (0.5970313314884326 + 0.6043459520753374 + 0.6026606220424154) / 3
    assert abs(acc.loc["EEGNet", "physionet"].mean() - eegnet_physionet) < 1e-12
    assert abs(eegnet_physionet - 0.601) < 5e-4
    assert abs(acc.loc["ShallowFBCSPNet", "arithmetic_zyma2019"].mean() - 0.7315) < 5e-4
    assert acc.loc[("REVE", "tuab", 0)] == 0.809

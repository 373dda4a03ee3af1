"""The development-task benchmark's summaries: each distinct labelled set counts once,
and the test tables' floor is the one the selection split chose."""

import pandas as pd
import pytest

from benchmarks import bench_dev_tasks
from benchmarks.lib import dev_probe, dev_tasks


@pytest.fixture(scope="module")
def bench():
    return bench_dev_tasks


def _rows(task, method, k, units_and_scores):
    return [
        dict(task=task, method=method, k=k, seed=i, units=u, balanced_accuracy=v, kappa=v)
        for i, (u, v) in enumerate(units_and_scores)
    ]


def test_seeds_that_draw_the_same_set_count_once(bench):
    # five seeds over two blocks: block 1 three times (0.4), block 2 twice (0.8)
    df = pd.DataFrame(
        _rows("mi", "floor", "1", [("1", 0.4), ("2", 0.8), ("1", 0.4), ("2", 0.8), ("1", 0.4)])
        # one set, two seeds with their own training randomness
        + _rows("mi", "deep", "all", [("1 2", 0.5), ("1 2", 0.7)])
        # a set drawn twice with different results is averaged before the spread
        + _rows("eeg", "floor", "1", [("3", 0.6), ("3", 0.8), ("5", 0.5)])
    )
    s = dev_tasks.draw_summary(df, "balanced_accuracy").set_index(["task", "method", "k"])
    mi = s.loc[("mi", "floor", "1")]
    assert mi["mean"] == pytest.approx(0.6)  # not 0.56, the 3:2-weighted mean
    assert mi["std"] == pytest.approx(pd.Series([0.4, 0.8]).std())
    assert (mi["sets"], mi["draws"]) == (2, 5)
    deep = s.loc[("mi", "deep", "all")]
    assert deep["mean"] == pytest.approx(0.6)
    assert deep["std"] == pytest.approx(pd.Series([0.5, 0.7]).std())
    assert deep["sets"] == 1
    eeg = s.loc[("eeg", "floor", "1")]
    assert eeg["mean"] == pytest.approx((0.7 + 0.5) / 2)


def test_the_test_tables_take_the_floor_the_selection_split_chose(bench, tmp_path):
    selection = pd.DataFrame(
        # band power is better on 'a' once the duplicated draw of block 1 counts once
        _rows("a", "floor (band power)", "1", [("1", 0.5), ("2", 0.9), ("1", 0.5)])
        + _rows("a", "floor (tangent space)", "1", [("1", 0.68), ("2", 0.68), ("1", 0.68)])
        + _rows("b", "floor (band power)", "1", [("1", 0.5)])
        + _rows("b", "floor (tangent space)", "1", [("1", 0.6)])
        + _rows("b", "floor (tangent space)", "all", [("1 2", 0.1)])  # not k = 1
        # an aligned floor is a row of its own, not one of the two floors to choose from
        + _rows("b", "floor (band power, aligned)", "1", [("1", 0.95)])
    )
    path = tmp_path / "selection.csv"
    selection.to_csv(path, index=False)
    assert bench.chosen_floor(path) == {"a": "floor (band power)", "b": "floor (tangent space)"}
    test = pd.DataFrame(
        _rows("a", "floor (band power)", "1", [("1", 0.3)])
        + _rows("a", "floor (tangent space)", "1", [("1", 0.9)])
        + _rows("b", "floor (tangent space)", "1", [("1", 0.7)])
    )
    both, _ = bench.with_chosen_floor(test, path)
    chosen = both[both.method == "floor (chosen on selection)"].set_index("task")
    assert chosen.loc["a", "balanced_accuracy"] == 0.3  # band power's, though worse on test
    assert chosen.loc["b", "balanced_accuracy"] == 0.7


def test_the_report_of_a_run_without_one_labelled_unit(bench, tmp_path):
    import argparse

    df = pd.DataFrame(_rows("a", "floor (band power)", "2", [("1 2", 0.6), ("3 4", 0.8)]))
    args = argparse.Namespace(part="test", encoder="x", out=tmp_path / "report", selection_csv=None)
    bench.write_report(df, args)
    text = (tmp_path / "report.md").read_text()
    assert "| floor (band power) | 0.700 ± 0.141 |" in text and "Lowest k" not in text


def test_the_mean_over_tasks_is_left_blank_for_a_row_missing_a_task(bench, tmp_path):
    import argparse

    df = pd.DataFrame(
        _rows("a", "floor", "1", [("1", 0.6)])
        + _rows("b", "floor", "1", [("1", 0.8)])
        + _rows("a", "probe", "1", [("1", 0.9)])  # never ran on task b
    )
    args = argparse.Namespace(part="test", encoder="x", out=tmp_path / "report", selection_csv=None)
    bench.write_report(df, args)
    text = (tmp_path / "report.md").read_text()
    assert "| floor | 0.600 | 0.800 | 0.700 |" in text
    assert "| probe | 0.900 |  |  |" in text  # not 0.900, a mean over task a alone


def test_the_probe_rows_are_the_library_probe_at_the_rows_c(bench):
    """A probe row (features once per task, the rest per draw) predicts what
    ``PARSProbe`` fitted on the labelled windows predicts, at the library's C of the
    row's C (each block of total variance 1 when the rows were recorded: C * B / P),
    aligned or not. Labels unrelated to the data make the predictions an exacting
    comparison."""
    import numpy as np
    import torch

    from braindecode_pars import PARSProbe, PatchEncoder
    from tests._learning import SEED, learned

    rng = np.random.default_rng(SEED)
    units = np.repeat([3, 4, 7, 8], 12)
    X = rng.standard_normal((48, 3, 200)) * np.repeat([1.0, 4.0, 0.5, 2.0], 12)[:, None, None]
    y = rng.integers(0, 2, 48)
    torch.manual_seed(SEED)
    encoder = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    blocks = dev_probe.features(X, 100.0, encoder, readouts=["encstd"])  # the library's readout
    train, test = np.flatnonzero(units < 5), np.flatnonzero(units > 5)
    P = 3 * 2 * 8 + 3 * 6 + 6  # the widths: encoder (mean and std), band power, tangent space
    assert dev_probe.library_c(100.0, {b: blocks[b] for b in ("encstd", "bp", "ts")}) == 300 / P
    for aligned, method in (
        (True, "probe[encstd+bp+ts, 100, aligned]"),
        (False, "probe[encstd+bp+ts, 100]"),
    ):
        got = dev_probe.fit_probe_row(method, blocks, y, train, test, units, SEED)
        probe = PARSProbe(
            encoder,
            C=300 / P,
            align="groups" if aligned else None,
            sfreq=100,
            block_weights=None,
            random_state=SEED,
        )  # fmt: skip  (equal say)
        expected = probe.fit(X[train], y[train], units[train]).predict(X[test], units[test])
        np.testing.assert_array_equal(got, expected)
        # labels unrelated: no perfect agreement, 0.2 < agreement < 0.8
        agreement = (got == y[test]).mean()
        learned(agreement, above=0.2, what=f"{method}: unrelated labels, from below")
        learned(agreement, below=0.8, what=f"{method}: unrelated labels")
    assert dev_probe.parse_probe("probe[enc+bp+ts, 100, aligned]") == (
        {"enc", "bp", "ts"},
        100.0,
        True,
    )
    with pytest.raises(ValueError, match="Unknown probe row"):
        dev_probe.parse_probe("probe[enc, 100, centred]")
    # a floor: one block, standardised, C = 1, as band_power_pipeline
    from braindecode_pars.features import band_power_pipeline

    floor = band_power_pipeline(sfreq=100).fit(X[train], y[train])
    np.testing.assert_array_equal(
        dev_probe.fit_probe_row("floor (band power)", blocks, y, train, test, units, 0),
        floor.predict(X[test]),
    )


def test_a_report_names_the_encoder_its_commands_used(bench, tmp_path):
    commands = tmp_path / "run.commands"
    commands.write_text(
        "python bench_dev_tasks.py --part test --encoder pars-small --methods 'deep pars'\n"
        "# a note\n"
        "python bench_dev_tasks.py --part test --encoder 'encoders/my enc' --ks 1\n"
        "python bench_dev_tasks.py --part test --ks 2  # the encoder's as above\n"
    )
    assert bench.recorded_encoder(commands) == "encoders/my enc"
    commands.write_text("# nothing run\n")
    with pytest.raises(ValueError, match="pass --encoder"):
        bench.recorded_encoder(commands)


def test_late_fusion_averages_the_parts_probabilities(bench):
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    a = rng.standard_normal((60, 5)) + y[:, None] * 0.8  # informative
    b = rng.standard_normal((60, 40))  # noise
    train, test = np.arange(0, 60, 2), np.arange(1, 60, 2)
    blocks_a, blocks_b = {"enc": a}, {"bp": b}
    # one part: the probe of that block (C in the rows' units: 10 / 5 in the library's)
    np.testing.assert_array_equal(
        dev_probe.fit_fused([blocks_a], y, train, test, 10.0, 0),
        dev_probe.predict_blocks(blocks_a, y, train, test, 10.0 / 5, 0),
    )
    # two parts: the mean of the two regressions' probabilities, by hand
    proba = 0
    for F in (a, b):
        sc = StandardScaler().fit(F[train])
        Z = lambda idx, F=F, sc=sc: sc.transform(F[idx]) / np.sqrt(F.shape[1])  # noqa: E731
        lr = LogisticRegression(C=10.0, class_weight="balanced", max_iter=1000, random_state=0)
        proba = proba + lr.fit(Z(train), y[train]).predict_proba(Z(test)) / 2
    got = dev_probe.fit_fused([blocks_a, blocks_b], y, train, test, 10.0, 0)
    np.testing.assert_array_equal(got, proba.argmax(1))
    assert dev_probe.fusion_parts("probe[enc|bp+ts, 100]") == [["enc"], ["bp", "ts"]]
    assert dev_probe.fusion_parts("probe[enc+bp+ts, 100]") is None
    assert dev_probe.parse_probe("probe[enc|bp+ts, 10]") == ({"enc", "bp", "ts"}, 10.0, False)


def test_rows_of_another_encoder_are_not_resumed(bench, tmp_path):
    out = tmp_path / "run"
    pd.DataFrame(
        _rows("eegmat-arithmetic", "probe[enc, 1]", "1", [("1", 0.6)]), columns=bench.COLUMNS
    ).to_csv(out.with_suffix(".csv"), index=False)
    out.with_suffix(".commands").write_text(
        "# a note\npython bench_dev_tasks.py --part selection --encoder encoders/a --out run\n"
    )
    bench.check_resume_encoder(out.with_suffix(".commands"), "encoders/a")  # same: resumes
    with pytest.raises(ValueError, match="'encoders/b'.*'encoders/a'"):
        bench.check_resume_encoder(out.with_suffix(".commands"), "encoders/b")
    with pytest.raises(SystemExit):  # main refuses before any row is run
        bench.main(
            [
                "--part",
                "selection",
                "--encoder",
                "encoders/b",
                "--methods",
                "probe[enc, 1]",
                "--out",
                str(out),
            ]
        )
    assert out.with_suffix(".commands").read_text().count("python") == 1  # nothing appended
    out.with_suffix(".commands").write_text("# nothing run\n")
    with pytest.raises(ValueError, match="records no --encoder"):
        bench.check_resume_encoder(out.with_suffix(".commands"), "encoders/a")


def test_random_encoder_blocks_of_other_seeds(bench):
    import numpy as np
    import torch

    from braindecode_pars import PatchEncoder
    from braindecode_pars.features.blocks import EncoderFeatures

    assert [dev_probe.random_block_seed(n) for n in ("rand", "rand3", "enc", "randx")] == [
        0,
        3,
        None,
        None,
    ]
    assert dev_probe.block_order({"ts", "rand12", "rand", "enc", "rand2"}) == [
        "enc",
        "rand",
        "rand2",
        "rand12",
        "ts",
    ]
    assert dev_probe.requested_blocks(["probe[rand2+bp, 1]", "floor (band power)"]) == {
        "rand2",
        "bp",
    }
    with pytest.raises(ValueError, match=r"Unknown probe block\(s\) \['rnd'\]"):
        dev_probe.requested_blocks(["probe[rnd+bp, 1]"])
    encoder = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    X = np.random.default_rng(0).standard_normal((6, 2, 300)).astype(np.float32)
    blocks = dev_probe.features(X, 100.0, encoder, rand_seeds=(0, 2))
    assert set(blocks) == {"enc", "rand", "rand2", "bp", "ts"}
    # seed 0 is the block the benchmark always had; seed 2 is another initialisation
    np.testing.assert_array_equal(blocks["rand"], dev_probe.features(X, 100.0, encoder)["rand"])
    torch.manual_seed(2)
    again = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    np.testing.assert_allclose(
        blocks["rand2"],
        EncoderFeatures(again, sfreq=100, readout="mean").fit_transform(X),
        rtol=1e-6,
    )
    assert not np.allclose(blocks["rand"], blocks["rand2"])


def test_readout_blocks_read_the_encoder_otherwise(bench):
    import numpy as np
    import torch

    from braindecode_pars import PatchEncoder
    from braindecode_pars.features.blocks import EncoderFeatures

    assert dev_probe.requested_blocks(["probe[encstd+bp+ts, 100]", "probe[encblocks, 1]"]) == {
        "encstd",
        "encblocks",
        "bp",
        "ts",
    }
    assert dev_probe.block_order({"ts", "encblocks", "bp", "encstd", "enc", "rand"}) == [
        "enc",
        "encstd",
        "encblocks",
        "rand",
        "bp",
        "ts",
    ]
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, emb_dim=8, depth=2, n_heads=2, ff_dim=8)
    X = np.random.default_rng(1).standard_normal((6, 2, 300)).astype(np.float32)
    assert "encstd" not in dev_probe.features(X, 100.0, encoder)
    blocks = dev_probe.features(X, 100.0, encoder, readouts=["encstd", "encblocks"])
    for name, readout in (("encstd", "mean+std"), ("encblocks", "blocks")):
        expected = EncoderFeatures(encoder, sfreq=100, readout=readout).fit_transform(X)
        np.testing.assert_array_equal(blocks[name], expected)
    assert blocks["encstd"].shape == (6, 2 * 2 * 8)
    assert blocks["encblocks"].shape == (6, 2 * 2 * 8)
    assert blocks["ts"].shape == (6, 2, 2)  # covariances: the tangent space comes per fit


def test_random_encoder_rows_are_summarised_over_their_seeds(bench, tmp_path):
    import argparse

    df = pd.DataFrame(
        _rows("a", "probe[rand+bp, 1]", "1", [("1", 0.6)])
        + _rows("b", "probe[rand+bp, 1]", "1", [("1", 0.8)])
        + _rows("a", "probe[rand2+bp, 1]", "1", [("1", 0.4)])
        + _rows("b", "probe[rand2+bp, 1]", "1", [("1", 0.6)])
        + _rows("a", "probe[enc+bp, 1]", "1", [("1", 0.9)])
        + _rows("b", "probe[enc+bp, 1]", "1", [("1", 0.9)])
    )
    args = argparse.Namespace(part="test", encoder="x", out=tmp_path / "report", selection_csv=None)
    bench.write_report(df, args)
    text = (tmp_path / "report.md").read_text()
    # seeds 0 and 2: task a 0.6 and 0.4, b 0.8 and 0.6, means over tasks 0.7 and 0.5
    sd = pd.Series([0.6, 0.4]).std()
    expected = (
        f"| probe[rand*+bp, 1] | 2 | 0.500 ± {sd:.3f} | 0.700 ± {sd:.3f} | 0.600 ± {sd:.3f} "
        "| 0.500 - 0.700 |"
    )
    assert expected in text
    assert "probe[enc+bp, 1] | 2" not in text  # one encoder, no family

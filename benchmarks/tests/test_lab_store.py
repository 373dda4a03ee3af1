"""The lab's ``store`` (``python -m benchmarks.lab store``): the paper's corpora, over the
store code of ``braindecode-pars store``."""

import numpy as np
import pytest

import braindecode_pars.cli as cli

#: The flags of the paper's corpora, which the user's ``store`` left to the lab's.
PAPER_CORPUS_FLAGS = ("--ysyw", "--tueg", "--tuab", "--tusz", "--allow-test-patients",
                      "--ysyw-split-file", "--shared-data", "--eegmat-subjects", "--muse", "--unit",
                      "--subjects", "--runs", "--data-path")  # fmt: skip

# The lab's store (benchmarks/lab.py): the paper's corpora, over the store code of
# `braindecode-pars store`.


def lab():
    """``benchmarks/lab.py`` as a module."""
    import importlib

    return importlib.import_module("benchmarks.lab")


def test_lab_store_takes_the_store_flags_and_the_papers_corpus_flags():
    parser = lab().build_parser()
    args = parser.parse_args(
        ["store", "--out", "s", "--ysyw", "y", "--ysyw-split-file", "f.json", "--tueg", "t",
         "--tuab", "a", "--tusz", "z", "--allow-test-patients", "--jobs", "2", "--dtype",
         "float16", "--on-error", "skip", "--stop-signal", "USR1"]
    )  # fmt: skip
    assert (args.ysyw, args.ysyw_split_file, args.tueg, args.tuab, args.tusz) == (
        "y", "f.json", "t", "a", "z",
    )  # fmt: skip
    assert args.allow_test_patients and (args.jobs, args.dtype, args.on_error) == (
        2,
        "float16",
        "skip",
    )
    assert lab().store_source(args) == "paper_corpus"
    shared = parser.parse_args(
        ["store", "--out", "s", "--shared-data", "d", "--eegmat-subjects", "pool", "3", "--muse",
         "--unit", "uV"]
    )  # fmt: skip
    assert (shared.eegmat_subjects, shared.muse, shared.unit) == (["pool", "3"], True, "uV")
    assert lab().store_source(shared) == "shared_data"
    mi = parser.parse_args(["store", "--out", "s", "--subjects", "1", "--runs", "1", "2"])
    assert (mi.subjects, mi.runs, lab().store_source(mi)) == ([1], [1, 2], "physionet_mi")
    user = {
        s
        for a in cli.build_parser()._subparsers._group_actions[0].choices["store"]._actions
        for s in a.option_strings
    }
    every = {s for a in parser._subparsers._group_actions[0].choices["store"]._actions
             for s in a.option_strings}  # fmt: skip
    assert user < every and every - user == set(PAPER_CORPUS_FLAGS)


def test_eegmat_subjects_take_numbers_pool_and_train_and_name_the_flag():
    from braindecode_pars.datasets.eegmat import EEGMAT_POOL_SUBJECTS, EEGMAT_TRAIN_SUBJECTS

    subjects = lab().eegmat_subjects
    assert subjects(None) == subjects([]) == EEGMAT_TRAIN_SUBJECTS
    assert subjects(["3", 1, "3"]) == (1, 3)
    assert subjects(["train", "35"]) == tuple(sorted({*EEGMAT_TRAIN_SUBJECTS, 35}))
    assert subjects(["pool", "1"]) == tuple(sorted({*EEGMAT_POOL_SUBJECTS, 1}))
    with pytest.raises(ValueError, match=r"'--subjects' takes .* but got 'all'"):
        subjects(["all"], name="--subjects")


@pytest.mark.parametrize(
    "flags, message",
    [
        pytest.param(
            ["--ysyw", "y", "--recordings", "r"],
            r"one source .* but got --recordings, --ysyw",
            id="two",
        ),  # fmt: skip
        pytest.param(
            ["--tuab", "a"],
            r"--tuab: only with --tueg, which was not given",
            id="tuab",
        ),  # fmt: skip
        pytest.param(["--muse"], r"--muse: only with --shared-data", id="muse"),
        pytest.param(["--unit", "uV"], r"--unit: only with --shared-data", id="unit"),
        pytest.param(
            ["--runs", "1", "--tueg", "t"],
            r"--runs: only for PhysioNet-MI, .* but got --tueg too",
            id="runs",
        ),  # fmt: skip
        pytest.param(
            ["--tueg", "t", "--stride-seconds", "5"],
            r"--stride-seconds 5: the paper's",
            id="stride",
        ),  # fmt: skip
        pytest.param(
            ["--tueg", "t", "--sfreq", "100"],
            r"--ysyw/--tueg \(the paper's preprocessing\) takes no --sfreq",
            id="sfreq",
        ),
        pytest.param(
            ["--shared-data", "d", "--eegmat-subjects", "a"],
            r"'--eegmat-subjects' takes subject numbers, 'pool' or",
            id="eegmat",
        ),  # fmt: skip
        pytest.param(
            ["--runs", "15"], r"--subjects, --runs, --data-path: 'runs' must lie in 1..14", id="run"
        ),  # fmt: skip
        pytest.param(
            ["--jobs", "0"], r"benchmarks.lab store: --jobs must be at least 1", id="jobs"
        ),
    ],
)
def test_lab_store_refuses_bad_flags_naming_them_before_any_work(flags, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        lab().main(["store", "--out", str(tmp_path / "store"), *flags])
    assert not (tmp_path / "store").exists()


def test_lab_store_writes_the_papers_corpus_in_30_s_windows(ysyw, tuh_corpora, tmp_path):
    """The lab's store of YSYW and TUEG holds the windows the library's
    ``pretraining_corpus`` gives, written by ``write_window_store``: 30-s windows, no
    fine-tuning test patient."""
    from braindecode_pars.datasets.corpus import pretraining_corpus
    from braindecode_pars.store import read_window_store, write_window_store

    sources = {"ysyw_path": ysyw[0], **{f"{k}_path": v for k, v in tuh_corpora.items()}}
    flags = ["store", "--out", str(tmp_path / "store"), "--ysyw", str(ysyw[0])]
    for name, path in tuh_corpora.items():
        flags += [f"--{name}", str(path)]
    assert lab().main(flags) == 0
    write_window_store(pretraining_corpus(**sources, window_seconds=30.0), tmp_path / "library")
    stored, index, info = read_window_store(tmp_path / "store")
    expected, expected_index, _ = read_window_store(tmp_path / "library")
    np.testing.assert_array_equal(index, expected_index)
    assert len(stored) == len(expected) == 6  # YSYW: 5 records, TUEG: 1 patient
    for a, b in zip(stored, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    assert [r["description"]["source"] for r in info["recordings"]] == ["ysyw"] * 5 + ["tueg"]
    settings = info["build"]["settings"]
    assert settings["window_seconds"] == 30.0 and settings["ysyw"] == str(ysyw[0])
    assert settings["stride_seconds"] is None and settings["tueg"] == str(tuh_corpora["tueg"])
    assert lab().main(flags) == 0  # the same command: the store is complete, nothing to do


def test_lab_store_writes_physionet_mi_runs_as_the_library_does(tmp_path):
    """``--runs`` of the bundled subject: the same windows as ``write_window_store`` of
    ``load_physionet_mi_continuous``; ``braindecode-pars store`` stores every baseline
    and executed-movement run the same way."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.store import read_window_store, write_window_store

    flags = ["--window-seconds", "5", "--stride-seconds", "5"]
    assert lab().main(["store", "--out", str(tmp_path / "lab"), "--runs", "1", "2", *flags]) == 0
    windows = load_physionet_mi_continuous(runs=(1, 2), window_seconds=5, stride_seconds=5)
    write_window_store(windows, tmp_path / "library")
    stored, _, info = read_window_store(tmp_path / "lab")
    expected, _, _ = read_window_store(tmp_path / "library")
    assert len(stored) == 2
    for a, b in zip(stored, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    assert info["build"]["settings"]["runs"] == [1, 2]

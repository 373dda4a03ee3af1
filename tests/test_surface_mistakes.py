"""A clinic's user's mistakes, each made on data built here, and what the package says
before it costs: wrong channel names (the files' names shown, the closest match to each
pick), recordings of two channel sets refused from their headers, a declared sampling
rate resampled from, groups that split a subject, a group score without its groups or
with one class per test fold, and an encoder saved without its pretext model."""

import logging
import re
import warnings

import mne
import numpy as np
import pytest

from braindecode_pars.io import load_labelled_recordings, load_recordings
from braindecode_pars.io import recordings as recordings_module

#: The channels as a clinic's EDF files name them, and as a user picks them.
CLINIC = ["EEG Fp1-Ref", "EEG Fp2-Ref", "EEG C3-Ref", "EEG C4-Ref", "EEG O1-Ref", "EEG O2-Ref"]
PICKS = ["Fp1", "Fp2", "O1", "O2"]


def _edf(path, channels, seed=0, seconds=40.0, sfreq=100.0):
    """An EDF file of white noise (tens of microvolts) on ``channels``."""
    rng = np.random.default_rng(seed)
    data = 1e-5 * rng.standard_normal((len(channels), int(seconds * sfreq)))
    raw = mne.io.RawArray(data, mne.create_info(channels, sfreq, "eeg"), verbose="error")
    path.parent.mkdir(parents=True, exist_ok=True)
    mne.export.export_raw(path, raw, fmt="edf", verbose="error")
    return path


def _said(caplog, level=logging.WARNING):
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("braindecode_pars") and r.levelno == level
    ]


# -- 1. channel names where they are wrong -----------------------------------------------
def test_wrong_picks_name_the_files_channels_and_the_closest_match_once(tmp_path, caplog):
    for i in range(5):
        _edf(tmp_path / f"rec{i:02d}.edf", CLINIC, seed=i)
    with pytest.raises(ValueError) as error, caplog.at_level(logging.INFO, "braindecode_pars"):
        load_recordings(tmp_path, window_seconds=10.0, picks=PICKS)
    message = str(error.value)
    assert _said(caplog) == []  # no warning per file: the error says it all, once
    assert "Skipped 5 of 5 recordings: 5 without the channels picks=['Fp1', 'Fp2', 'O1', 'O2']" in (
        message
    )
    assert "(rec00.edf, rec01.edf, rec02.edf and 2 more)" in message
    assert "rec04" not in message and str(tmp_path) not in message  # no list of every path
    assert f"Their channels: {', '.join(CLINIC)}." in message
    assert "'Fp1' -> 'EEG Fp1-Ref', 'Fp2' -> 'EEG Fp2-Ref', 'O1' -> 'EEG O1-Ref'" in message
    fix = "picks=['EEG Fp1-Ref', 'EEG Fp2-Ref', 'EEG O1-Ref', 'EEG O2-Ref']"
    assert fix in message
    # the fix works
    fixed = load_recordings(
        tmp_path, window_seconds=10.0, picks=re.findall(r"'(EEG [^']+)'", fix.split("=", 1)[1])
    )
    assert fixed.datasets[0].raw.ch_names == [
        "EEG Fp1-Ref",
        "EEG Fp2-Ref",
        "EEG O1-Ref",
        "EEG O2-Ref",
    ]


def test_some_files_skipped_for_their_channels_are_one_warning_grouped_by_channel_set(
    tmp_path, caplog
):
    for i in range(3):
        _edf(tmp_path / f"a{i}.edf", CLINIC, seed=i)
    _edf(tmp_path / "b0.edf", ["Fp1", "Fp2", "O1", "O2"], seed=9)
    _edf(tmp_path / "c0.edf", ["FP1-A1", "FP2-A2", "C3-A1"], seed=10)
    with caplog.at_level(logging.WARNING, "braindecode_pars"):
        windows = load_recordings(tmp_path, window_seconds=10.0, picks=PICKS)
    assert [ds.description["file"][-6:] for ds in windows.datasets] == ["b0.edf"]
    (warned,) = _said(caplog)  # one summary, not one warning per file
    assert warned.startswith("Skipped 4 of 5 recordings: 4 without the channels picks=")
    assert f"Their channels (a0.edf, a1.edf, a2.edf): {', '.join(CLINIC)}." in warned
    assert "(c0.edf): FP1-A1, FP2-A2, C3-A1." in warned
    assert "'Fp1' -> 'FP1-A1', 'Fp2' -> 'FP2-A2'" in warned  # O1 and O2: nothing close


def test_labelled_recordings_of_two_channel_sets_are_refused_from_their_headers(
    tmp_path, monkeypatch, caplog
):
    for i in range(4):
        _edf(tmp_path / f"S{i}_rest.edf", CLINIC if i % 2 else CLINIC[:4], seed=i)

    def no_work(*args, **kwargs):
        raise AssertionError("preprocessing started before the channel sets were checked")

    monkeypatch.setattr(recordings_module, "windows_of", no_work)
    with pytest.raises(ValueError) as error, caplog.at_level(logging.INFO, "braindecode_pars"):
        load_labelled_recordings(tmp_path, r"(?P<subject>S\d)_(?P<label>\w+)\.edf")
    message = str(error.value)
    assert message.startswith("The recordings' headers (read before any preprocessing) give 2")
    shared = repr(CLINIC[:4])
    assert message.count(shared) == 1 and f"picks={shared}" in message  # the fix once
    assert _said(caplog) == []  # and not again in a warning
    assert not any("Pretraining" in m for m in _said(caplog, logging.INFO))


def test_reading_labelled_recordings_says_reading_not_pretraining(tmp_path, caplog):
    for i in range(2):
        _edf(tmp_path / f"S{i}_rest.edf", CLINIC, seed=i)
    with caplog.at_level(logging.INFO, "braindecode_pars"):
        windows = load_labelled_recordings(
            tmp_path, r"(?P<subject>S\d)_(?P<label>\w+)\.edf", window_seconds=10.0
        )
    assert windows.X.shape == (8, 6, 1000)
    said = _said(caplog, logging.INFO)
    assert any(m.startswith("Reading 6 channels of the 2 recordings: EEG Fp1-Ref") for m in said)
    assert not any("retraining" in m for m in said)


# -- 3. groups that split a subject ----------------------------------------------------
def test_groups_by_file_with_a_pattern_naming_the_subject_warn_once_with_the_fix(tmp_path, caplog):
    for subject in ("S10", "S11", "S12"):
        for state in ("closed", "open"):
            _edf(tmp_path / f"{subject}_{state}.edf", CLINIC[:2], seed=len(subject + state))
    pattern = r"(?P<recording>(?P<subject>S\d+)_(?P<label>closed|open))\.edf"
    with pytest.warns(UserWarning, match="one person in several groups") as caught:
        windows = load_labelled_recordings(
            tmp_path, pattern, subject="recording", window_seconds=10.0
        )
    assert sorted(set(windows.groups)) == [
        f"S1{i}_{s}" for i in range(3) for s in ("closed", "open")
    ]
    (warned,) = [str(w.message) for w in caught if "several groups" in str(w.message)]
    assert "'S10' (the field 'subject'; subject='recording') is in groups 'S10_closed', " in (
        warned
    )
    assert "'S10_open' (and 2 other people)" in warned
    assert "both sides" in warned and warned.endswith("Group by person: subject='subject'.")
    # grouped by person: nothing to say
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*several groups")
        load_labelled_recordings(tmp_path, pattern, window_seconds=10.0)


def test_groups_given_to_fit_that_split_the_windows_subjects_warn(tmp_path):
    from braindecode_pars.io import read_windows

    for subject in ("S10", "S11"):
        for state in ("closed", "open"):
            _edf(tmp_path / f"{subject}_{state}.edf", CLINIC[:2], seed=len(subject + state))
    windows = load_labelled_recordings(
        tmp_path, r"(?P<subject>S\d+)_(?P<label>closed|open)\.edf", window_seconds=10.0
    )
    by_file = np.asarray([f"{s}_{y}" for s, y in zip(windows.groups, windows.y, strict=True)])
    with pytest.warns(UserWarning, match=r"'S10' \(the 'X' windows' subject\) is in groups "):
        read_windows(windows, groups=by_file)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_windows(windows, groups=windows.groups)  # the subjects themselves: no word


# -- 4. scorers that explain themselves ------------------------------------------------
def _subject_trait(n_subjects=6, per_subject=8, seed=0):
    """One feature per window, a label of each subject (patient or control)."""
    rng = np.random.default_rng(seed)
    subjects = np.repeat(np.arange(n_subjects), per_subject)
    trait = (np.arange(n_subjects) % 2)[subjects]
    X = (trait + rng.normal(0, 1.0, len(trait)))[:, None]
    return X, np.where(trait == 1, "patient", "control"), subjects


def test_a_group_scorer_without_routed_groups_fails_as_scikit_learn_says_a_scorer_fails():
    """Without routed groups the scorer raises a ValueError, as scikit-learn's own routing
    error: cross-validation scores the folds nan with a warning that carries its message
    (``error_score=np.nan``), stops with it under ``error_score="raise"`` (and an ordinary
    ``except ValueError`` catches it), and ``group_cross_val_score`` routes the groups."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedGroupKFold, cross_val_score

    from braindecode_pars.metrics import (
        GroupScorer,
        GroupsNotRoutedError,
        group_cross_val_score,
    )

    X, y, subjects = _subject_trait()
    kwargs = dict(groups=subjects, cv=StratifiedGroupKFold(3), scoring=GroupScorer())
    message = r"needs 'groups'.*metadata routing is off.*group_cross_val_score.*'raise'"
    with pytest.warns(UserWarning, match=f"Scoring failed(?s:.*){message}"):
        scores = cross_val_score(LogisticRegression(), X, y, **kwargs)
    assert np.isnan(scores).all()
    with pytest.raises(GroupsNotRoutedError, match=message):
        cross_val_score(LogisticRegression(), X, y, error_score="raise", **kwargs)
    try:  # a user's skip-on-error loop around a search
        cross_val_score(LogisticRegression(), X, y, error_score="raise", **kwargs)
    except ValueError as err:
        caught = err
    assert isinstance(caught, GroupsNotRoutedError)
    routed = group_cross_val_score(
        LogisticRegression(), X, y, groups=subjects, cv=StratifiedGroupKFold(3)
    )
    assert routed.shape == (3,) and np.isfinite(routed).all()


@pytest.mark.parametrize("scoring", ["group", "windows"])
def test_leaving_one_subject_out_on_a_subject_label_warns_naming_stratified_group_k_fold(
    scoring,
):
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, StratifiedGroupKFold, cross_val_score

    from braindecode_pars.metrics import GroupScorer, make_scorer

    X, y, subjects = _subject_trait()
    with sklearn.config_context(enable_metadata_routing=True):
        clf = LogisticRegression().set_fit_request(sample_weight=False)
        scorer = GroupScorer() if scoring == "group" else make_scorer("balanced_accuracy")
        with pytest.warns(UserWarning, match=r"hold one label only: .*StratifiedGroupKFold"):
            scores = cross_val_score(
                clf, X, y, cv=LeaveOneGroupOut(), scoring=scorer, params={"groups": subjects}
            )
        if scoring == "group":
            assert set(scores.tolist()) <= {0.0, 1.0}  # what the warning says
        with warnings.catch_warnings():  # the fix: every label in every test fold
            warnings.filterwarnings("error", message=".*hold one label only")
            cross_val_score(
                clf, X, y, cv=StratifiedGroupKFold(3), scoring=scorer,
                params={"groups": subjects},
            )  # fmt: skip


# -- 5. what save_pretrained keeps -----------------------------------------------------
def test_an_encoder_saved_alone_is_refused_by_load_pretext_model_naming_export(tmp_path):
    from braindecode_pars import PatchEncoder
    from braindecode_pars.hub import load_encoder, load_pretext_model

    encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=32)
    encoder.save_pretrained(tmp_path / "my-encoder")  # the README's way to keep an encoder
    assert load_encoder(tmp_path / "my-encoder").emb_dim == 16  # the encoder is there
    with pytest.raises(FileNotFoundError) as error:
        load_pretext_model(tmp_path / "my-encoder")
    message = str(error.value)
    assert "an encoder without its pretext model" in message
    assert "'braindecode-pars export --run RUN --out FOLDER'" in message
    assert "export_run(RUN, FOLDER)" in message
    with pytest.raises(FileNotFoundError, match=r"holds no pretext model .*export"):
        load_pretext_model(tmp_path)


# -- 2. a declared rate said, and treated alike by the probe and the fine-tuner ------------
@pytest.mark.parametrize("head", ["probe", "fine-tuner"])
def test_a_declared_rate_other_than_the_encoders_is_said_with_both_rates(head, caplog):
    from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 6)
    X = rng.standard_normal((12, 2, 1000)).astype(np.float32)  # 10 s at 100 Hz ...
    X[y == 1] += np.sin(2 * np.pi * 10 * np.arange(1000) / 100).astype(np.float32)
    stage = PARSProbe(encoder="pars-small-v2")
    if head == "fine-tuner":
        stage = PARSFineTuner(max_epochs=1, batch_size=6, augmentation=None, random_state=0)
    clf = PARSClassifier(head=stage, sfreq=256, verbose=0)  # ... declared at 256 Hz
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        clf.fit(X, y)
    (said,) = [m for m in _said(caplog, logging.INFO) if "resampled" in m]
    assert "the windows are at 256 Hz" in said and "the encoder works at 100 Hz" in said
    assert "resampled from 256 Hz to 100 Hz" in said and "check that it is theirs" in said
    # the head reads them at the encoder's rate: 1000 samples at 256 Hz are 391 at 100 Hz
    assert clf.predict(X).shape == (12,)
    if head == "fine-tuner":
        assert clf.head_.n_times_ == round(1000 * 100 / 256) == 391
    # windows at the encoder's rate: nothing resampled, nothing said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        PARSClassifier(head=stage, sfreq=100, verbose=0).fit(X, y)
    assert not any("resampled" in m for m in _said(caplog, logging.INFO))


# -- 6. the small surprises --------------------------------------------------------------
def test_the_pretraining_line_names_the_encoders_count_and_the_decoders():
    from braindecode_pars import PARSPretrainer

    X = np.random.default_rng(0).standard_normal((24, 2, 600)).astype(np.float32)
    settings = dict(
        emb_dim=16, depth=1, n_heads=2, ff_dim=16, n_patches=6, batch_size=8, max_epochs=1,
        window_seconds=5.0, sfreq=100.0, valid_fraction=None, random_state=0, verbose=0,
    )  # fmt: skip
    logger = logging.getLogger("braindecode_pars")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        stage = PARSPretrainer(**settings).fit(X)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    (line,) = [r.getMessage() for r in records if r.getMessage().startswith("Pretraining PARS")]
    n_encoder = sum(p.numel() for p in stage.encoder_.parameters())
    total = int(re.search(r"encoder \(([\d,]+) parameters", line).group(1).replace(",", ""))
    assert f"the encoder's {n_encoder:,}, which it keeps and its card counts" in line
    assert f"the pretext decoder's {total - n_encoder:,})" in line and total > n_encoder


def test_a_fine_tuning_projected_past_five_minutes_warns_after_its_first_epoch():
    from skorch.callbacks import EarlyStopping

    from braindecode_pars import PARSFineTuner
    from braindecode_pars.estimators import _fit_callbacks

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((12, 2, 200)).astype(np.float32), np.repeat([0, 1], 6)
    stop = EarlyStopping(monitor="train_loss", patience=1, threshold=1e9, threshold_mode="abs")
    # token_gate=True: one fit ("auto"'s inner fits would each say their first epoch)
    tuner = PARSFineTuner(
        encoder=None, sfreq=100, max_epochs=10_000_000, batch_size=6, augmentation=None,
        callbacks=[("stop", stop)], random_state=0, token_gate=True,
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"The first epoch took .* s; 10000000 epochs: about") as w:
        tuner.fit(X, y)
    (said,) = [str(m.message) for m in w if "first epoch" in str(m.message)]
    assert "max_epochs" in said and "EarlyStopping" in said
    seconds = float(re.search(r"took (\S+) s", said).group(1))
    assert seconds * 10_000_000 > _fit_callbacks.LONG_FIT_SECONDS
    assert len(tuner.history_) == 2  # stopped, as the warning suggests


def test_the_docs_first_snippet_and_the_example_use_the_default_encoder_and_cards_stand_alone():
    from pathlib import Path

    from braindecode_pars.hub.folders import pretrained_path
    from braindecode_pars.weights import DEFAULT_ENCODER, PRETRAINED_ENCODERS

    root = Path(__file__).resolve().parents[1]
    snippet = (root / "docs" / "encoders.rst").read_text().split("::", 1)[1].split("\n\n")[1]
    example = (root / "examples" / "plot_shipped_encoder.py").read_text()
    called = r"(?:load_encoder\(|load_pretext_model\(|pretrained_path\(|encoder=)\"(pars[\w-]*)\""
    for text in (snippet, example):
        assert set(re.findall(called, text)) == {DEFAULT_ENCODER}
    for name in PRETRAINED_ENCODERS:
        card = (pretrained_path(name) / "README.md").read_text()
        assert not re.search(r"\bissues? \d+", card), name

"""Patients' names never leave the recording: EDF files whose headers name people,
through ``store --recordings``, ``store --braindecode-dataset``, ``pretrain`` and
``export``, and through ``load_recordings``, ``PARSPretrainer`` and ``save_encoder``;
every file written and every log line is searched for the names. Stores and runs
written before ``subject_from`` (by 2476ecf) are named in a warning and rewritten
clean by ``python -m braindecode_pars.store.identity``."""

import datetime
import json
import logging
import subprocess
import sys
from pathlib import Path

import edfio
import mne
import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.datautil import load_concat_dataset

from braindecode_pars import PARSPretrainer, save_encoder
from braindecode_pars.cli import main
from braindecode_pars.hub import export_run
from braindecode_pars.io import load_recordings
from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.store import anonymize, read_window_store
from braindecode_pars.store.identity import COMMAND

from ._helpers import tiny_config

#: Each file's header: patient code, name (EDF's first_last), birth date. Four
#: recordings of three people; the codes are names, as clinics often fill them.
PATIENTS = [
    ("Mueller", "Anna_Mueller", datetime.date(1971, 5, 13)),
    ("Okonkwo", "Chidi_Okonkwo", datetime.date(1980, 2, 29)),
    ("Mueller", "Anna_Mueller", datetime.date(1971, 5, 13)),
    ("Lindqvist", "Erik_Lindqvist", datetime.date(1955, 11, 2)),
]
HOSPITAL, TECHNICIAN, FREE_TEXT = "StJudeNeuro", "TechHansen", "WardSeven"
#: The recordings' start date (the EDF header's), as text: day, month and year, in the
#: forms a file or a log line would hold it (ISO, EDF's header, MNE's repr, Unix time).
RECORDED = datetime.date(2021, 3, 4)
DATES = {"2021-03-04", "04.03.21", "04-MAR-2021", "Mar 04, 2021", "1614816000"}
#: What no file written and no log line may hold (compared without regard to case).
SECRETS = sorted(
    {part for _, name, _ in PATIENTS for part in name.split("_")}
    | {code for code, _, _ in PATIENTS}
    | {HOSPITAL, TECHNICIAN, FREE_TEXT, "13-MAY-1971", "1971-05-13", "29-FEB-1980"}
    | DATES
)
SFREQ = 100.0


def _write_edf(path, code, name, birthdate, seed):
    """40 s of two EEG channels (a 10 Hz rhythm in noise), the header naming a person."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(40 * SFREQ)) / SFREQ
    signals = [
        edfio.EdfSignal(
            20 * rng.standard_normal(t.size) + 10 * np.sin(2 * np.pi * 10 * t),
            SFREQ, label=label, physical_dimension="uV", physical_range=(-500, 500),
        )
        for label in ("Fp1", "C3")
    ]  # fmt: skip
    patient = edfio.Patient(
        code=code, sex="F", birthdate=birthdate, name=name, additional=[FREE_TEXT]
    )
    recording = edfio.Recording(
        startdate=RECORDED,
        hospital_administration_code=HOSPITAL,
        investigator_technician_code=TECHNICIAN,
        equipment_code="EEG1200",
        additional=[FREE_TEXT],
    )
    edfio.Edf(signals, patient=patient, recording=recording).write(path)
    return path


@pytest.fixture
def named_edf(tmp_path):
    """Four EDF files (``S01R01.edf``...) whose headers name three people."""
    folder = tmp_path / "clinic"
    folder.mkdir()
    for i, (code, name, birthdate) in enumerate(PATIENTS):
        _write_edf(folder / f"S{i // 2 + 1:02d}R{i % 2 + 1:02d}.edf", code, name, birthdate, i)
    header = mne.io.read_raw_edf(folder / "S01R01.edf", verbose="error").info["subject_info"]
    assert header["his_id"] == "Mueller" and header["last_name"] == "Mueller"  # named
    return folder


def _named(text):
    """The secrets ``text`` holds."""
    text = text.lower()
    return [s for s in SECRETS if s.lower() in text]


def _files_naming(folder, skip=()):
    """``{file: secrets}`` of every file under ``folder`` (but those under ``skip``)
    that holds one of the secrets."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and not any(part in skip for part in path.relative_to(folder).parts):
            named = _named(path.read_bytes().decode("latin-1"))
            if named:
                found[str(path.relative_to(folder))] = named
    return found


def _pretrain(tmp_path, store, run):
    args = ["pretrain", "--store", str(store), "--out", str(run), "--steps", "2"]
    args += ["--batch-size", "4", "--device", "cpu", "--window-seconds", "5"]
    assert main([*args, *tiny_config(tmp_path, n_patches=5)]) == 0


def _pretrain_and_export(tmp_path, store, name):
    run, out = tmp_path / f"run-{name}", tmp_path / f"export-{name}"
    _pretrain(tmp_path, store, run)
    assert main(["export", "--run", str(run), "--out", str(out)]) == 0
    return run, out


@pytest.mark.slow
def test_store_pretrain_and_export_name_no_one(named_edf, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    store = tmp_path / "store"
    common = ["--window-seconds", "10", "--stride-seconds", "10"]
    assert main(["store", "--recordings", str(named_edf), "--out", str(store), *common]) == 0
    descriptions = [r["description"] for r in read_window_store(store)[2]["recordings"]]
    assert [d["subject"] for d in descriptions] == ["S01R01", "S01R02", "S02R01", "S02R02"]
    assert {d["subject_from"] for d in descriptions} == {"file"}
    assert "To group recordings by person, give subject_from" in caplog.text
    run, out = _pretrain_and_export(tmp_path, store, "file")
    card = (out / "README.md").read_text()
    assert "- recordings: 4" in card
    config = json.loads((out / "run_config.json").read_text())
    assert "data.recordings" not in config and config["data.n_recordings"] == 4
    assert len(config["data.recordings_hash"]) == 16

    # the header's patient code on request: the store holds it, nothing else does
    by_header = tmp_path / "store-header"
    args = ["store", "--recordings", str(named_edf), "--out", str(by_header), *common]
    assert main([*args, "--subject-from", "header"]) == 0
    subjects = [r["description"]["subject"] for r in read_window_store(by_header)[2]["recordings"]]
    assert subjects == [code for code, _, _ in PATIENTS]
    run_h, out_h = _pretrain_and_export(tmp_path, by_header, "header")
    card = (out_h / "README.md").read_text()
    assert "- people: 3 (counted by the subject of 4 recordings)" in card
    assert "- recordings: 4" in card
    # a pattern of the file names groups the two recordings of each file prefix
    by_name = tmp_path / "store-pattern"
    args = ["store", "--recordings", str(named_edf), "--out", str(by_name), *common]
    assert main([*args, "--subject-from", r"(S\d+)R\d+"]) == 0
    recordings = read_window_store(by_name)[2]["recordings"]
    assert [r["description"]["subject"] for r in recordings] == ["S01", "S01", "S02", "S02"]

    written = _files_naming(tmp_path, skip=("clinic", "store-header"))
    assert written == {}
    assert _files_naming(by_header) == {"recordings.json": ["Lindqvist", "Mueller", "Okonkwo"]}
    out_err = capsys.readouterr()
    assert _named(caplog.text + out_err.out + out_err.err) == []


def test_an_export_of_main_called_from_python_records_its_arguments_and_no_local_path(
    named_edf, tmp_path
):
    """``main([...])`` called from Python (here under pytest, whose own arguments are the
    process's): the run records the arguments given; its local ``config.json`` keeps
    the store's absolute path and the salt of the recordings' hash, which every sitting
    reuses; the export's card and ``run_config.json`` hold a placeholder for each path
    (``<store>``), no path of this machine and no salt; named at export, the store is
    called by its public name."""
    from braindecode_pars.models.card import identifiers_hash

    store, run, out = tmp_path / "clinic-store", tmp_path / "runs" / "mine", tmp_path / "export"
    common = ["--window-seconds", "10", "--stride-seconds", "10"]
    assert main(["store", "--recordings", str(named_edf), "--out", str(store), *common]) == 0
    given = ["pretrain", "--store", str(store), "--out", str(run), "--steps", "2"]
    given += ["--batch-size", "4", "--device", "cpu", "--window-seconds", "5"]
    given += tiny_config(tmp_path, n_patches=5)
    assert main(given) == 0
    local = json.loads((run / "config.json").read_text())
    assert local["command"] == "braindecode-pars " + " ".join(given)  # not pytest's argv
    assert local["data.store"] == str(store.resolve())
    salt = local["data.recordings_salt"]
    files = [[f"S{i // 2 + 1:02d}R{i % 2 + 1:02d}.edf", f"S{i // 2 + 1:02d}R{i % 2 + 1:02d}"]
             for i in range(4)]  # fmt: skip
    assert local["data.recordings_hash"] == identifiers_hash(files, salt)
    assert local["data.recordings_hash"] != identifiers_hash(files)  # salted
    assert main(given) == 0  # a sitting more (finished already): the same salt and hash
    again = json.loads((run / "config.json").read_text())
    assert (again["data.recordings_salt"], again["data.recordings_hash"]) == (
        salt, local["data.recordings_hash"],
    )  # fmt: skip

    assert main(["export", "--run", str(run), "--out", str(out)]) == 0
    public = json.loads((out / "run_config.json").read_text())
    assert public["command"] == (
        "braindecode-pars pretrain --store <store> --out <out> --steps 2 --batch-size 4 "
        "--device cpu --window-seconds 5 --config <config>"
    )
    assert public["data.store"] == "<store>" and "public_names" not in public
    assert "data.recordings_salt" not in public and "data.recordings_salt" not in public["run_info"]
    assert public["data.recordings_hash"] == local["data.recordings_hash"]
    card = (out / "README.md").read_text()
    assert "- store:" not in card and f"```bash\n{public['command']}\n```" in card
    named = export_run(run, tmp_path / "named", names={"store": "eeg-corpus"})
    public_named = json.loads((named / "run_config.json").read_text())
    assert public_named["command"] == public["command"].replace("<store>", "eeg-corpus")
    assert public_named["data.store"] == "eeg-corpus"
    assert "- store: eeg-corpus\n" in (named / "README.md").read_text()
    for path in [*out.iterdir(), *named.iterdir()]:
        text = path.read_bytes().decode("latin-1")
        assert str(tmp_path) not in text and salt not in text, path.name
        assert "pytest" not in text and "clinic-store" not in text, path.name


def test_an_export_of_an_earlier_version_is_rewritten_without_local_paths(tmp_path):
    """An export written before its paths were public names or placeholders (the
    store's absolute path, the command's, in ``run_config.json`` and the card) is
    rewritten by the identity command as exports are written now; a run's own
    ``config.json`` keeps its paths."""
    export = tmp_path / "export"
    export.mkdir()
    command = f"braindecode-pars pretrain --store {tmp_path}/Zelinski/store --out {tmp_path}/r"
    old = {"command": command, "data.store": f"{tmp_path}/Zelinski/store", "lr": 0.001,
           "run_info": ["command", "data.store"]}  # fmt: skip
    (export / "run_config.json").write_text(json.dumps(old))
    card = f"# r\n\n- store: {tmp_path}/Zelinski/store\n\n```bash\n{command}\n```\n"
    (export / "README.md").write_text(card)
    assert anonymize(export) == [export / "run_config.json", export / "README.md"]
    rewritten = json.loads((export / "run_config.json").read_text())
    assert rewritten["command"] == "braindecode-pars pretrain --store <store> --out <out>"
    assert rewritten["data.store"] == "<store>" and rewritten["lr"] == 0.001
    card = (export / "README.md").read_text()
    assert "Zelinski" not in card and str(tmp_path) not in card
    assert "- store:" not in card
    assert "braindecode-pars pretrain --store <store> --out <out>" in card
    assert anonymize(export) == []  # nothing left to rewrite
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(old))
    assert anonymize(run) == []  # a run's own record names its local paths


def test_a_braindecode_dataset_whose_descriptions_name_people(named_edf, tmp_path, caplog):
    """A saved braindecode dataset of the files, described by the header's code (as
    load_recordings did before subject_from) and a diagnosis column of the user's."""
    caplog.set_level(logging.DEBUG)
    raws = []
    for i, file in enumerate(sorted(named_edf.glob("*.edf"))):
        raw = mne.io.read_raw_edf(file, preload=True, verbose="error")
        description = {"subject": raw.info["subject_info"]["his_id"], "diagnosis": f"focal{i}"}
        raws.append(RawDataset(raw, description))
    BaseConcatDataset(raws).save(str(tmp_path / "saved"), overwrite=True)
    store = tmp_path / "store"
    args = ["store", "--braindecode-dataset", str(tmp_path / "saved"), "--out", str(store)]
    assert main([*args, "--window-seconds", "10", "--stride-seconds", "10"]) == 0
    assert "replaced by pseudonyms" in caplog.text
    descriptions = [r["description"] for r in read_window_store(store)[2]["recordings"]]
    # one pseudonym per person: the grouping is kept; the user's column stays in the store
    assert [d["subject"] for d in descriptions] == [
        "subject-1", "subject-2", "subject-1", "subject-3",
    ]  # fmt: skip
    assert [d["diagnosis"] for d in descriptions] == [f"focal{i}" for i in range(4)]
    run, out = _pretrain_and_export(tmp_path, store, "saved")
    card = (out / "README.md").read_text()
    assert "- people: 3 (counted by the subject of 4 recordings)" in card
    for path in (run / "config.json", out / "run_config.json", out / "README.md"):
        assert "focal" not in path.read_text() and "subject-" not in path.read_text(), path
    assert _files_naming(tmp_path, skip=("clinic", "saved")) == {}
    assert _named(caplog.text) == []


def test_load_recordings_pretrainer_and_save_encoder_name_no_one(named_edf, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    windows = load_recordings(named_edf, sfreq=SFREQ, window_seconds=5.0)
    assert all(ds.raw.info["subject_info"] is None for ds in windows.datasets)
    assert set(windows.description["subject_from"]) == {"file"}
    windows.save(str(tmp_path / "windows"), overwrite=True)  # braindecode's own save
    # raw.info keeps the recording's date, which braindecode's save writes (FIF, not
    # text); MNE's anonymize, as the privacy paragraph says, moves it to 2000-01-01
    saved = load_concat_dataset(tmp_path / "windows", preload=False)
    assert saved.datasets[0].raw.info["meas_date"].date() == RECORDED
    for ds in windows.datasets:
        ds.raw.anonymize()
    windows.save(str(tmp_path / "windows"), overwrite=True)
    saved = load_concat_dataset(tmp_path / "windows", preload=False)
    assert {ds.raw.info["meas_date"].date() for ds in saved.datasets} == {datetime.date(2000, 1, 1)}
    pretrainer = PARSPretrainer(
        emb_dim=16, depth=1, n_heads=2, ff_dim=16, n_patches=5, max_epochs=2,
        batch_size=8, window_seconds=5.0, random_state=0, verbose=0,
        checkpoint_dir=tmp_path / "run",
    ).fit(windows)  # fmt: skip
    save_encoder(pretrainer.encoder_, tmp_path / "encoder.pt", note=str(windows.description))
    assert (tmp_path / "run" / "pretrain" / "config.json").is_file()
    assert _files_naming(tmp_path, skip=("clinic",)) == {}
    assert _named(caplog.text) == []
    # by a pattern of the names, or the header on request
    grouped = load_recordings(named_edf, window_seconds=5.0, subject_from=r"(?P<subject>S\d+)R")
    assert grouped.description["subject"].tolist() == ["S01", "S01", "S02", "S02"]
    by_header = load_recordings(named_edf, window_seconds=5.0, subject_from="header")
    assert by_header.description["subject"].tolist() == [code for code, _, _ in PATIENTS]
    table = {"S01R01.edf": "p1", "S01R02.edf": "p2", "S02R01.edf": "p1", "S02R02.edf": "p3"}
    by_table = load_recordings(named_edf, window_seconds=5.0, subject_from=lambda p: table[p.name])
    assert by_table.description["subject"].tolist() == ["p1", "p2", "p1", "p3"]
    assert set(by_table.description["subject_from"]) == {"function"}


@pytest.mark.parametrize(
    "subject_from, error, match",
    [
        ("S\\d+", ValueError, r"'subject_from' must be .* but got 'S\\\\d\+', which has no group"),
        ("(S\\d+", ValueError, r"but got '\(S\\\\d\+', not a regular expression"),
        (3, TypeError, r"'subject_from' must be 'file' .* but got int \(3\)"),
        ("(X\\d+)", ValueError, r"'subject_from' '\(X\\\\d\+\)' does not match the name of .*"),
    ],
)
def test_subject_from_is_refused_before_any_recording_is_read(
    named_edf, subject_from, error, match
):
    with pytest.raises(error, match=match):
        load_recordings(named_edf, subject_from=subject_from)


def test_the_store_command_refuses_a_pattern_without_a_group(named_edf, tmp_path):
    args = ["store", "--recordings", str(named_edf), "--out", str(tmp_path / "s")]
    with pytest.raises(SystemExit, match=r"--subject-from: 'subject_from' must be .*no group"):
        main([*args, "--subject-from", "S01"])
    assert not (tmp_path / "s").exists()


def _store_of_2476ecf(named_edf, tmp_path):
    """A store as 2476ecf's ``store --recordings`` wrote it: each description the file
    and the header's patient code (here rewritten into a store of today)."""
    store = tmp_path / "old-store"
    args = ["store", "--recordings", str(named_edf), "--out", str(store)]
    assert main([*args, "--window-seconds", "10", "--stride-seconds", "10"]) == 0
    recordings = json.loads((store / "recordings.json").read_text())
    for meta, (code, _, _) in zip(recordings, PATIENTS, strict=True):
        meta["description"] = {"file": meta["description"]["file"], "subject": code}
    (store / "recordings.json").write_text(json.dumps(recordings))
    return store


def test_a_store_of_2476ecf_warns_on_open_and_is_rewritten_clean(named_edf, tmp_path, caplog):
    store = _store_of_2476ecf(named_edf, tmp_path)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        SingleChannelWindows.from_store(store)  # as pretrain opens it
        read_window_store(store)  # once in a process
        read_window_store(store)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(store / "recordings.json") in warnings[0]
    assert "4 recordings (S01R01.edf, S01R02.edf, S02R01.edf and 1 more)" in warnings[0]
    assert f"{COMMAND} '{store}'" in warnings[0]
    assert _named(warnings[0]) == []  # the warning names the files, not the people
    # the documented function rewrites it in place, atomically
    assert anonymize(store) == [store / "recordings.json"]
    assert _files_naming(store) == {}
    assert not list(store.glob(".*.tmp"))  # no temporary file left
    recordings = read_window_store(store)[2]["recordings"]
    assert [r["description"]["subject"] for r in recordings] == [
        "S01R01", "S01R02", "S02R01", "S02R02",
    ]  # fmt: skip
    caplog.clear()
    read_window_store(store)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    assert anonymize(store) == []  # nothing left to rewrite


@pytest.mark.slow  # two processes, one after the other, each importing the package
def test_the_documented_command_rewrites_a_store_of_2476ecf(named_edf, tmp_path):
    store = _store_of_2476ecf(named_edf, tmp_path)
    assert set(_files_naming(store)) == {"recordings.json"}
    command = [sys.executable, "-m", "braindecode_pars.store.identity", str(store)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{store}: recordings.json\n"
    assert _files_naming(store) == {} and not list(store.glob(".*.tmp"))
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.stdout == f"{store}: nothing to rewrite\n"


def test_a_run_and_an_export_of_2476ecf_are_rewritten_clean(named_edf, tmp_path, caplog):
    store = tmp_path / "store"
    args = ["store", "--recordings", str(named_edf), "--out", str(store)]
    assert main([*args, "--window-seconds", "10", "--stride-seconds", "10"]) == 0
    run, out = _pretrain_and_export(tmp_path, store, "new")
    # 2476ecf's run listed the recordings by file, or by the header's code without one
    config = json.loads((run / "config.json").read_text())
    for key in ("data.n_recordings", "data.recordings_hash"):
        del config[key]
        config["run_info"].remove(key)
    config["data.recordings"] = ["Mueller", "Okonkwo", "Mueller", "Lindqvist"]
    config["run_info"] = sorted([*config["run_info"], "data.recordings"])
    (run / "config.json").write_text(json.dumps(config, indent=1))
    old_export = tmp_path / "old-export"
    with caplog.at_level(logging.WARNING):
        main(["export", "--run", str(run), "--out", str(old_export)])
    assert str(run / "config.json") in caplog.text and COMMAND in caplog.text
    assert _files_naming(old_export) == {}  # the export counts them, from now on
    assert "- recordings: 4" in (old_export / "README.md").read_text()
    # an export of 2476ecf: run_config.json and the card list them
    (old_export / "run_config.json").write_text(json.dumps(config, indent=1))
    card = (old_export / "README.md").read_text()
    card = card.replace("- recordings: 4", "- recordings (4): Mueller, Okonkwo, Mueller, Lindqvist")
    (old_export / "README.md").write_text(card)
    assert set(_files_naming(tmp_path, skip=("clinic",))) == {
        f"{run.name}/config.json", "old-export/run_config.json", "old-export/README.md",
    }  # fmt: skip
    assert [f.name for f in anonymize(run)] == ["config.json"]
    assert [f.name for f in anonymize(old_export)] == ["run_config.json", "README.md"]
    assert _files_naming(tmp_path, skip=("clinic",)) == {}
    rewritten = json.loads((run / "config.json").read_text())
    assert rewritten["data.n_recordings"] == 4 and "data.recordings" not in rewritten
    assert "- recordings: 4" in (old_export / "README.md").read_text()
    with pytest.raises(FileNotFoundError, match="is not a window store, a pretraining run"):
        anonymize(named_edf)
    # the same run resumed by pretrain: a warning, and its record counts them from now on
    (run / "config.json").write_text(json.dumps(config, indent=1))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _pretrain(tmp_path, store, run)
    assert f"'{run / 'config.json'}' lists the run's 4 recordings by name" in caplog.text
    assert _files_naming(run) == {}


#: A per-patient store folder and a recording named after its patient, as clinics write
#: them: neither part may reach a card, absolute or relative, last component or whole.
ZELINSKI_STORE = "/data/stores/Zelinski_M"
ZELINSKI_RECORDING = "data/clinic/Zelinski_Margarethe_1962.edf"


@pytest.mark.parametrize(
    "command, public",
    [
        pytest.param(
            f"braindecode-pars pretrain --store {ZELINSKI_STORE} --out runs/mine --steps 2",
            "braindecode-pars pretrain --store <store> --out <out> --steps 2",
            id="absolute-store",
        ),
        pytest.param(
            f"braindecode-pars store --recordings {ZELINSKI_RECORDING} "
            "data/clinic/Zelinski_Anna_1990.edf --out stores/Zelinski --window-seconds 10",
            "braindecode-pars store --recordings <recordings> --out <out> --window-seconds 10",
            id="relative-recordings",
        ),
        pytest.param(
            f"braindecode-pars pretrain --store={ZELINSKI_STORE} --config=Zelinski.json",
            "braindecode-pars pretrain --store=<store> --config=<config>",
            id="flag=value",
        ),
        pytest.param(
            f"python convert.py {ZELINSKI_RECORDING} ~/Zelinski -m braindecode_pars.cli",
            "python <path> <path> <path> -m braindecode_pars.cli",
            id="paths-of-no-flag",
        ),
    ],
)
def test_a_card_and_an_exported_config_hold_placeholders_for_paths(command, public):
    from braindecode_pars import PatchEncoder
    from braindecode_pars.models.card import model_card, public_run_config

    config = {"data.store": ZELINSKI_STORE, "command": command, "lr": 0.001}
    exported = public_run_config(config)
    assert exported == {"data.store": "<store>", "command": public, "lr": 0.001}
    encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    card = model_card(encoder, run_config=config, name="export")
    assert "Zelinski" not in card and "/data" not in card and "- store:" not in card
    assert f"```bash\n{public}\n```" in card
    assert public_run_config(exported) == exported  # made public twice: the same


def test_a_path_the_exporter_names_is_called_by_its_name_and_a_name_is_not_a_path():
    from braindecode_pars import PatchEncoder
    from braindecode_pars.models.card import model_card, public_run_config

    command = f"braindecode-pars pretrain --store {ZELINSKI_STORE} --out runs/mine"
    config = {"data.store": ZELINSKI_STORE, "command": command}
    names = {"store": "tuh abnormal", "out": "pars-small"}
    exported = public_run_config(config, names)
    assert exported["command"] == (
        "braindecode-pars pretrain --store 'tuh abnormal' --out pars-small"
    )  # quoted for the shell where a name needs it
    assert exported["data.store"] == "tuh abnormal" and exported["public_names"] == names
    assert public_run_config(exported) == exported  # the names kept in the record
    encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    card = model_card(encoder, run_config=exported)
    assert "- store: tuh abnormal\n" in card and exported["command"] in card
    assert "Zelinski" not in card
    with pytest.raises(ValueError, match=r"'names' gives 'store' the name '/data/tuh'"):
        public_run_config(config, {"store": "/data/tuh"})
    with pytest.raises(ValueError, match=r"'names' may name \[.*'store'.*\], but got 'stor'"):
        public_run_config(config, {"stor": "tuh"})

"""The lab's fault harness tested on recorded trial records (issue 89): its judging and
reporting code run on the rows that real trials gave, without starting a process (the
trials themselves run in ``make test-faults``).

The records in ``benchmarks/tests/records/`` were written by ``--records`` of
``benchmarks/bench_faults_pretrain.py`` and ``benchmarks/bench_faults.py`` (each names
the command, the commit and the date). The tests check that:

- the records meet the guarantees the live tests (``test_pretrain_faults.py``,
  ``test_store_faults.py``) assert of a trial, so that a failure recorded again shows;
- the reports (``write_table``, ``stress_section``, ``store_lines``) have a row per
  recorded trial and count what the records hold;
- a record perturbed to a failure (a process left, a group not empty, a rerun that lost
  steps, a store of other bytes, a SIGKILL by torchrun) breaks the guarantee concerned
  and is reported as that failure.

Record them again after a change to the harness or to what it runs, from the
repository's root (about 8 CPU minutes together)::

    python -m benchmarks.bench_faults_pretrain --trials 1 --group-trials 1 \\
        --torchrun-trials 1 --stress-trials 1 --stress-load 0 \\
        --out /tmp/faults_pretrain.md --records benchmarks/tests/records/faults_pretrain.json
    python -m benchmarks.bench_faults --part store --trials 1 --recordings 5 \\
        --records benchmarks/tests/records/faults_store.json
"""

import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import bench_faults, bench_faults_pretrain
from benchmarks.lib.fault_records import local_places, read_records, scrub

RECORDS = Path(__file__).parent / "records"


@pytest.fixture
def pretrain():
    """The records of ``bench_faults_pretrain`` (a fresh copy: tests perturb them)."""
    return read_records(RECORDS / "faults_pretrain.json")


@pytest.fixture
def store():
    """The records of ``bench_faults --part store`` (a fresh copy)."""
    return read_records(RECORDS / "faults_store.json")


# ---- the guarantees the live tests assert, as the names of those a record breaks -----


def _broken(guarantees):
    return [name for name, holds in guarantees.items() if not holds]


def trial_broken(r):
    """The guarantees that a trial of ``bench_faults_pretrain.trial`` breaks (those of
    ``test_pretrain_faults.py`` for its kind: its process, its whole group, torchrun)."""
    per_epoch, killed = r["steps_per_epoch"], r["signal"] == "SIGKILL"
    signalled = r["signalled_at"][0]
    guarantees = {
        "nothing left": r["left"] == [],
        "rerun finished": r["rerun_code"] == 0 and r["final_epoch"] == r["epochs"],
        "rerun took every step once": r["final_steps"] == r["epochs"] * per_epoch,
    }
    if killed:
        guarantees["killed"] = r["code"] == -signal.SIGKILL
        guarantees["at most the interval lost"] = r["epoch"] >= signalled >= 2
    else:
        code = r["code"] != 0 if r["torchrun"] else r["code"] == 128 + signal.Signals[r["signal"]]
        message = f"stopped by {r['signal']}" in r["message"] and (
            r["group"] or "same command" in r["message"]
        )
        guarantees["stopped, saying so"] = code and message
        guarantees["saved the step reached"] = (
            r["optimizer_steps"] == r["epoch"] * per_epoch + r["steps"] and r["epoch"] >= signalled
        )
    if r["group"]:
        guarantees["workers signalled"] = r["workers"] >= 2
    if r["group"] or r["torchrun"]:
        guarantees["group empty"] = bool(r["group_empty"])
    if r["torchrun"]:
        guarantees["forwarded to both"] = r["forwarded"] == 2
        guarantees["not SIGKILLed"] = not r["forced"] and r["seconds"] < 30
        guarantees["a new state before the end"] = (
            r["optimizer_steps"] > r["signalled_at"][2] and r["epoch"] < r["epochs"]
        )
        guarantees["processes seen"] = r["workers"] >= 4
    return _broken(guarantees)


def stress_broken(r):
    """The guarantees that a stress trial (``bench_faults_pretrain.stress_trial``) breaks."""
    return _broken(
        {
            "saved in the grace": r["signalled"] and r["seconds"] < 30,
            "not SIGKILLed": not (r["forced"] or r["killed"]),
            "stopped, a state saved": r["code"] != 0 and r["saved"] is not None,
            "rerun finished": r["rerun_code"] == 0,
            "rerun took every step once": r["final_steps"]
            == bench_faults_pretrain.STRESS_EPOCHS * r["steps_per_epoch"],
            "same weights": bool(r["same_weights"]),
        }
    )


def pretrain_disk_broken(d):
    """The guarantees that ``bench_faults_pretrain.full_disk``'s figures break."""
    return _broken(
        {
            "refused": d["code"] == 1
            and "Could not write the checkpoint" in d["message"]
            and "stays" in d["message"],
            "state kept": d["state_kept"],
            "rerun finished": d["rerun_code"] == 0,
            "rerun took every step once": d["final_steps"]
            == bench_faults_pretrain.EPOCHS * d["steps_per_epoch"],
        }
    )


def store_trial_broken(r):
    """The guarantees that a trial of ``bench_faults.store_trial`` breaks (those of
    ``test_store_faults.py``; a SIGTERM to a whole group before any recording is
    committed may end it before it handles the signal, as faults_store.md says)."""
    if r["signal"] == "SIGKILL":
        status = r["status"] == -signal.SIGKILL
    else:
        stopped = r["status"] == 128 + signal.SIGTERM and (
            "stopped by SIGTERM after" in r["output"]
            and "Run the same command to resume" in r["output"]
        )
        at_start = r["group"] and r["committed"] == 0 and r["status"] == -signal.SIGTERM
        status = stopped or at_start or r["status"] == 0
    guarantees = {"status": status, "nothing left": r["left"] == 0, "same bytes": r["equal"]}
    if r["group"]:
        guarantees["group empty"] = bool(r["group_empty"])
    return _broken(guarantees)


def finish_broken(r):
    """The guarantees that a kill at a point of the store's finish
    (``bench_faults.finish_kill``) breaks: killed, a temporary file left only while a
    file other than the data is written, the store refused as incomplete before its
    index is written and whole after, no process left, the same bytes once resumed."""
    from braindecode_pars.store.write import FINISH_STEPS

    index = list(FINISH_STEPS).index("index.npz")
    whole = r["when"] == "after" and list(FINISH_STEPS).index(r["step"]) >= index
    during = r["when"] == "during" and r["step"] != "data"
    return _broken(
        {
            "killed": r["status"] == -signal.SIGKILL,
            "temporary files": len(r["temporary"]) == (1 if during else 0),
            "whole or refused": r["left"] == ("whole" if whole else "refused"),
            "group empty": bool(r["group_empty"]),
            "same bytes": r["equal"],
        }
    )


def store_rest_broken(results):
    """The guarantees that the full disk, the second build and the trials together
    (``bench_faults``) break."""
    disk, second, rows = results["disk"], results["second"], results["trials"]
    output = disk["output"]
    return _broken(
        {
            "disk refused": disk["status"] == 1
            and "Cannot write the store in" in output
            and "File too large" in output
            and "make room and call again with the same settings" in output,
            "disk kept the recordings": disk["kept"] == 2,
            "disk same bytes": disk["equal"],
            "second refused": second["message"] is not None
            and f"is in use by process {second['pid']} (a store build)" in second["message"],
            "first ended clean": second["status"] == 0 and second["equal"],
            "workers there": any(r["workers"] == 2 for r in rows),
            "a SIGTERM mid-build": any(
                r["signal"] == "SIGTERM" and r["status"] == 143 for r in rows
            ),
        }
    )


# ---- the reports, parsed ---------------------------------------------------------


def sections(text):
    """``{heading: {"rows": [{column: cell}], "text": the other lines}}`` of a Markdown
    report: each ``## `` section's table and its prose."""
    found, rows, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            rows, header = [], None
            found[line[3:]] = {"rows": rows, "text": []}
        elif rows is None:
            continue
        elif line.startswith("|---"):
            continue
        elif line.startswith("| "):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if header is None:
                header = cells
            else:
                rows.append(dict(zip(header, cells, strict=True)))
        else:
            found[list(found)[-1]]["text"].append(line)
    return {head: {"rows": s["rows"], "text": "\n".join(s["text"])} for head, s in found.items()}


MAIN = "The signal to the run's process (one DataLoader worker)"
GROUP = "The signal to the whole job at once (`--workers 2`)"
TORCHRUN = "SIGUSR1 under torchrun (2 CPU processes)"
DISK = "A full disk"
STRESS = "SIGTERM to a whole torchrun job at a chosen moment, under load (stress)"


def pretrain_report(records, tmp_path):
    """``faults_pretrain.md`` as ``bench_faults_pretrain.main`` writes it from the trials'
    rows: :func:`write_table`, then the stress section in its place; its sections."""
    bench = bench_faults_pretrain
    out = tmp_path / "faults_pretrain.md"
    args = SimpleNamespace(**records["args"], out=out)
    bench.write_table(records["rows"], records["disk"], args, records["seconds"], records["load"])
    stress = records["stress"]
    section = bench.stress_section(
        stress["rows"], stress["load"], stress["reference_seconds"], commit=records["commit"]
    )
    bench.replace_section(out, section)
    return sections(out.read_text())


STORE_MAIN = "The signal to the command's process"
STORE_GROUP = "The signal to the whole job at once"
FINISH = "A kill at each point of the store's finish"
STORE_REST = "A full disk, a second build"


def store_report(records):
    """``faults_store.md`` as ``bench_faults.main`` writes it from the trials' results
    (:func:`bench_faults.store_lines`); its sections."""
    args = records["args"]
    lines = bench_faults.store_lines(records, args["trials"], args["seed"], args["recordings"])
    return sections("\n".join(lines))


def _kind(r):
    return "torchrun" if r["torchrun"] else "group" if r["group"] else "main"


# ---- the records ---------------------------------------------------------------------


def test_the_records_name_their_command_and_commit_and_hold_every_kind_of_trial(pretrain, store):
    for records, script in ((pretrain, "bench_faults_pretrain"), (store, "bench_faults")):
        assert records["command"].startswith(f"python -m benchmarks.{script} ")
        assert "--records benchmarks/tests/records/" in records["command"]
        assert len(records["commit"]) >= 7 and len(records["date"]) == 10
        assert records["cpu_seconds"] > 0  # what recording them cost
    rows = pretrain["rows"]
    kinds = {(_kind(r), r["signal"]) for r in rows}
    assert {("main", "SIGTERM"), ("main", "SIGKILL"), ("torchrun", "SIGUSR1")} <= kinds
    assert {("group", "SIGTERM"), ("group", "SIGKILL")} <= kinds
    assert all(r["n_workers"] == 2 for r in rows if r["group"])
    assert len(pretrain["stress"]["rows"]) >= 1 and pretrain["disk"]
    trials = {(r["group"], r["signal"]) for r in store["trials"]}
    assert trials == {(False, "SIGTERM"), (False, "SIGKILL"), (True, "SIGTERM"), (True, "SIGKILL")}
    assert [(r["when"], r["step"]) for r in store["finish"]] == bench_faults.finish_points()


def test_the_records_hold_nothing_local(pretrain, store):
    """Written through ``scrub``: scrubbing them again (this machine's folders, host and
    any absolute path) changes nothing."""
    places = local_places()
    for records in (pretrain, store):
        assert scrub(records, places) == records
    pretrain["rows"][0]["message"] += " in '/tmp/tmpabc123/run-x'"
    assert scrub(pretrain, places) != pretrain


def test_scrub_puts_placeholders_for_the_trials_folder_and_any_absolute_path():
    folder = "/var/folders/tmpq1w2e3"
    found = scrub(
        {"a": (f"'{folder}/run' failed", 3), "b": ["see /opt/x/y.py, line 2", "1/2 of <tmp>/z"]},
        local_places(folder),
    )
    assert found == {"a": ["'<tmp>/run' failed", 3], "b": ["see <path>, line 2", "1/2 of <tmp>/z"]}


def test_the_recorded_trials_keep_the_harness_guarantees(pretrain, store):
    """What the live tests assert of a trial holds of each recorded one: a failure
    recorded again would show here."""
    for r in pretrain["rows"]:
        assert trial_broken(r) == [], r
    for r in pretrain["stress"]["rows"]:
        assert stress_broken(r) == [], r
    assert pretrain_disk_broken(pretrain["disk"]) == []
    for r in store["trials"]:
        assert store_trial_broken(r) == [], r
    for r in store["finish"]:
        assert finish_broken(r) == [], r
    assert store_rest_broken(store) == []


def _first(rows, kind, sig=None):
    return next(r for r in rows if _kind(r) == kind and sig in (None, r["signal"]))


#: Records perturbed to a failure: (what is changed, in which trial, the guarantee broken).
PRETRAIN_FAILURES = {
    "a process left": ("main", "SIGTERM", {"left": [4242]}, "nothing left"),
    "a rerun that failed": ("main", "SIGKILL", {"rerun_code": 1}, "rerun finished"),
    "a rerun that lost steps": ("group", "SIGTERM", "lose a step", "rerun took every step once"),
    "a state off the step": ("main", "SIGTERM", "save off the step", "saved the step reached"),
    "an older state after SIGKILL": ("main", "SIGKILL", "save an older state",
                                     "at most the interval lost"),
    "no message": ("main", "SIGTERM", {"message": "Traceback"}, "stopped, saying so"),
    "a group not empty": ("group", "SIGKILL", {"group_empty": False}, "group empty"),
    "no worker seen": ("group", "SIGTERM", {"workers": 0}, "workers signalled"),
    "a SIGKILL by torchrun": ("torchrun", None, {"forced": True}, "not SIGKILLed"),
    "forwarded to one": ("torchrun", None, {"forwarded": 1}, "forwarded to both"),
    "torchrun's groups not empty": ("torchrun", None, {"group_empty": False}, "group empty"),
}  # fmt: skip


def _perturb(r, change):
    if change == "lose a step":
        return {**r, "final_steps": r["final_steps"] - 1}
    if change == "save off the step":
        return {**r, "optimizer_steps": r["optimizer_steps"] - 1}
    if change == "save an older state":
        return {**r, "epoch": r["signalled_at"][0] - 1}
    return {**r, **change}


@pytest.mark.parametrize("failure", PRETRAIN_FAILURES)
def test_a_pretrain_trial_perturbed_to_a_failure_breaks_its_guarantee(pretrain, failure):
    kind, sig, change, broken = PRETRAIN_FAILURES[failure]
    r = _first(pretrain["rows"], kind, sig)
    assert trial_broken(r) == []
    assert broken in trial_broken(_perturb(r, change))


@pytest.mark.parametrize(
    "change, broken",
    [
        ({"killed": True}, "not SIGKILLed"),
        ({"forced": True}, "not SIGKILLed"),
        ({"seconds": 31.0}, "saved in the grace"),
        ({"saved": None}, "stopped, a state saved"),
        ({"same_weights": False}, "same weights"),
        ({"final_steps": 1}, "rerun took every step once"),
    ],
)
def test_a_stress_trial_perturbed_to_a_failure_breaks_its_guarantee(pretrain, change, broken):
    (r, *_) = pretrain["stress"]["rows"]
    assert broken in stress_broken({**r, **change})


@pytest.mark.parametrize(
    "change, broken",
    [
        ({"state_kept": False}, "state kept"),
        ({"code": 0}, "refused"),
        ({"final_steps": 29}, "rerun took every step once"),
    ],
)
def test_a_pretrain_full_disk_perturbed_to_a_failure_breaks_its_guarantee(pretrain, change, broken):
    assert broken in pretrain_disk_broken({**pretrain["disk"], **change})


@pytest.mark.parametrize(
    "group, sig, change, broken",
    [
        (False, "SIGTERM", {"left": 1}, "nothing left"),
        (False, "SIGKILL", {"equal": False}, "same bytes"),
        (False, "SIGTERM", {"status": -15}, "status"),
        (True, "SIGKILL", {"group_empty": False}, "group empty"),
        (True, "SIGKILL", {"status": 0}, "status"),
    ],
)
def test_a_store_trial_perturbed_to_a_failure_breaks_its_guarantee(
    store, group, sig, change, broken
):
    r = next(r for r in store["trials"] if r["group"] == group and r["signal"] == sig)
    assert broken in store_trial_broken({**r, **change})


@pytest.mark.parametrize(
    "point, change, broken",
    [
        (0, {"left": "WRONG"}, "whole or refused"),
        (-1, {"left": "refused"}, "whole or refused"),
        (2, {"temporary": []}, "temporary files"),
        (0, {"equal": False}, "same bytes"),
        (0, {"group_empty": False}, "group empty"),
    ],
)
def test_a_finish_kill_perturbed_to_a_failure_breaks_its_guarantee(store, point, change, broken):
    assert broken in finish_broken({**store["finish"][point], **change})


@pytest.mark.parametrize(
    "part, change, broken",
    [
        ("disk", {"equal": False}, "disk same bytes"),
        ("disk", {"kept": 1}, "disk kept the recordings"),
        ("second", {"message": None}, "second refused"),
        ("second", {"equal": False}, "first ended clean"),
    ],
)
def test_a_full_disk_or_second_build_perturbed_to_a_failure_breaks_its_guarantee(
    store, part, change, broken
):
    store[part] = {**store[part], **change}
    assert broken in store_rest_broken(store)


# ---- the reports on the records ------------------------------------------------------


def test_the_pretrain_report_has_a_row_per_trial_and_counts_what_the_records_hold(
    pretrain, tmp_path
):
    report = pretrain_report(pretrain, tmp_path)
    rows = pretrain["rows"]
    for head, kind in ((MAIN, "main"), (GROUP, "group"), (TORCHRUN, "torchrun")):
        recorded = [r for r in rows if _kind(r) == kind]
        table = report[head]["rows"]
        assert len(table) == len(recorded)
        for cells, r in zip(table, recorded, strict=True):
            assert cells["signal"] == r["signal"]
            assert cells["saved: epoch + steps"] == f"{r['epoch']} + {r['steps']}"
            assert cells["processes left"] == str(len(r["left"]))
            uninterrupted = r["epochs"] * r["steps_per_epoch"]
            assert cells["rerun: steps / uninterrupted"] == f"{r['final_steps']} / {uninterrupted}"
            if kind != "main":
                assert cells["group empty" if kind == "group" else "groups empty"] == (
                    "yes" if r["group_empty"] else "NO"
                )
        if kind == "main":
            continue
        n = len(recorded)
        resumed = sum(
            r["rerun_code"] == 0 and r["final_steps"] == r["epochs"] * r["steps_per_epoch"]
            for r in recorded
        )
        left = sum(len(r["left"]) for r in recorded)
        empty = sum(bool(r["group_empty"]) for r in recorded)
        text = report[head]["text"]
        assert f"uninterrupted run: {resumed} of {n}; processes left: {left}; " in text
        assert f"groups empty: {empty} of {n}." in text
    stress = pretrain["stress"]["rows"]
    assert len(report[STRESS]["rows"]) == len(stress)
    n = len(stress)
    within = sum(s["seconds"] < 30 and not (s["forced"] or s["killed"]) for s in stress)
    same = sum(bool(s["same_weights"]) for s in stress)
    text = report[STRESS]["text"]
    assert f"none SIGKILLed: {within} of {n};" in text
    assert f"never stopped: {same} of {n}." in text
    assert f"at commit `{pretrain['commit']}`" in text
    kept = "kept" if pretrain["disk"]["state_kept"] else "CHANGED"
    assert f"the saved state {kept};" in report[DISK]["text"]


#: Records perturbed to a failure, and what the report must say of it: (the section, the
#: trial's kind and signal, the change, the column and its cell, a sentence of the
#: section's text).
REPORTED = {
    "a process left": (GROUP, "group", "SIGKILL", {"left": [4242]}, "processes left", "1",
                       "processes left: 1;"),
    "a group not empty": (GROUP, "group", "SIGTERM", {"group_empty": False}, "group empty",
                          "NO", "groups empty: {m} of {n}."),
    "a rerun that lost steps": (GROUP, "group", "SIGTERM", "lose a step",
                                "rerun: steps / uninterrupted", "{lost}",
                                "uninterrupted run: {m} of {n};"),
    "a rerun that failed": (GROUP, "group", "SIGKILL", {"rerun_code": 1}, None, None,
                            "uninterrupted run: {m} of {n};"),
    "a SIGKILL by torchrun": (TORCHRUN, "torchrun", None, {"forced": True}, "SIGKILLed", "yes",
                              None),
    "torchrun's groups not empty": (TORCHRUN, "torchrun", None, {"group_empty": False},
                                    "groups empty", "NO", "groups empty: {m} of {n}."),
    "a torchrun state off the step": (TORCHRUN, "torchrun", None, "save off the step", None,
                                      None, "the epochs and steps saved): {m} of {n};"),
    "a process left by its own signal": (MAIN, "main", "SIGTERM", {"left": [4242]},
                                         "processes left", "1", None),
    "a state off the step": (MAIN, "main", "SIGTERM", "save off the step", "steps lost",
                             "NOT the step reached", None),
    "an older state after SIGKILL": (MAIN, "main", "SIGKILL", "save an older state",
                                     "steps lost", "MORE (an older state)", None),
}  # fmt: skip


@pytest.mark.parametrize("failure", REPORTED)
def test_a_pretrain_record_perturbed_to_a_failure_is_reported_as_that_failure(
    pretrain, tmp_path, failure
):
    head, kind, sig, change, column, cell, sentence = REPORTED[failure]
    rows = pretrain["rows"]
    r = _first(rows, kind, sig)
    i = rows.index(r)
    rows[i] = _perturb(r, change)
    report = pretrain_report(pretrain, tmp_path)
    same_kind = [x for x in rows if _kind(x) == kind]
    if column is not None:
        lost = f"{rows[i]['final_steps']} / {r['epochs'] * r['steps_per_epoch']}"
        assert report[head]["rows"][same_kind.index(rows[i])][column] == cell.format(lost=lost)
    if sentence is not None:
        n = len(same_kind)
        assert sentence.format(m=n - 1, n=n) in report[head]["text"]


@pytest.mark.parametrize(
    "change, column, cell, sentence",
    [
        ({"killed": True}, "SIGKILLed", "yes", "none SIGKILLed: {m} of {n};"),
        ({"forced": True}, "SIGKILLed", "yes", "none SIGKILLed: {m} of {n};"),
        ({"same_weights": False}, "same weights", "NO", "never stopped: {m} of {n}."),
        ({"final_steps": 1}, None, None, "uninterrupted run: {m} of {n};"),
        ({"group_empty": False}, "group empty", "NO", None),
    ],
)
def test_a_stress_record_perturbed_to_a_failure_is_reported_as_that_failure(
    pretrain, tmp_path, change, column, cell, sentence
):
    rows = pretrain["stress"]["rows"]
    rows[0] = {**rows[0], **change}
    report = pretrain_report(pretrain, tmp_path)[STRESS]
    if column is not None:
        assert report["rows"][0][column] == cell
    if sentence is not None:
        assert sentence.format(m=len(rows) - 1, n=len(rows)) in report["text"]


def test_a_pretrain_full_disk_that_changed_the_state_is_reported(pretrain, tmp_path):
    pretrain["disk"]["state_kept"] = False
    assert "the saved state CHANGED;" in pretrain_report(pretrain, tmp_path)[DISK]["text"]


def test_the_store_report_has_a_row_per_trial_and_counts_what_the_records_hold(store):
    report = store_report(store)
    for head, group in ((STORE_MAIN, False), (STORE_GROUP, True)):
        recorded = [r for r in store["trials"] if r["group"] == group]
        table = report[head]["rows"]
        assert len(table) == len(recorded)
        for cells, r in zip(table, recorded, strict=True):
            assert (cells["signal"], cells["exit status"]) == (r["signal"], str(r["status"]))
            assert cells["left"] == str(r["left"])
            assert cells["resumed store equal"] == ("yes" if r["equal"] else "NO")
            if group:
                assert cells["group empty"] == ("yes" if r["group_empty"] else "NO")
        n = len(recorded)
        equal = sum(r["equal"] for r in recorded)
        text = report[head]["text"]
        assert f"equal after the resume: {equal} of {n}; processes left: " in text
        assert f"processes left: {sum(r['left'] for r in recorded)}" in text
        if group:
            assert f"groups empty: {sum(bool(r['group_empty']) for r in recorded)} of {n}." in text
    finish = store["finish"]
    table = report[FINISH]["rows"]
    assert [c["point"] for c in table] == [f"{r['when']} {r['step']}" for r in finish]
    assert [c["store left"] for c in table] == [r["left"] for r in finish]
    whole = sum(r["left"] == "whole" for r in finish)
    refused = sum(r["left"] == "refused" for r in finish)
    resumed = sum(r["equal"] for r in finish)
    assert (
        f"Points: {len(finish)}; left whole: {whole}, refused as incomplete: {refused}, read "
        f"back wrong: {len(finish) - whole - refused}; resumed to the same bytes: {resumed} of "
        f"{len(finish)}." in report[FINISH]["text"]
    )
    disk, second = store["disk"], store["second"]
    text = report[STORE_REST]["text"]
    assert f"exit status {disk['status']}, refused with a message: yes, " in text
    assert f"recordings kept: {disk['kept']}, resumed store equal: yes." in text
    assert f"built by process {second['pid']}: refused (" in text
    assert f"ended with status {second['status']}, its store equal: yes." in text


@pytest.mark.parametrize(
    "group, sig, change, column, cell, sentence",
    [
        (False, "SIGKILL", {"equal": False}, "resumed store equal", "NO",
         "equal after the resume: {m} of {n};"),
        (False, "SIGTERM", {"left": 1}, "left", "1", "processes left: 1"),
        (True, "SIGTERM", {"group_empty": False}, "group empty", "NO",
         "groups empty: {m} of {n}."),
        (True, "SIGKILL", {"equal": False}, "resumed store equal", "NO",
         "equal after the resume: {m} of {n};"),
        (True, "SIGKILL", {"left": 2}, "left", "2", "processes left: 2"),
    ],
)  # fmt: skip
def test_a_store_record_perturbed_to_a_failure_is_reported_as_that_failure(
    store, group, sig, change, column, cell, sentence
):
    rows = store["trials"]
    i = next(i for i, r in enumerate(rows) if r["group"] == group and r["signal"] == sig)
    rows[i] = {**rows[i], **change}
    head = STORE_GROUP if group else STORE_MAIN
    report = store_report(store)[head]
    same_kind = [r for r in rows if r["group"] == group]
    assert report["rows"][same_kind.index(rows[i])][column] == cell
    n = len(same_kind)
    assert sentence.format(m=n - 1, n=n) in report["text"]


@pytest.mark.parametrize(
    "point, change, cell, sentence",
    [
        (0, {"left": "WRONG"}, ("store left", "WRONG"), "read back wrong: 1;"),
        (0, {"equal": False}, ("resumed store equal", "NO"), "the same bytes: {m} of {n}."),
        (-1, {"group_empty": False}, ("group empty", "NO"), None),
    ],
)
def test_a_finish_record_perturbed_to_a_failure_is_reported_as_that_failure(
    store, point, change, cell, sentence
):
    finish = store["finish"]
    finish[point] = {**finish[point], **change}
    report = store_report(store)[FINISH]
    column, value = cell
    assert report["rows"][point][column] == value
    if sentence is not None:
        assert sentence.format(m=len(finish) - 1, n=len(finish)) in report["text"]


@pytest.mark.parametrize(
    "part, change, sentence",
    [
        ("disk", {"equal": False}, "resumed store equal: NO."),
        ("disk", {"output": "Traceback"}, "refused with a message: NO,"),
        ("second", {"message": None}, ": NOT refused ("),
        ("second", {"equal": False}, "its store equal: NO."),
    ],
)
def test_a_full_disk_or_second_build_perturbed_to_a_failure_is_reported(
    store, part, change, sentence
):
    store[part] = {**store[part], **change}
    assert sentence in store_report(store)[STORE_REST]["text"]

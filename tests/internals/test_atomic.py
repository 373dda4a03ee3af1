"""The one atomic write of the package: a file is found as it was or whole, its bytes and
its rename flushed to the disk in that order, and a failed write leaves nothing behind."""

import json
import os
import stat

import numpy as np
import pytest

from braindecode_pars._util import atomic
from braindecode_pars._util.atomic import (
    atomic_path,
    atomic_write,
    rename_atomic,
    temporary_files,
    write_atomic,
)


def test_the_content_arrives_whole_in_text_and_in_bytes(tmp_path):
    target = tmp_path / "info.json"
    content = {"epoch": 3, "name": "Fp1-F7 µV", "rows": list(range(1000))}
    with atomic_write(target) as f:
        json.dump(content, f)
    assert json.loads(target.read_text(encoding="utf-8")) == content
    arrays = tmp_path / "index.npz"
    index = np.arange(300).reshape(100, 3)
    with atomic_write(arrays, "wb") as f:
        np.savez(f, index=index)
    with np.load(arrays) as saved:
        np.testing.assert_array_equal(saved["index"], index)
    write_atomic(target, "replaced")  # over an existing file
    assert target.read_text() == "replaced"
    write_atomic(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.npz", "info.json"]


def test_a_failure_while_writing_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_write(target) as f:
            f.write("half of the new")
            f.flush()
            assert temporary_files(target)  # the bytes went to a temporary file
            raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert temporary_files(target) == [] and os.listdir(tmp_path) == ["state.json"]
    # an interrupt (Ctrl-C) too, and a writer that takes a path
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as tmp:
            tmp.write_text("new")
            raise KeyboardInterrupt
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["state.json"]
    # a new file that fails is never created
    with pytest.raises(ValueError):
        with atomic_write(tmp_path / "new.json") as f:
            raise ValueError
    assert os.listdir(tmp_path) == ["state.json"]


def test_the_file_then_the_folder_are_flushed_around_the_rename(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    target.write_text("old")
    calls = []
    real_fsync = os.fsync

    def fsync(fd):
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        # what a reader of the target finds at the time of the call
        calls.append((kind, os.fstat(fd).st_ino, target.read_text()))
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    write_atomic(target, "new")
    folder_inode = tmp_path.stat().st_ino
    assert [(kind, found) for kind, _, found in calls] == [("file", "old"), ("folder", "new")]
    assert calls[0][1] == target.stat().st_ino  # the file flushed is the one renamed
    assert calls[1][1] == folder_inode
    calls.clear()
    with atomic_path(target) as tmp:  # a writer that takes a path: the same order
        tmp.write_text("newer")
    assert [(kind, found) for kind, _, found in calls] == [("file", "new"), ("folder", "newer")]
    calls.clear()
    write_atomic(target, "unflushed", fsync=False)
    assert calls == []


def test_a_rename_into_place_flushes_the_folder(tmp_path, monkeypatch):
    part = tmp_path / "data.part"
    part.write_bytes(b"\x01" * 64)
    flushed = []
    monkeypatch.setattr(
        atomic.os, "fsync", lambda fd: flushed.append(stat.S_ISDIR(os.fstat(fd).st_mode))
    )
    rename_atomic(part, tmp_path / "data.f32")
    assert not part.exists() and (tmp_path / "data.f32").read_bytes() == b"\x01" * 64
    assert flushed == [True]


def test_a_link_to_the_file_already_in_place_leaves_no_temporary_name(tmp_path):
    # processes that link one verified file into place at once: the last rename is of
    # two names of one file, which POSIX's rename leaves as they are
    source = tmp_path / "source.edf"
    source.write_bytes(b"EDF")
    target = tmp_path / "run.edf"
    os.link(source, target)  # another process was first
    with atomic_path(target) as tmp:
        os.link(source, tmp)
    assert target.read_bytes() == b"EDF"
    assert sorted(os.listdir(tmp_path)) == ["run.edf", "source.edf"]
    rename_atomic(target, target)  # a file renamed over itself stays
    assert target.read_bytes() == b"EDF"


def test_files_get_the_permissions_of_any_new_file(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    write_atomic(tmp_path / "shared.json", "{}")
    assert stat.S_IMODE((tmp_path / "shared.json").stat().st_mode) == 0o666 & ~umask


def test_bad_arguments_are_refused_with_what_is_allowed(tmp_path):
    with pytest.raises(ValueError, match=r"'mode' .* 'w' and 'wb', but got 'a'"):
        with atomic_write(tmp_path / "x", "a"):
            pass
    with pytest.raises(TypeError, match="'data' must be text .* got dict"):
        write_atomic(tmp_path / "x", {"a": 1})
    assert os.listdir(tmp_path) == []

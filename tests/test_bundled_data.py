"""The bundled EEG outside the package: where it is found, its unpacking from the
checkout's compressed runs, and its checksum-verified fetch.

The fetch is tested against a local HTTP server that lays the files out as their real
sources do: PhysioNet's ``/files/eegmmidb/1.0.0/S001/S001Rxx.edf`` and the project's
flat release assets.
"""

import contextlib
import functools
import hashlib
import http.server
import lzma
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from braindecode_pars.datasets import bundled
from braindecode_pars.datasets.bundled import (
    BUNDLED_DATA_FILES,
    DATA_ENV,
    PACKED,
    UNPACK_ENV,
    bundled_data_path,
    fetch_bundled_data,
)
from braindecode_pars.datasets.physionet_mi import load_physionet_mi, physionet_mi_run_path

#: The repository's data folder, read here directly rather than through the code tested.
REPO_DATA = Path(__file__).resolve().parents[1] / "data"
_EEGBCI = "MNE-eegbci-data/files/eegmmidb/1.0.0/"
#: Files that are not PhysioNet's bytes and come from the release assets.
OWN = {"eegmat_100hz.npz", _EEGBCI + "S001/S001R01.edf", _EEGBCI + "S001/S001R02.edf"}


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _committed(name):
    """The bytes of bundled file ``name`` as the checkout holds them (unpacked)."""
    if name in PACKED:
        return lzma.decompress((REPO_DATA / (name + ".xz")).read_bytes())
    return (REPO_DATA / name).read_bytes()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The checkout's data unpacked into a folder of this module's own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(DATA_ENV, raising=False)
        mp.setenv(UNPACK_ENV, str(tmp_path_factory.mktemp("unpacked")))
        return bundled_data_path()


def test_registry_is_the_repository_data():
    # Every data file is registered, the runs xz-compressed, with the digest of the
    # committed bytes once unpacked.
    on_disk = {
        p.relative_to(REPO_DATA).as_posix()
        for p in REPO_DATA.rglob("*")
        if p.is_file() and p.name not in ("README.md", "SHA256SUMS")
    }
    assert on_disk == {name + ".xz" if name in PACKED else name for name in BUNDLED_DATA_FILES}
    assert len(on_disk) == 29  # the EEGMAT file, 14 runs and their 14 .event files
    assert len(PACKED) == 14 and all(name.endswith(".edf") for name in PACKED)
    for name, digest in BUNDLED_DATA_FILES.items():
        assert hashlib.sha256(_committed(name)).hexdigest() == digest, name
    # The PhysioNet-MI digests agree with the folder's own SHA256SUMS list, which names
    # every run.
    sums = (REPO_DATA / _EEGBCI / "S001" / "SHA256SUMS").read_text().split("\n")
    listed = set()
    for line in filter(None, sums):
        digest, fname = line.split()
        assert BUNDLED_DATA_FILES[_EEGBCI + "S001/" + fname] == digest
        listed.add(_EEGBCI + "S001/" + fname)
    assert listed == PACKED


def _few(monkeypatch, *runs):
    """The registry cut to the EEGMAT file and ``runs`` with their .event files, to keep
    the tests that unpack short (the ``plain`` fixture unpacks all)."""
    names = ["eegmat_100hz.npz"]
    names += [f"{_EEGBCI}S001/S001R{run:02d}.edf{end}" for run in runs for end in ("", ".event")]
    registry = {name: BUNDLED_DATA_FILES[name] for name in names}
    monkeypatch.setattr(bundled, "BUNDLED_DATA_FILES", registry)
    return registry


def test_checkout_data_unpacked_on_first_use(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv(UNPACK_ENV, str(tmp_path))
    registry = _few(monkeypatch, 4, 7)
    with caplog.at_level("INFO", logger=bundled.__name__):
        path = bundled_data_path()
    assert path.parent == tmp_path / "unpacked"  # one folder per version of the registry
    assert "Unpacked 5 bundled files" in caplog.text
    for name, digest in registry.items():
        assert _sha256(path / name) == digest, name
    assert not list(path.rglob("*.tmp"))
    assert physionet_mi_run_path(path, 1, 4).is_file()
    # A second call finds every file in place and writes nothing.
    stamps = {name: (path / name).stat().st_mtime_ns for name in registry}
    caplog.clear()
    with caplog.at_level("INFO", logger=bundled.__name__):
        assert bundled_data_path() == path
    assert "Unpacked" not in caplog.text
    assert stamps == {name: (path / name).stat().st_mtime_ns for name in registry}
    # A file gone is unpacked again, alone.
    (path / _EEGBCI / "S001" / "S001R07.edf").unlink()
    with caplog.at_level("INFO", logger=bundled.__name__):
        assert bundled_data_path() == path
    assert "Unpacked 1 bundled files" in caplog.text
    assert (
        _sha256(path / _EEGBCI / "S001" / "S001R07.edf")
        == BUNDLED_DATA_FILES[_EEGBCI + "S001/S001R07.edf"]
    )


def _packed_copy(dst, registry):
    """A copy of the checkout's files of ``registry``, compressed runs and all."""
    for name in registry:
        src = REPO_DATA / (name + ".xz" if name in PACKED else name)
        (dst / src.relative_to(REPO_DATA)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst / src.relative_to(REPO_DATA))
    return dst


def test_unpacking_at_once_gives_whole_files(tmp_path, monkeypatch):
    # Processes (pytest-xdist workers) may unpack into the same folder at once: each
    # writes to a name of its own and renames a verified file into place.
    monkeypatch.setenv(DATA_ENV, str(REPO_DATA))
    monkeypatch.setenv(UNPACK_ENV, str(tmp_path))
    registry = _few(monkeypatch, 1, 2)
    results, errors = [], []

    def unpack():
        try:
            results.append(bundled_data_path())
        except Exception as err:  # noqa: BLE001 (reported below)
            errors.append(err)

    threads = [threading.Thread(target=unpack) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(results)) == 1
    for name, digest in registry.items():
        assert _sha256(results[0] / name) == digest, name
    assert not list(results[0].rglob("*.tmp"))


def test_a_damaged_compressed_run_is_refused(tmp_path, monkeypatch):
    registry = _few(monkeypatch, 1, 5)
    del registry["eegmat_100hz.npz"]  # not read here: no need to copy its 17 MB
    source = _packed_copy(tmp_path / "data", registry)
    packed = source / _EEGBCI / "S001" / "S001R05.edf.xz"
    # Two xz streams that decompress without error to the wrong bytes.
    other = lzma.decompress((REPO_DATA / _EEGBCI / "S001" / "S001R06.edf.xz").read_bytes())
    packed.write_bytes(lzma.compress(other, preset=0))
    monkeypatch.setenv(DATA_ENV, str(source))
    monkeypatch.setenv(UNPACK_ENV, str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"S001R05\.edf\.xz' does not hold .*git checkout"):
        bundled_data_path()
    unpacked = tmp_path / "cache" / "unpacked"
    assert not list(unpacked.rglob("S001R05.edf*"))  # neither the file nor its temporary
    assert (next(unpacked.iterdir()) / _EEGBCI / "S001" / "S001R01.edf").is_file()


def test_a_plain_folder_is_used_as_it_is(plain, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(plain))
    monkeypatch.setenv(UNPACK_ENV, str(tmp_path))
    assert bundled_data_path() == plain
    assert not (tmp_path / "unpacked").exists()


def _link_copy(src, dst):
    """``dst`` laid out as ``src``, each registered file a symbolic link to its original."""
    for name in BUNDLED_DATA_FILES:
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        (dst / name).symlink_to(src / name)
    return dst


def test_loaders_refuse_an_empty_data_folder(tmp_path, monkeypatch):
    from braindecode_pars.datasets import load_bundled_eegmat

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    for load in (load_bundled_eegmat, load_physionet_mi):
        with pytest.raises(FileNotFoundError, match=f"{DATA_ENV} names .*fetch_bundled_data"):
            load()


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder and records the paths asked for."""

    def __init__(self, *args, requests, **kwargs):
        self._requests = requests
        super().__init__(*args, **kwargs)

    def do_GET(self):  # noqa: N802 (http.server's name)
        self._requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serve(root):
    """An HTTP server on localhost serving ``root``: yields its URL and the request log."""
    requests = []
    handler = functools.partial(_Handler, directory=str(root), requests=requests)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _sources(root, plain, corrupt=None):
    """A copy of the files as their sources lay them out; ``corrupt`` gets one byte changed."""
    physionet = root / "physionet.org" / "files" / "eegmmidb" / "1.0.0"
    assets = root / "github.com" / "releases" / "download" / "data-v1"
    for name in BUNDLED_DATA_FILES:
        target = assets / Path(name).name if name in OWN else physionet / name[len(_EEGBCI) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == corrupt:
            data = bytearray((plain / name).read_bytes())
            data[len(data) // 2] ^= 0xFF
            target.write_bytes(bytes(data))
        else:
            target.symlink_to(plain / name)
    return physionet.relative_to(root), assets.relative_to(root)


def test_fetch_from_the_sources_layout(plain, tmp_path, monkeypatch):
    physionet, assets = _sources(tmp_path / "web", plain)
    out = tmp_path / "out"
    with _serve(tmp_path / "web") as (url, requests):
        urls = dict(
            base_url=f"{url}{assets.as_posix()}/", physionet_url=f"{url}{physionet.as_posix()}/"
        )
        assert fetch_bundled_data(out, **urls) == out
        assert len(requests) == 29
        assert f"/{physionet.as_posix()}/S001/S001R04.edf" in requests
        assert f"/{assets.as_posix()}/eegmat_100hz.npz" in requests
        for name, digest in BUNDLED_DATA_FILES.items():
            assert _sha256(out / name) == digest, name
            assert (out / name).read_bytes() == _committed(name), name
        # A second fetch finds every file in place and downloads nothing.
        fetch_bundled_data(out, **urls)
        assert len(requests) == 29
    # What was fetched is what the loaders read.
    monkeypatch.setenv(DATA_ENV, str(out))
    assert bundled_data_path() == out
    windows = load_physionet_mi(runs=[4])
    assert len(windows) == 15 and windows[0][0].shape == (64, 800)  # 4-s trials at 200 Hz
    with np.load(out / "eegmat_100hz.npz") as f:
        assert len(f["meta"]) == 40  # 20 subjects, 2 sessions


def test_fetch_refuses_a_corrupted_file(plain, tmp_path):
    name = _EEGBCI + "S001/S001R05.edf"
    physionet, assets = _sources(tmp_path / "web", plain, corrupt=name)
    out = tmp_path / "out"
    with _serve(tmp_path / "web") as (url, _):
        with pytest.raises(
            ValueError, match=r"Refused 'MNE-eegbci-data/.*/S001R05\.edf' from .*SHA256 hash"
        ):
            fetch_bundled_data(
                out,
                base_url=f"{url}{assets.as_posix()}/",
                physionet_url=f"{url}{physionet.as_posix()}/",
            )
    assert not (out / name).exists()
    assert (out / _EEGBCI / "S001" / "S001R04.edf").is_file()  # fetched before it


def test_fetch_checks_its_urls(tmp_path):
    with pytest.raises(ValueError, match="'base_url' must be a URL ending in '/'"):
        fetch_bundled_data(tmp_path, base_url="http://127.0.0.1/assets")
    with pytest.raises(ValueError, match="'physionet_url' must be a URL ending in '/'"):
        fetch_bundled_data(tmp_path, physionet_url=None)

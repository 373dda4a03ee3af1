"""The bundled EEG outside the package: where it is found, and its checksum-verified fetch.

The fetch is tested against a local HTTP server that lays the files out as their real
sources do: PhysioNet's ``/files/eegmmidb/1.0.0/S001/S001Rxx.edf`` and the project's
flat release assets.
"""

import contextlib
import functools
import hashlib
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from braindecode_pars.datasets import bundled, bundled_data_path, fetch_bundled_data
from braindecode_pars.datasets.bundled import BUNDLED_DATA_FILES, DATA_ENV
from braindecode_pars.datasets.physionet_mi import _physionet_mi_run_path, read_physionet_mi

#: The repository's data folder, read here directly rather than through the code tested.
REPO_DATA = Path(__file__).resolve().parents[1] / "data"
_EEGBCI = "MNE-eegbci-data/files/eegmmidb/1.0.0/"
#: Files that are not PhysioNet's bytes and come from the release assets.
OWN = {"eegmat_100hz.npz", _EEGBCI + "S001/S001R01.edf", _EEGBCI + "S001/S001R02.edf"}


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_registry_is_the_repository_data():
    # Every data file is registered, with the digest of the committed bytes.
    on_disk = {
        p.relative_to(REPO_DATA).as_posix()
        for p in REPO_DATA.rglob("*")
        if p.is_file() and p.name not in ("README.md", "SHA256SUMS")
    }
    assert on_disk == set(BUNDLED_DATA_FILES)
    assert len(on_disk) == 29  # the EEGMAT file, 14 runs and their 14 .event files
    for name, digest in BUNDLED_DATA_FILES.items():
        assert _sha256(REPO_DATA / name) == digest, name
    # The PhysioNet-MI digests agree with the folder's own SHA256SUMS list.
    sums = (REPO_DATA / _EEGBCI / "S001" / "SHA256SUMS").read_text().split("\n")
    for line in filter(None, sums):
        digest, fname = line.split()
        assert BUNDLED_DATA_FILES[_EEGBCI + "S001/" + fname] == digest


def test_checkout_data_found_without_the_variable(monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert bundled_data_path() == REPO_DATA
    assert _physionet_mi_run_path(bundled_data_path(), 1, 4).is_file()


def _link_copy(src, dst):
    """``dst`` laid out as ``src``, each registered file a symbolic link to its original."""
    for name in BUNDLED_DATA_FILES:
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        (dst / name).symlink_to(src / name)
    return dst


def test_variable_wins_then_checkout_then_cache(tmp_path, monkeypatch):
    elsewhere = _link_copy(REPO_DATA, tmp_path / "elsewhere")
    monkeypatch.setenv(DATA_ENV, str(elsewhere))
    assert bundled_data_path() == elsewhere
    monkeypatch.delenv(DATA_ENV)
    cache = _link_copy(REPO_DATA, tmp_path / "cache")
    monkeypatch.setattr(bundled, "_cache_data", lambda: cache)
    assert bundled_data_path() == REPO_DATA  # the checkout before the cache
    monkeypatch.setattr(bundled, "_checkout_data", lambda: tmp_path / "installed" / "data")
    assert bundled_data_path() == cache  # an installed package: the cache


def test_missing_everywhere_names_the_variable_and_the_fetch(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setattr(bundled, "_checkout_data", lambda: tmp_path / "checkout")
    monkeypatch.setattr(bundled, "_cache_data", lambda: tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="none of") as info:
        bundled_data_path()
    for part in (DATA_ENV, "fetch_bundled_data()", str(tmp_path / "checkout")):
        assert part in str(info.value)
    # A folder with one file gone is not the folder.
    partial = _link_copy(REPO_DATA, tmp_path / "partial")
    (partial / _EEGBCI / "S001" / "S001R07.edf").unlink()
    monkeypatch.setenv(DATA_ENV, str(partial))
    with pytest.raises(FileNotFoundError, match=r"lacks 1 of the 29 .*S001R07\.edf"):
        bundled_data_path()


def test_loaders_refuse_an_empty_data_folder(tmp_path, monkeypatch):
    from braindecode_pars.datasets import load_physionet_mi
    from braindecode_pars.datasets.bundled_eegmat import load_bundled_eegmat

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


def _sources(root, corrupt=None):
    """A copy of the files as their sources lay them out; ``corrupt`` gets one byte changed."""
    physionet = root / "physionet.org" / "files" / "eegmmidb" / "1.0.0"
    assets = root / "github.com" / "releases" / "download" / "data-v1"
    for name in BUNDLED_DATA_FILES:
        target = assets / Path(name).name if name in OWN else physionet / name[len(_EEGBCI) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == corrupt:
            data = bytearray((REPO_DATA / name).read_bytes())
            data[len(data) // 2] ^= 0xFF
            target.write_bytes(bytes(data))
        else:
            target.symlink_to(REPO_DATA / name)
    return physionet.relative_to(root), assets.relative_to(root)


def test_fetch_from_the_sources_layout(tmp_path, monkeypatch):
    physionet, assets = _sources(tmp_path / "web")
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
            assert (out / name).read_bytes() == (REPO_DATA / name).read_bytes(), name
        # A second fetch finds every file in place and downloads nothing.
        fetch_bundled_data(out, **urls)
        assert len(requests) == 29
    # What was fetched is what the loaders read.
    monkeypatch.setenv(DATA_ENV, str(out))
    assert bundled_data_path() == out
    raw = read_physionet_mi(runs=[4]).datasets[0].raw
    assert raw.info["sfreq"] == 160.0 and len(raw.ch_names) == 64
    with np.load(out / "eegmat_100hz.npz") as f:
        assert len(f["meta"]) == 40  # 20 subjects, 2 sessions


def test_fetch_refuses_a_corrupted_file(tmp_path):
    name = _EEGBCI + "S001/S001R05.edf"
    physionet, assets = _sources(tmp_path / "web", corrupt=name)
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

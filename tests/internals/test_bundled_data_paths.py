"""Where the bundled EEG is found when the variable, the checkout and the cache disagree:
the module's private lookups of the checkout and the cache replaced (the public
behaviour is ``tests/test_bundled_data.py``)."""

import pytest

from braindecode_pars.datasets import bundled
from braindecode_pars.datasets.bundled import (
    DATA_ENV,
    UNPACK_ENV,
    bundled_data_path,
)

from .. import test_bundled_data as public
from ..test_bundled_data import _EEGBCI, _link_copy

#: The checkout's data unpacked into a folder of this module's own (a module fixture).
plain = public.plain


def test_variable_wins_then_checkout_then_cache(plain, tmp_path, monkeypatch):
    elsewhere = _link_copy(plain, tmp_path / "elsewhere")
    monkeypatch.setenv(DATA_ENV, str(elsewhere))
    assert bundled_data_path() == elsewhere
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv(UNPACK_ENV, str(plain.parents[1]))
    cache = _link_copy(plain, tmp_path / "cache")
    monkeypatch.setattr(bundled, "_cache_data", lambda: cache)
    assert bundled_data_path() == plain  # the checkout (unpacked) before the cache
    monkeypatch.setattr(bundled, "_checkout_data", lambda: tmp_path / "installed" / "data")
    assert bundled_data_path() == cache  # an installed package: the cache


def test_missing_everywhere_names_the_variable_and_the_fetch(plain, tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setattr(bundled, "_checkout_data", lambda: tmp_path / "checkout")
    monkeypatch.setattr(bundled, "_cache_data", lambda: tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="none of") as info:
        bundled_data_path()
    for part in (DATA_ENV, "fetch_bundled_data()", str(tmp_path / "checkout")):
        assert part in str(info.value)
    # A folder with one file gone is not the folder.
    partial = _link_copy(plain, tmp_path / "partial")
    (partial / _EEGBCI / "S001" / "S001R07.edf").unlink()
    monkeypatch.setenv(DATA_ENV, str(partial))
    with pytest.raises(FileNotFoundError, match=r"lacks 1 of the 29 .*S001R07\.edf"):
        bundled_data_path()

"""``X`` read once per fit and per predict, counted by wrapping the private stacking of
braindecode windows."""

from braindecode_pars import (
    PARSClassifier,
)
from braindecode_pars.io.windows import read_windows

from ..test_estimators_contract import _encoder, _rhythm, _windows


# -- X read once ----------------------------------------------------------------------------
def test_windows_are_read_once_per_fit_and_once_per_predict(monkeypatch):
    import braindecode_pars.io.windows as adapters

    X, y, groups = _rhythm(n=24)
    windows = _windows(X, y, groups)
    reads = []
    original = adapters._stack_braindecode

    def counting(*args, **kwargs):
        reads.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(adapters, "_stack_braindecode", counting)
    assert len(read_windows(windows)) == 24 and len(reads) == 1  # the counter counts
    reads.clear()
    clf = PARSClassifier(encoder=_encoder(), verbose=0).fit(windows)
    assert len(reads) == 1
    assert clf.predict(windows).shape == (24,)
    assert len(reads) == 2

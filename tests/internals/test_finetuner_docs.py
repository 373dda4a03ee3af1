"""What PARSFineTuner's docstrings promise, checked against what it does: the shape of
``transform``'s features."""

import re

import numpy as np
import pytest

from braindecode_pars import PARSFineTuner

pytestmark = pytest.mark.usefixtures("one_thread")


def _documented_shape(n_windows, **sizes):
    """The shape ``PARSFineTuner.transform``'s docstring gives, its names read as
    ``sizes``."""
    found = re.search(
        r"features : ndarray, shape \(n_windows, ([^)]+)\)", PARSFineTuner.transform.__doc__
    )
    assert found, "transform's docstring gives no shape of its features"
    return (n_windows, eval(found[1], {}, dict(sizes)))  # e.g. emb_dim + n_virtual * n_bands


@pytest.mark.parametrize(
    "n_chans, params, n_virtual, n_bands",
    [
        pytest.param(10, {}, 8, 1, id="defaults"),  # 8 virtual channels, one band
        pytest.param(3, {}, 3, 1, id="defaults-fewer-channels"),  # min(8, n_chans)
        pytest.param(
            3,
            dict(encoder=None, spatial_filters=None, band_power=[(8, 13), (13, 30)]),
            3,
            2,
            id="input-channels-two-bands",
        ),
        pytest.param(3, dict(encoder=None, band_power=None), 3, 0, id="token-only"),
    ],
)
def test_transform_returns_the_shape_its_docstring_gives(n_chans, params, n_virtual, n_bands):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, n_chans, 400)).astype(np.float32)
    y = np.tile([0, 1], 4)
    clf = PARSFineTuner(sfreq=100, max_epochs=1, random_state=0, **params).fit(X, y)
    emb_dim = clf.encoder_.emb_dim
    expected = _documented_shape(5, emb_dim=emb_dim, n_virtual=n_virtual, n_bands=n_bands)
    assert clf.transform(X[:5]).shape == expected
    assert expected[1] == clf.module_.n_features  # what final_layer reads
    if not params:  # the docstring's words for the defaults
        assert expected[1] == emb_dim + min(8, n_chans)

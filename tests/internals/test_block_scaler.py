"""The block scaler's fit by slices of columns, checked through its private write into a
wider matrix."""

import numpy as np
from sklearn.preprocessing import StandardScaler

from braindecode_pars.features.scaling import (
    BlockScaler,
)


def test_block_scaler_fits_a_wide_block_by_columns_as_standard_scaler_fits_it_whole():
    """Wider than _FIT_COLUMNS, the fit goes a slice of columns at a time (its float64
    temporaries that narrow): the same figures, to the bit, as one StandardScaler fit."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 300)) * rng.uniform(0.1, 10, 300) + 3
    X[:, 5] = 0.1  # constant
    for data in (X, X.astype(np.float32)):
        whole, block = StandardScaler().fit(data), BlockScaler().fit(data)
        for name in ("mean_", "var_", "scale_", "n_samples_seen_", "n_features_in_"):
            np.testing.assert_array_equal(getattr(block, name), getattr(whole, name))
        assert block.n_varying_ == 299
        out = np.zeros((50, 310))  # written into a block's columns of a wider matrix
        block._transform_into(data, out[:, 10:])  # in out's float64
        np.testing.assert_array_equal(out[:, 10:], block.transform(data.astype(np.float64)))
        assert not out[:, :10].any()
    X[3, 7] = X[4, 200] = np.nan  # NaNs: one count per feature, as StandardScaler's
    np.testing.assert_array_equal(
        BlockScaler().fit(X).n_samples_seen_, StandardScaler().fit(X).n_samples_seen_
    )
    assert BlockScaler(with_std=False).fit(X).n_varying_ == 300

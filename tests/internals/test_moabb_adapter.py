"""The MOABB adapter's private preparation of trials: rate and scale."""

import numpy as np
import pytest
from moabb.paradigms import LeftRightImagery  # noqa: E402

from braindecode_pars import PARSClassifier  # noqa: E402
from braindecode_pars.moabb import MOABBAdapter  # noqa: E402

from ..test_moabb import SFREQ, fake, tiny_encoder


def test_adapter_resamples_and_scales_moabb_trials():
    """The estimator reads microvolts at 100 Hz: 3 s at 128 Hz become 300 samples; MOABB's
    arrays (microvolts) and its epochs (volts) give the same windows."""
    paradigm = LeftRightImagery()
    X, y, _ = paradigm.get_data(fake(n_subjects=1, n_sessions=1), subjects=[1])
    adapter = MOABBAdapter(PARSClassifier(encoder=tiny_encoder(), verbose=0), sfreq=SFREQ)
    prepared, rate = adapter._prepare(X, SFREQ)
    assert rate == 100.0
    assert prepared.shape == (len(X), 3, round(X.shape[-1] * 100 / SFREQ))
    # MOABB's arrays are in microvolts already (FakeDataset's 20 uV noise, filtered 8-32 Hz)
    assert 5 < prepared.std() < 20
    epochs, _, _ = paradigm.get_data(
        fake(n_subjects=1, n_sessions=1), subjects=[1], return_epochs=True
    )
    from_epochs, rate = adapter._prepare(epochs, None)  # volts, read as microvolts
    assert rate == 100.0
    as_array = adapter._prepare(epochs.get_data() * 1e6, SFREQ)[0]  # MOABB's array of them
    np.testing.assert_allclose(from_epochs, as_array, rtol=1e-5, atol=1e-4)
    assert 5 < from_epochs.std() < 20
    adapter.fit(X, y)
    assert adapter.estimator_.sfreq_ == 100.0
    assert set(adapter.predict(X)) <= set(y)
    with pytest.raises(ValueError, match="'unit' parameter. Allowed values are 'uV', 'mV' and 'V'"):
        MOABBAdapter(unit="volts", sfreq=SFREQ).fit(X, y)
    with pytest.raises(ValueError, match="'sfreq' must be set"):
        MOABBAdapter(PARSClassifier(encoder=tiny_encoder())).fit(X, y)

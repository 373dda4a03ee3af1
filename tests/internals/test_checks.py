"""One class of parameter error (``_util/checks.py``): scikit-learn's
``InvalidParameterError``, a ``ValueError`` and a ``TypeError`` at once, raised by the
package's checks whatever the kind of mistake."""

import pickle

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError as SklearnError

from braindecode_pars import MultiChannelClassifier, PARSFineTuner, PatchEncoder
from braindecode_pars._util.checks import (
    InvalidParameterError,
    check_device,
    check_heads,
    check_int,
    check_none_or_number,
    check_option,
    check_position_masking,
    check_range,
    check_skorch_names,
)
from braindecode_pars.estimators._crops import check_crop_seconds, crop_samples
from braindecode_pars.estimators._finetuner_params import check_finetuner_params, check_strategy
from braindecode_pars.features.recipe import inner_splitter
from braindecode_pars.models.encoder import checked_encoder
from braindecode_pars.models.multichannel import check_front_end

from ..conftest import SMALL_ENCODER

ENCODER = PatchEncoder(sfreq=100, **SMALL_ENCODER)

#: (call, message) of each kind of mistake, type and value alike
MISTAKES = [
    pytest.param(lambda: check_option("readout", "mean", ("attention", "channels")),
                 "Allowed values are 'attention' and 'channels', but got 'mean'", id="option"),
    pytest.param(lambda: check_int("batch_size", 2.0), "must be an int", id="int-type"),
    pytest.param(lambda: check_int("batch_size", 0, 1), "must be >= 1", id="int-value"),
    pytest.param(lambda: check_range("lr", "1e-3", 0, 1), "must be a number", id="range-type"),
    pytest.param(lambda: check_range("lr", 2, 0, 1), r"must lie in \[0, 1\]", id="range-value"),
    pytest.param(lambda: check_none_or_number("seed", "1", int, "an int"), "an int",
                 id="none-or-number"),
    pytest.param(lambda: check_device("device", "mps"), "'cpu' and 'cuda'", id="device"),
    pytest.param(lambda: check_device("device", 3.5), "not a torch device", id="device-type"),
    pytest.param(lambda: check_heads("n_heads", 3, 16), "must divide", id="heads"),
    pytest.param(lambda: check_position_masking(4, 0.2), "at least 2", id="position-masking"),
    pytest.param(lambda: check_skorch_names(PARSFineTuner(pretrain__lr=1.0)), "pretrain__lr",
                 id="skorch-names"),
    pytest.param(lambda: check_strategy("lp-ft", 1), "'max_epochs' must be >= 2", id="strategy"),
    pytest.param(lambda: check_crop_seconds("2"), "positive number of seconds", id="crop-type"),
    pytest.param(lambda: crop_samples(9.0, 100, 400, 100, 1.0), "'crop_seconds' must be",
                 id="crop-length"),
    pytest.param(lambda: check_finetuner_params(PARSFineTuner(train_split=0.2)), "train_split",
                 id="train-split"),
    pytest.param(lambda: check_front_end(0, 1.0, None), "'spatial_filters' must be",
                 id="front-end"),
    pytest.param(lambda: MultiChannelClassifier(n_outputs=2, n_chans=3, pooling="max"),
                 "'pooling'", id="multichannel"),
    pytest.param(lambda: MultiChannelClassifier.from_pretrained("pars-small-v2", n_chans=3),
                 "'n_outputs' must be given", id="from-pretrained"),
    pytest.param(lambda: inner_splitter(1, 5), "at least 2", id="inner-cv-value"),
    pytest.param(lambda: inner_splitter([1, 2], 5), "split", id="inner-cv-type"),
    pytest.param(lambda: checked_encoder("pars", 100, 400), "PatchEncoder or None",
                 id="encoder-type"),
    pytest.param(lambda: checked_encoder(ENCODER, 50, 400), "resample", id="encoder-rate"),
]  # fmt: skip


@pytest.mark.parametrize("call, message", MISTAKES)
def test_every_parameter_check_raises_the_one_class(call, message):
    with pytest.raises(InvalidParameterError, match=message) as err:
        call()
    # caught as scikit-learn's, and as either of the built-in classes
    assert all(isinstance(err.value, k) for k in (SklearnError, ValueError, TypeError))


def test_the_error_is_caught_as_value_error_or_type_error_and_pickles():
    for kind in (ValueError, TypeError, SklearnError):
        with pytest.raises(kind):
            check_int("max_epochs", 0, minimum=1)
    err = pickle.loads(pickle.dumps(InvalidParameterError("'lr' must be > 0.")))
    assert type(err) is InvalidParameterError and str(err) == "'lr' must be > 0."


def test_a_band_above_the_windows_nyquist_frequency_is_a_parameter_error():
    X = np.zeros((8, 2, 400), np.float32)
    with pytest.raises(InvalidParameterError, match="at or above the Nyquist frequency"):
        PARSFineTuner(encoder=ENCODER, sfreq=100, band_power=(60, 70)).fit(X, np.tile([0, 1], 4))

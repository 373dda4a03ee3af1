"""The probe's blocks computed once per fit, counted by wrapping their private ``_features``."""

from braindecode_pars import PARSProbe
from braindecode_pars.features import blocks as probe_module

from ..test_probe_recipe import SFREQ, _encoder, _subjects


def test_features_are_computed_once_per_fit(monkeypatch):
    calls = {"encoder": 0, "bandpower": 0}
    encoder_features = probe_module.EncoderFeatures._features
    band_power = probe_module.BandPowerFeatures._features

    def counted(name, method):
        def wrapper(self, X):
            calls[name] += 1
            return method(self, X)

        return wrapper

    monkeypatch.setattr(
        probe_module.EncoderFeatures, "_features", counted("encoder", encoder_features)
    )
    monkeypatch.setattr(
        probe_module.BandPowerFeatures, "_features", counted("bandpower", band_power)
    )
    X, y, groups = _subjects("power")
    PARSProbe(_encoder(), recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    assert calls == {"encoder": 1, "bandpower": 1}  # 4 folds x 8 recipes + the final fit

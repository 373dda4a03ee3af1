"""The one definition of a :class:`~braindecode_pars.PatchEncoder`'s settings.

As nanoGPT's ``GPTConfig``: one dataclass names every setting of an encoder; the
encoder, the pretext models, the hub (save, load, export), the run records, the
command line and :class:`~braindecode_pars.PARSPretrainer` read it. The defaults are
the paper's (section 2.5, appendix A.1); :data:`ENCODER_SIZES` names the two sizes the
package uses.
"""

from __future__ import annotations

import dataclasses
import math

from torch import nn

from braindecode_pars._util.checks import check_heads, check_int, check_option, check_range

#: Activations by the name a record stores (an activation class is not serialisable).
_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}

#: The prefix of the encoder's settings in a pretraining run's record (``config.json``).
RECORD_PREFIX = "encoder."

#: The encoder's input normalisations (:meth:`PatchEncoder.normalize
#: <braindecode_pars.PatchEncoder.normalize>`): ``"window"``, each window zero-mean and
#: unit-variance (gain- and offset-invariant: the paper's instance normalisation, and
#: what every encoder saved before the setting existed means); ``"window+scale"``, the
#: same plus a learned embedding of the window's log standard deviation added to every
#: token; ``"fixed"``, each window centred and divided by one fixed amplitude, then
#: clipped. The last two see amplitude and read one unit (:data:`_UNITS`).
NORMALIZATIONS = ("window", "window+scale", "fixed")

#: The units an amplitude-aware normalisation reads, in volts. Microvolts are what
#: braindecode's ``EEGClassifier`` and the package's estimators and readers give
#: (``mne.Epochs.get_data(units="uV")``); volts are what MNE holds.
_UNITS = {"uV": 1e-6, "V": 1.0}

#: The standard deviations that a window of EEG can have, by unit: from 1 nV (below any
#: amplifier's noise) to 0.1 V (above any amplifier's range). An amplitude-aware encoder
#: refuses a window outside them in its unit (windows without signal aside): microvolts
#: given to an encoder that reads volts are 1e6 times too large, volts given to one that
#: reads microvolts 1e6 times too small.
_EEG_STD_RANGE = {"uV": (1e-3, 1e5), "V": (1e-9, 1e-1)}

#: The typical standard deviation of a window of scalp EEG (10 µV), by unit: the default
#: of ``amplitude_scale`` and, as its logarithm, of ``log_std_mean``.
_TYPICAL_EEG_STD = {"uV": 10.0, "V": 1e-5}

#: The settings of the input normalisation (the fields of :class:`PatchEncoderConfig`
#: after the size's): what a run that compares normalisations sets beside a size.
NORMALIZATION_SETTINGS = (
    "normalization", "unit", "amplitude_scale", "amplitude_clip", "log_std_mean", "log_std_std",
)  # fmt: skip


def _activation_name(activation):
    """The name of :data:`_ACTIVATIONS` that ``activation`` stands for, else ``activation``.

    Takes a name (``"gelu"``), an activation class (``nn.GELU``), its class name as
    earlier files saved it (``"GELU"``) or braindecode's dotted path in ``config.json``
    (``"torch.nn.modules.activation.GELU"``).
    """
    if isinstance(activation, type):
        activation = activation.__name__
    if isinstance(activation, str):
        name = activation.rpartition(".")[2].lower()
        if name in _ACTIVATIONS:
            return name
    return activation


@dataclasses.dataclass(frozen=True)
class PatchEncoderConfig:
    """Every setting of a :class:`~braindecode_pars.PatchEncoder` but its sampling rate.

    Parameters
    ----------
    patch_seconds : float
        Patch length; paper section 2.5: "small 1-sec patches".
    emb_dim : int
        Token size; paper: 512.
    depth : int
        Transformer blocks; paper: 8.
    n_heads : int
        Attention heads per block; paper: 8. Must divide ``emb_dim``.
    ff_dim : int
        Hidden size of each block's feed-forward layer; paper: 512.
    activation : {"gelu", "relu"}
        The feed-forward activation; paper appendix A.1: GELU. An activation class
        (``nn.GELU``) or its class name is read as its name.
    drop_prob : float
        Dropout in the blocks; the paper gives none.
    eps : float
        The instance normalisation's floor on the variance, relative to the window's
        mean square.
    normalization : {"window", "window+scale", "fixed"}
        How a window is normalised before it is cut into patches
        (:data:`NORMALIZATIONS`). ``"window"`` (the default, and what every encoder
        saved before this setting existed means): zero mean and unit variance per
        window, blind to gain and offset. ``"window+scale"``: the same, plus a learned
        embedding of the window's log standard deviation (standardised by
        ``log_std_mean`` and ``log_std_std``) added to every token. ``"fixed"``: the
        window minus its mean, divided by ``amplitude_scale``, clipped to
        ``[-amplitude_clip, amplitude_clip]``.
    unit : {"uV", "V"}
        The unit of the input that ``"window+scale"`` and ``"fixed"`` read (:data:`_UNITS`);
        a batch whose median window standard deviation lies outside
        :data:`_EEG_STD_RANGE` of that unit is refused (a window below it reads as
        flat). ``"window"`` reads any unit and ignores it.
    amplitude_scale : float | None
        ``"fixed"``: the amplitude a window is divided by, in ``unit``; None: 10 µV
        in ``unit`` (1e-5 in volts).
    amplitude_clip : float
        ``"fixed"``: the bound of the scaled input (20: 200 µV at a scale of 10 µV);
        ``inf`` for none.
    log_std_mean, log_std_std : float | None, float
        ``"window+scale"``: the mean and standard deviation, over a corpus, of the
        natural log of a window's standard deviation in ``unit``
        (:func:`~braindecode_pars.models.encoder.log_std_statistics` computes them);
        the embedding reads ``(log std - log_std_mean) / log_std_std``.
        ``log_std_mean`` None: the log of 10 µV in ``unit``.

    Examples
    --------
    >>> config = PatchEncoderConfig(**ENCODER_SIZES["small"])
    >>> config.emb_dim, config.activation
    (64, 'gelu')
    >>> PatchEncoderConfig.of({"depth": 2, "activation": "ReLU"}).activation
    'relu'
    >>> PatchEncoderConfig.of({"depth": 2}).normalization  # a file saved before the setting
    'window'
    >>> PatchEncoderConfig(normalization="fixed", unit="V").amplitude_scale  # 10 µV
    1e-05
    """

    patch_seconds: float = 1.0
    emb_dim: int = 512
    depth: int = 8
    n_heads: int = 8
    ff_dim: int = 512
    activation: str = "gelu"
    drop_prob: float = 0.0
    eps: float = 1e-5
    normalization: str = "window"
    unit: str = "uV"
    amplitude_scale: float | None = None
    amplitude_clip: float = 20.0
    log_std_mean: float | None = None
    log_std_std: float = 1.0

    def __post_init__(self):
        # checked and stored as plain Python numbers (a NumPy integer is written to
        # JSON records as an int)
        values = {
            "patch_seconds": check_range(
                "patch_seconds", self.patch_seconds, 0, math.inf, low_open=True
            ),
            "activation": _activation_name(self.activation),
            "drop_prob": check_range("drop_prob", self.drop_prob, 0, 1, high_open=True),
            "eps": check_range("eps", self.eps, 0, math.inf),
        }
        for name in ("emb_dim", "depth", "n_heads", "ff_dim"):
            values[name] = check_int(name, getattr(self, name), 1)
        check_option("activation", values["activation"], tuple(_ACTIVATIONS))
        values.update(self._amplitude_settings())
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if self.emb_dim % 2:  # the sinusoidal positions pair sines and cosines
            raise ValueError(f"'emb_dim' must be even, but got {self.emb_dim}.")
        check_heads("n_heads", self.n_heads, self.emb_dim)

    def _amplitude_settings(self):
        """The normalisation's settings, checked, with their unit's defaults filled in."""
        check_option("normalization", self.normalization, NORMALIZATIONS)
        check_option("unit", self.unit, tuple(_UNITS))
        typical = _TYPICAL_EEG_STD[self.unit]
        scale = typical if self.amplitude_scale is None else self.amplitude_scale
        mean = math.log(typical) if self.log_std_mean is None else self.log_std_mean
        values = {
            "amplitude_scale": check_range(
                "amplitude_scale", scale, 0, math.inf, low_open=True, high_open=True
            ),
            "amplitude_clip": check_range(
                "amplitude_clip", self.amplitude_clip, 0, math.inf, low_open=True
            ),
            "log_std_mean": check_range(
                "log_std_mean", mean, -math.inf, math.inf, low_open=True, high_open=True
            ),
            "log_std_std": check_range(
                "log_std_std", self.log_std_std, 0, math.inf, low_open=True, high_open=True
            ),
        }
        for name, value in values.items():
            if math.isnan(value):  # NaN compares False with every bound
                raise ValueError(f"'{name}' must be a number, but got {value}.")
        return values

    @property
    def amplitude_aware(self):
        """Whether the normalisation keeps amplitude (and so reads :attr:`unit`)."""
        return self.normalization != "window"

    @classmethod
    def fields(cls):
        """The names of the settings, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def of(cls, source):
        """The config of a :class:`PatchEncoder`, an estimator or a record.

        ``source`` is anything with the settings as attributes (an encoder, a
        :class:`~braindecode_pars.PARSPretrainer`) or a dict of them (a saved config,
        ``sfreq`` allowed and left out); a missing setting takes its default (so a
        file saved before a setting was recorded reads as that setting's default),
        unknown keys of a dict are refused.
        """
        if isinstance(source, cls):
            return source
        if isinstance(source, dict):
            unknown = sorted(set(source) - set(cls.fields()) - {"sfreq"})
            if unknown:
                raise ValueError(
                    f"Unknown encoder settings {unknown}; the settings are {list(cls.fields())}."
                )
            values = {k: v for k, v in source.items() if k in cls.fields()}
        else:
            values = {k: getattr(source, k) for k in cls.fields() if hasattr(source, k)}
        return cls(**values)

    @classmethod
    def from_size(cls, size):
        """The config of a named size, or of a dict of some settings over "small".

        Parameters
        ----------
        size : "small" | "paper" | dict
            A name of :data:`ENCODER_SIZES`, or a dict of some of the settings (the
            rest from "small", or the config's defaults for those "small" does not set).

        Returns
        -------
        config : PatchEncoderConfig
            ``PatchEncoder(sfreq=..., **config.asdict())`` builds the encoder.
        """
        if isinstance(size, str):
            if size not in ENCODER_SIZES:
                raise ValueError(
                    "Invalid value for the 'encoder' parameter. Allowed values are "
                    + ", ".join(repr(k) for k in ENCODER_SIZES)
                    + f" and a dict of PatchEncoder settings, but got {size!r} instead."
                )
            return cls(**ENCODER_SIZES[size])
        if not isinstance(size, dict):
            raise TypeError(
                "'encoder' must be a size name ("
                + ", ".join(repr(k) for k in ENCODER_SIZES)
                + f") or a dict of PatchEncoder settings, but got {type(size).__name__} ({size!r})."
            )
        unknown = sorted(set(size) - set(cls.fields()))
        if unknown:
            raise ValueError(
                f"'encoder' holds unknown keys {unknown}; allowed keys are {list(cls.fields())}."
            )
        return cls(**dict(ENCODER_SIZES["small"], **size))

    @classmethod
    def from_record(cls, record):
        """The config of a pretraining run's record (its ``config.json``): the
        ``encoder.<setting>`` entries that :meth:`record` writes."""
        values = {
            key[len(RECORD_PREFIX) :]: value
            for key, value in record.items()
            if key.startswith(RECORD_PREFIX)
        }
        return cls.of(values)

    def record(self):
        """The settings as a run's record holds them: ``{"encoder.<setting>": value}``."""
        return {RECORD_PREFIX + name: value for name, value in self.asdict().items()}

    def asdict(self):
        """The settings as a plain dict (a record's or a card's)."""
        return dataclasses.asdict(self)

    def encoder_kwargs(self):
        """The :class:`PatchEncoder` keyword arguments (the activation as its class)."""
        return dict(self.asdict(), activation=_ACTIVATIONS[self.activation])


#: The named sizes. "small" is the shipped ``pars-small`` encoder's, the default of
#: :class:`~braindecode_pars.PARSPretrainer` and of every benchmark (140 k parameters;
#: pretrains at hundreds of windows/s on a CPU); "paper" is the paper's (section 2.5 and
#: appendix A.1: 512 features, 8 blocks of 8 heads, feed-forward 512; 12.7 M
#: parameters, for a GPU).
ENCODER_SIZES = {
    "small": {"emb_dim": 64, "depth": 4, "n_heads": 4, "ff_dim": 128},
    "paper": {"emb_dim": 512, "depth": 8, "n_heads": 8, "ff_dim": 512},
}

"""Frequency bands, one convention for the whole package: how a band is given and
checked, the Nyquist rule, and the band-pass filters that realise a band.

**A band** is ``(low, high)`` in Hz, half-open ``[low, high)``, with finite real edges
and ``0 <= low < high`` (``low == 0``: everything below ``high``). The probe's bands
carry a name in front, ``(name, low, high)``.

**The Nyquist rule.** Against a sampling rate ``sfreq``, a band ending above the Nyquist
frequency ``sfreq / 2`` is cut there; a band starting at or above it holds no frequency
the windows carry and is refused, with an error naming the parameter, the band and the
rate. A preset's band there is left out instead (:func:`cut_at_nyquist` with
``drop=True``), so that a preset fits any rate. The probe's band powers
(``BandPowerFeatures(bands=...)``, ``PARSProbe(bands=...)``) and the classifier's band
log-variance (``MultiChannelClassifier(band_power=...)``,
``PARSFineTuner(band_power=...)``) read their bands through this module.

**The filters.** :func:`fir_band_pass` gives the taps of a linear-phase FIR band-pass
(scipy's ``firwin``), which the classifier's band log-variance applies as a fixed
convolution; :func:`iir_band_pass` filters an array with a zero-phase 4th-order
Butterworth band-pass (MNE's ``filter_data``). A filter's edge must lie strictly below
the Nyquist frequency: both design a band that reaches it up to :data:`TOP_EDGE` of it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from braindecode_pars._util.checks import InvalidParameterError

#: The highest edge a band-pass filter is designed with, as a fraction of the Nyquist
#: frequency: a band reaching the Nyquist frequency is designed up to 0.99 of it.
TOP_EDGE = 0.99


def _is_edge(value):
    """Whether ``value`` is a finite real number (not a bool)."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    return real and math.isfinite(value)


def _label(band):
    """``entry 'name' (low-high Hz)`` for a named band, ``band low-high Hz`` for a pair."""
    low, high = band[-2:]
    edges = f"{low:g}-{high:g} Hz"
    return f"entry {band[0]!r} ({edges})" if len(band) == 3 else f"band {edges}"


def check_band_pairs(name, bands):
    """``bands`` as a list of ``(low, high)`` tuples of floats, or None.

    Parameters
    ----------
    name : str
        The parameter's name, for the error message.
    bands : (low, high) | sequence of (low, high) | None
        One band or a sequence of bands in Hz, each with finite edges and
        ``0 <= low < high``. None stays None.

    Returns
    -------
    bands : list of (float, float) | None

    Raises
    ------
    InvalidParameterError
        When ``bands`` is neither None, a band nor a non-empty sequence of bands.
    """
    if bands is None:
        return None
    try:
        one = len(bands) == 2 and all(_is_edge(f) for f in bands)
        pairs = [tuple(bands)] if one else [tuple(b) for b in bands]
        ok = len(pairs) > 0 and all(
            len(p) == 2 and all(_is_edge(f) for f in p) and 0 <= p[0] < p[1] for p in pairs
        )
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InvalidParameterError(
            f"'{name}' must be None, a band (low, high) in Hz with 0 <= low < high, or a "
            f"sequence of such bands, but got {bands!r}."
        )
    return [(float(lo), float(hi)) for lo, hi in pairs]


def check_named_bands(name, bands, presets, sfreq=math.inf):
    """``bands`` as a list of ``(name, low, high)``, cut at the Nyquist frequency of
    ``sfreq`` (:func:`cut_at_nyquist`).

    Parameters
    ----------
    name : str
        The parameter's name, for the error messages.
    bands : str | dict | sequence of (name, low, high) | None
        A preset's name (a key of ``presets``; None: ``"default"``), whose bands
        starting at or above the Nyquist frequency are left out; or a dict
        name -> (low, high), or a sequence of (name, low, high), in Hz, each with
        finite edges and ``0 <= low < high``, none starting at or above the Nyquist
        frequency.
    presets : dict
        Preset name -> sequence of (name, low, high).
    sfreq : float
        The windows' sampling rate in Hz; ``math.inf`` checks the names and edges only.

    Returns
    -------
    bands : list of (str, float, float)

    Raises
    ------
    InvalidParameterError
        For an unknown preset, an entry that is not a named band, edges outside
        ``0 <= low < high``, a band starting at or above the Nyquist frequency, or no
        band at all.
    """
    if bands is None or isinstance(bands, str):
        preset = "default" if bands is None else bands
        if preset not in presets:
            allowed = ", ".join(repr(key) for key in presets)
            raise InvalidParameterError(
                f"Invalid value for the '{name}' parameter. Allowed values are None, a "
                f"preset's name ({allowed}), a dict name -> (low, high) or a sequence of "
                f"(name, low, high) in Hz, but got {bands!r} instead."
            )
        return cut_at_nyquist(name, list(presets[preset]), sfreq, drop=True)
    items = list(bands.items()) if isinstance(bands, dict) else list(bands)
    out = []
    for item in items:
        if isinstance(bands, dict):
            label, edges = item
            item = (label, *tuple(edges))
        if len(item) != 3 or not all(_is_edge(e) for e in item[1:]):
            raise InvalidParameterError(
                f"'{name}' must be a dict name -> (low, high) or a sequence of "
                f"(name, low, high) in Hz, but got the entry {item!r}."
            )
        label, low, high = str(item[0]), float(item[1]), float(item[2])
        if not 0 <= low < high:
            raise InvalidParameterError(
                f"'{name}' entry {label!r} must have 0 <= low < high, but got {item!r}."
            )
        out.append((label, low, high))
    if not out:
        raise InvalidParameterError(f"'{name}' must hold at least one band, but got none.")
    return cut_at_nyquist(name, out, sfreq)


def cut_at_nyquist(name, bands, sfreq, drop=False, rate="sampling rate"):
    """``bands`` with each band ending above the Nyquist frequency ``sfreq / 2`` cut
    there; a band starting at or above it refused (or left out with ``drop``).

    Parameters
    ----------
    name : str
        The parameter the bands came from, for the error message.
    bands : sequence of tuple
        Bands whose last two entries are ``(low, high)`` in Hz, a name in front or not.
    sfreq : float
        Sampling rate in Hz; ``math.inf`` keeps every band as it is.
    drop : bool
        Leave out a band starting at or above the Nyquist frequency instead of raising.
    rate : str
        What ``sfreq`` is the rate of, for the error message.

    Returns
    -------
    bands : list of tuple
        The bands, the same kind of tuple each.

    Raises
    ------
    InvalidParameterError
        When a band starts at or above the Nyquist frequency and ``drop`` is False, or
        within the last 1 % below it (above :data:`TOP_EDGE` of it, where no band-pass
        fits), and ``drop`` is False.
    """
    nyquist = sfreq / 2
    out = []
    for band in bands:
        *head, low, high = band
        if low >= nyquist:
            if drop:
                continue
            raise InvalidParameterError(
                f"'{name}' {_label(band)} starts at or above the Nyquist frequency "
                f"({nyquist:g} Hz) of the {rate} of {sfreq:g} Hz: choose bands that start "
                "below it, or windows at a higher rate."
            )
        if low >= TOP_EDGE * nyquist:  # no filter is designed above TOP_EDGE of it
            if drop:
                continue
            raise InvalidParameterError(
                f"'{name}' {_label(band)} starts within {1 - TOP_EDGE:.0%} below the "
                f"Nyquist frequency ({nyquist:g} Hz) of the {rate} of {sfreq:g} Hz, "
                f"where no band-pass fits (filters reach {TOP_EDGE * nyquist:g} Hz): "
                "choose bands that start lower, or windows at a higher rate."
            )
        out.append((*head, low, min(high, nyquist)))
    return out


def _design_edges(band, sfreq):
    """The edges a filter is designed with: ``low`` (None for 0) and ``high`` (at most
    :data:`TOP_EDGE` of the Nyquist frequency)."""
    low, high = band
    return (low if low > 0 else None), min(high, TOP_EDGE * sfreq / 2)


def fir_band_pass(band, sfreq, seconds=0.5):
    """The taps of a linear-phase FIR band-pass filter (scipy's ``firwin``: a Hamming
    window over the ideal band's impulse response).

    Parameters
    ----------
    band : (low, high)
        In Hz, as :func:`cut_at_nyquist` leaves it: ``low == 0`` gives a low-pass; a
        band reaching the Nyquist frequency is designed up to :data:`TOP_EDGE` of it.
    sfreq : float
        Sampling rate in Hz.
    seconds : float
        The filter's length: the nearest odd number of taps to ``seconds * sfreq``.

    Returns
    -------
    taps : ndarray of float32, shape (n_taps,)
    """
    from scipy.signal import firwin

    low, high = _design_edges(band, sfreq)
    n_taps = int(round(seconds * sfreq)) // 2 * 2 + 1
    if low is None:
        taps = firwin(n_taps, high, fs=sfreq)
    else:
        taps = firwin(n_taps, [low, high], pass_zero=False, fs=sfreq)
    return taps.astype(np.float32)


def iir_band_pass(X, sfreq, band):
    """``X`` filtered to ``band`` by a zero-phase 4th-order Butterworth band-pass (MNE's
    ``filter_data``: ``method="iir"``, second-order sections, forward and backward over
    the signal padded by the filter's ringing length), float64.

    Parameters
    ----------
    X : ndarray, shape (..., n_times)
    sfreq : float
        Sampling rate in Hz.
    band : (low, high) | None
        In Hz, as :func:`cut_at_nyquist` leaves it (``low == 0``: a low-pass; a band
        reaching the Nyquist frequency designed up to :data:`TOP_EDGE` of it). None
        returns ``X`` as it is.

    Returns
    -------
    X : ndarray, shape (..., n_times)
    """
    if band is None:
        return X
    from mne.filter import filter_data

    low, high = _design_edges(band, sfreq)
    iir_params = dict(order=4, ftype="butter", output="sos")
    X = np.asarray(X, dtype=np.float64)
    return filter_data(X, sfreq, low, high, method="iir", iir_params=iir_params, verbose=False)

"""What the estimators read and check beside
:mod:`~braindecode_pars.io.estimator_inputs`: the labels, the encoder a parameter
names and its rate, the windows' length, and the mixins every estimator of windows
shares.

- checking labels (:func:`check_labels`);
- the encoders a parameter names (:func:`load_encoder_param`), checked against the
  windows (:func:`check_encoder_rate`, :func:`check_window_length`); the resampling
  said (:func:`say_resampling`);
- the mixins: the tags of an estimator that draws at random
  (:class:`SeededWindowsMixin`), ``predict``/``score`` of a classifier of windows
  (:class:`WindowsClassifierMixin`), ``fit_transform`` with groups
  (:class:`GroupsTransformerMixin`).

Only the estimators use them. A pickled estimator names its own class, not these bases.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

import numpy as np
from sklearn.base import ClassifierMixin, TransformerMixin
from sklearn.metrics import accuracy_score

from braindecode_pars.io.estimator_inputs import WindowsInputMixin

logger = logging.getLogger(__name__)


def say_resampling(who, sfreq, encoder_sfreq):
    """Log (``logging.INFO``, once per fit) that windows are resampled for an encoder,
    naming both rates, so that a wrong ``sfreq`` given for arrays shows."""
    logger.info(
        "%s: the windows are at %g Hz (read from them; for arrays, the 'sfreq' given: "
        "check that it is theirs) and the encoder works at %g Hz: they are resampled "
        "from %g Hz to %g Hz for it, at fit and at predict.",
        who, sfreq, encoder_sfreq, sfreq, encoder_sfreq,
    )  # fmt: skip


def check_labels(y, name="y", at_least=2):
    """The sorted classes of ``y``, checked (present, no missing value, enough classes)."""
    if y is None:
        raise ValueError(f"Labels are missing: pass '{name}', or windows that carry their targets.")
    y = np.asarray(y)
    missing = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in y])
    if missing.any():
        raise ValueError(f"Labels are missing for {int(missing.sum())} window(s) in '{name}'.")
    classes = np.unique(y)
    if len(classes) < at_least:
        raise ValueError(
            f"Classification needs at least two classes, but '{name}' holds only "
            f"{classes.tolist()}."
        )
    return classes


def load_encoder_param(value, name="encoder", allow_none=True):
    """The encoder a parameter names (a copy: the caller's object is never trained), or
    None: a shipped name, a saved file or folder, or a PatchEncoder instance."""
    from braindecode_pars.hub.folders import load_encoder
    from braindecode_pars.models.encoder import PatchEncoder
    from braindecode_pars.weights import PRETRAINED_ENCODERS

    if value is None and allow_none:
        return None
    if isinstance(value, PatchEncoder):
        return copy.deepcopy(value)
    if not isinstance(value, str | os.PathLike):
        raise TypeError(
            f"'{name}' must be the name of a shipped encoder ({', '.join(PRETRAINED_ENCODERS)}), "
            f"the path of a saved encoder, a PatchEncoder"
            + (" or None" if allow_none else "")
            + f", but got {type(value).__name__} ({value!r})."
        )
    if isinstance(value, str) and value in PRETRAINED_ENCODERS:
        return load_encoder(value)
    path = Path(value)
    if not path.exists():
        raise FileNotFoundError(
            f"'{name}': there is no file or folder at '{path}', and it is not the name of a "
            f"shipped encoder ({', '.join(PRETRAINED_ENCODERS)})."
        )
    try:
        return load_encoder(path)
    except Exception as err:  # torch.load's errors say nothing of what was expected
        why = f"{type(err).__name__}: {err}"
        if "is not an encoder saved by" in str(err):
            why = "it holds no 'config' and 'state_dict'"
        raise ValueError(
            f"'{name}': '{path}' is not an encoder saved by braindecode_pars.save_encoder ({why})."
        ) from err


def check_encoder_rate(encoder, sfreq, n_times, name="encoder"):
    """Refuse an encoder whose sampling rate is not the windows' or whose patch is longer
    than a window, with the resampling hint."""
    if abs(encoder.sfreq - sfreq) > 1e-6:
        raise ValueError(
            f"The '{name}' works at sfreq={encoder.sfreq} Hz but the windows are at {sfreq} "
            f"Hz; resample them to {encoder.sfreq} Hz first: "
            f"braindecode_pars.io.resample_windows(X, sfreq={sfreq}, "
            f"new_sfreq={encoder.sfreq}) (arrays, braindecode windows or mne.Epochs)."
        )
    patch = int(round(encoder.patch_seconds * sfreq))
    if n_times < patch:
        raise ValueError(
            f"Windows of {n_times} samples are shorter than one {encoder.patch_seconds}-s "
            f"patch of the '{name}' ({patch} samples at {sfreq} Hz)."
        )


def check_window_length(n_times, n_chans, patch_seconds, sfreq):
    """Refuse windows shorter than one patch, hinting at swapped axes."""
    patch = int(round(patch_seconds * sfreq))
    if n_times < patch:
        hint = ""
        if n_chans >= patch:
            hint = (
                f" The windows are {n_chans} x {n_times}: if that is (n_times, n_chans), the "
                "axes are swapped; windows are (n_windows, n_chans, n_times)."
            )
        raise ValueError(
            f"Windows of {n_times} samples are shorter than one patch of "
            f"patch_seconds={patch_seconds} s ({patch} samples at {sfreq} Hz).{hint}"
        )
    return patch


class WindowsClassifierMixin(ClassifierMixin):
    """``predict_proba``, ``predict`` and ``score`` of a classifier of windows, over two
    hooks: ``_read(X, y=None, groups=None)``, the windows read once and checked against
    ``fit`` (a :class:`~braindecode_pars.io.windows.Windows`), and
    ``_proba(data)``, their class probabilities. ``predict`` is the most probable class
    (``_predict(data)`` for another rule); ``score`` is the accuracy of ``predict``, the
    labels read from the windows when ``y`` is None."""

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order; ``groups``: the group of each window where the estimator reads them (an
        aligned estimator; None: braindecode windows' ``subject``)."""
        return self._proba(self._read(X, groups=groups))

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,)."""
        return self._predict(self._read(X, groups=groups))

    def _predict(self, data):
        return np.asarray(self.classes_)[self._proba(data).argmax(axis=1)]

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        data = self._read(X, y, groups)
        check_labels(data.y, at_least=1)
        return accuracy_score(data.y, self._predict(data), sample_weight=sample_weight)


class GroupsTransformerMixin(TransformerMixin):
    """scikit-learn's ``TransformerMixin`` whose ``fit_transform`` hands ``transform``
    the ``groups`` that ``fit`` had (an aligned estimator then aligns the windows as
    ``fit`` did; scikit-learn's passes ``transform`` no groups)."""

    def fit_transform(self, X, y=None, groups=None, **fit_params):
        return self.fit(X, y, groups=groups, **fit_params).transform(X, groups=groups)


class SeededWindowsMixin(WindowsInputMixin):
    """scikit-learn tags of an estimator of windows (n_windows, n_chans, n_times) whose
    ``fit`` draws at random: non-deterministic unless ``random_state`` is set."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

"""What the scikit-learn estimators share about their parameters: storing them, and
the docstring entries of those that mean the same in each."""

from __future__ import annotations

#: Docstring entries that more than one estimator's methods hold, written at a method
#: docstring's indent; a docstring names one as ``%(name)s`` and :func:`fill_doc` fills
#: it in (as MNE-Python's ``docdict`` and ``fill_doc``).
DOCS = {
    "X_y_fit": """X : windows | ndarray, shape (n_windows, n_chans, n_times)
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.""",
}


def fill_doc(func):
    """``func`` with the ``%(name)s`` entries of its docstring filled from :data:`DOCS`."""
    func.__doc__ = func.__doc__ % DOCS
    return func


def store_params(estimator, values):
    """Set each argument of an estimator's ``__init__`` as the attribute of its name,
    unchanged and unchecked, as scikit-learn asks (``fit`` checks them).

    Parameters
    ----------
    estimator : sklearn.base.BaseEstimator
        The estimator being constructed.
    values : dict
        ``locals()`` taken first thing in ``__init__``: its arguments by name.
    """
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)

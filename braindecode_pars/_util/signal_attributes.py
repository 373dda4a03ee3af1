"""braindecode's signal attributes that raise ``AttributeError`` when they are not set.

braindecode's :class:`~braindecode.models.base.EEGModuleMixin` gives every model six
signal attributes (``n_outputs``, ``n_chans``, ``chs_info``, ``n_times``,
``input_window_seconds``, ``sfreq``) and ``input_shape`` built on two of them; one that
was neither given nor inferable raises :class:`ValueError`. Python's attribute
protocol expects :class:`AttributeError` for a missing attribute: ``hasattr(model,
"n_outputs")`` and ``getattr(model, "n_outputs", None)`` then crash instead of
answering. :class:`SignalAttributesMixin` keeps braindecode's getters and messages and
raises :class:`SignalAttributeError`, which is both an ``AttributeError`` (for
``getattr`` and ``hasattr``) and a ``ValueError`` (for code written against braindecode's
behaviour, braindecode's own included).
"""

from __future__ import annotations

from braindecode.models.base import EEGModuleMixin

#: The attributes of EEGModuleMixin that raise when their value is unknown.
SIGNAL_ATTRIBUTES = frozenset(
    ("n_outputs", "n_chans", "chs_info", "n_times", "input_window_seconds", "sfreq",
     "input_shape")
)  # fmt: skip


class SignalAttributeError(AttributeError, ValueError):
    """A signal attribute (``n_outputs``, ``n_times``...) that was not given.

    An ``AttributeError``, so that ``getattr(model, "n_outputs", None)`` is None and
    ``hasattr`` is False, and a ``ValueError``, which braindecode raises for the same.
    """


class SignalAttributesMixin:
    """Put before ``EEGModuleMixin``: its unknown signal attributes raise
    :class:`SignalAttributeError` with braindecode's message.

    A property that raises ``AttributeError`` hands over to ``__getattr__``
    (``torch.nn.Module``'s, which would say only that the attribute is missing), so the
    properties raise and ``__getattr__`` gives the reason: braindecode's message.
    """

    def __getattr__(self, name):
        if name in SIGNAL_ATTRIBUTES:
            try:
                getattr(EEGModuleMixin, name).fget(self)
            except ValueError as err:
                raise _signal_error(self, err) from None
        return super().__getattr__(name)


def _signal_error(model, err):
    """braindecode's ``ValueError`` ``err`` as a :class:`SignalAttributeError` naming the
    model's class (unchanged if it is one already)."""
    if isinstance(err, SignalAttributeError):
        return err
    return SignalAttributeError(f"{type(model).__name__}: {err}")


def _signal_property(name):
    """braindecode's property ``name``, raising :class:`SignalAttributeError`."""
    getter = getattr(EEGModuleMixin, name).fget

    def fget(self):
        try:
            return getter(self)
        except ValueError as err:
            raise _signal_error(self, err) from None

    fget.__name__ = name
    fget.__doc__ = getattr(EEGModuleMixin, name).__doc__
    return property(fget)


for _name in SIGNAL_ATTRIBUTES:
    setattr(SignalAttributesMixin, _name, _signal_property(_name))
del _name

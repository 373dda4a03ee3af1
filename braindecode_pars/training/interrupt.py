"""Ctrl-C stops a skorch fit instead of being swallowed."""

from __future__ import annotations

from skorch.callbacks import EarlyStopping


class PropagateInterrupt:
    """Mixin for a skorch ``NeuralNet``: a ``KeyboardInterrupt`` during training ends
    ``fit`` / ``partial_fit`` with that exception.

    skorch catches the interrupt, runs ``on_train_end`` (so callbacks can save what
    they hold) and returns a net that looks fitted. With this mixin the callbacks
    still run, then the interrupt reaches the caller, so a half-trained model is
    never returned as if it were finished. skorch's ``EarlyStopping``, which also
    stops training with a ``KeyboardInterrupt``, still ends ``fit`` normally.
    """

    def fit_loop(self, X, y=None, **fit_params):
        self.interrupted_ = False
        try:
            return super().fit_loop(X, y, **fit_params)
        except KeyboardInterrupt:
            self.interrupted_ = not self._stopped_early()
            raise

    def _stopped_early(self):
        """Whether skorch's ``EarlyStopping`` ended training (it raises
        ``KeyboardInterrupt`` to do so): that stop is a normal end of ``fit``."""
        return any(
            isinstance(cb, EarlyStopping) and getattr(cb, "misses_", 0) >= cb.patience
            for _, cb in getattr(self, "callbacks_", [])
        )

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        super().partial_fit(X, y, classes, **fit_params)
        if getattr(self, "interrupted_", False):
            raise KeyboardInterrupt(
                f"{type(self).__name__} was interrupted after {len(self.history)} epoch(s)."
            )
        return self

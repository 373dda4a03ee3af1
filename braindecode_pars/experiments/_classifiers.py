"""The classifiers the experiments build, in the estimators' composition (an encoder stage,
then a head), and what they need to know of a classifier whatever its form."""

from __future__ import annotations

from ..estimators import PARSClassifier, PARSFineTuner, PARSPretrainer
from ..models.encoder_config import ENCODER_SIZES, PatchEncoderConfig


def scratch_classifier(size=None, *, sfreq=None, random_state=None, verbose=0, **head):
    """A new encoder of ``size`` under the neural head, every weight trained (the paper's
    supervised baseline).

    Parameters
    ----------
    size : dict | PatchEncoderConfig | None
        The new encoder's settings (``emb_dim``, ``depth``, ...; those left out: the
        small size's, ``ENCODER_SIZES["small"]``); None: the small size.
    sfreq, random_state, verbose
        The classifier's; ``verbose`` also the head's unless ``head`` sets it.
    **head
        :class:`~braindecode_pars.PARSFineTuner` parameters (``max_epochs``, ``lr``,
        ``strategy`` ...).

    Returns
    -------
    clf : PARSFineTuner | PARSClassifier
        The small size: ``PARSFineTuner(encoder=None)`` itself, whose ``fit`` draws the
        new encoder's weights and then the head's from its seed, as the classifier
        trained from scratch always drew them. Another size:
        ``PARSClassifier(encoder=PARSPretrainer(max_epochs=0, **size), head=...)``, whose
        encoder stage draws the encoder from the seed and the head its own weights from
        the seed afresh (other draws than the same size drew before the estimators were
        composed).
    """
    head = {"verbose": verbose, **head}
    small = PatchEncoderConfig(**ENCODER_SIZES["small"])
    given = size.asdict() if isinstance(size, PatchEncoderConfig) else dict(size or {})
    config = PatchEncoderConfig.of({**small.asdict(), **given})
    if config == small:
        return PARSFineTuner(encoder=None, sfreq=sfreq, random_state=random_state, **head)
    return PARSClassifier(
        encoder=PARSPretrainer(max_epochs=0, **config.asdict(), verbose=0),
        head=PARSFineTuner(**head),
        sfreq=sfreq,
        random_state=random_state,
        verbose=verbose,
    )


def neural_head(clf):
    """The :class:`~braindecode_pars.PARSFineTuner` that ``clf`` trains (itself, or the
    head of a :class:`~braindecode_pars.PARSClassifier`), None for any other classifier
    (a probe, a floor): the head whose best epoch a validation set can choose."""
    if isinstance(clf, PARSClassifier):
        clf = getattr(clf, "head_", clf.head)
    return clf if isinstance(clf, PARSFineTuner) else None


def training_history(clf):
    """The epochs a fitted classifier trained (skorch's ``history_`` of its neural head),
    None where it trained none (a probe, a floor)."""
    head = neural_head(clf)
    return None if head is None else getattr(head, "history_", None)

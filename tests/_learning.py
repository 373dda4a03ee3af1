"""The learning tests' scores, checked against their thresholds and recorded for
``benchmarks/learning_margins.py``.

A test that asserts a learned score (a classifier's accuracy on data built for it, a
pretext skill, a probe at chance on noise) calls :func:`learned` instead of a bare
``assert``, and draws its data and models from :data:`SEED` on (``rng =
np.random.default_rng(SEED + 1)``, ``random_state=SEED``). At the defaults ``SEED`` is
0 and :func:`learned` asserts, so the suite is what it was. ``benchmarks/learning_margins.py``
runs the learning tests again at ten seeds and at one and two torch threads
(``PARS_LEARNING_SEED``, ``PARS_TEST_THREADS``), with ``PARS_LEARNING_RECORD`` naming
a file: every call then appends its score to that file instead of asserting, so a test
that would fail at one seed still reports all its scores. The margins it measured (the
worst seed, mean and sd beside each threshold) are in
``benchmarks/results/learning_margins.md``; a threshold sits below the worst seed.
"""

import json
import os

#: The seed a learning test starts from: 0, or ``PARS_LEARNING_SEED``.
SEED = int(os.environ.get("PARS_LEARNING_SEED", "0"))

#: Where the scores go when the margins are measured (one JSON line a score), else None.
RECORD = os.environ.get("PARS_LEARNING_RECORD")


def _test_id():
    return os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]


def learned(score, *, above=None, below=None, what="score", at_least=False):
    """Check a learned ``score`` against its threshold: ``score > above`` (``>=`` with
    ``at_least``) or ``score < below``; or, when the margins are measured, record it.

    Parameters
    ----------
    score : float
        The score measured.
    above, below : float | None
        The threshold; exactly one is given.
    what : str
        Which score of the test this is, when it checks several.
    at_least : bool
        ``score >= above`` instead of ``score > above``.
    """
    if (above is None) == (below is None):
        raise ValueError("give one of 'above' and 'below'")
    score = float(score)
    if RECORD:
        row = {"test": _test_id(), "what": what, "score": score, "seed": SEED,
               "threads": os.environ.get("PARS_TEST_THREADS", ""),
               "above": above, "below": below}  # fmt: skip
        with open(RECORD, "a") as f:
            f.write(json.dumps(row) + "\n")
        return
    if above is not None:
        ok = score >= above if at_least else score > above
        assert ok, f"{what}: {score:.4f} {'<' if at_least else '<='} {above} (seed {SEED})"
    else:
        assert score < below, f"{what}: {score:.4f} >= {below} (seed {SEED})"

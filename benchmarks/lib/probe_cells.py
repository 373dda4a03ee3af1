"""The probe-block benchmarks' shared cells: the tasks' labelled counts and seeds, the
block features of a task's part (cached), and the rule's score over a summary
(``bench_probe_blocks``, ``bench_probe_evidence``)."""

import logging
import time
from pathlib import Path

import numpy as np

from benchmarks.lib.dev_tasks import load_task
from braindecode_pars.features.blocks import block_features
from braindecode_pars.features.recipe import ProbeRecipe
from braindecode_pars.hub.folders import load_encoder

logger = logging.getLogger("bench_probe_blocks")

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "probe_blocks"

EEGMAT = "eegmat-arithmetic"
KS = ("1", "2", "4", "12")
SEEDS = (0, 1, 2, 3, 4)
#: The fewest labelled units an inner comparison runs on (PARSProbe's).
MIN_GROUPS = 3
#: The fixed recipe of ``PARSClassifier()``: every block, C=3, the default readout.
FULL = ProbeRecipe(("encoder", "bandpower", "tangentspace"))


def task_features(task, part, encoder_name):
    """Every window's raw features of the three blocks (cached), labels, units, the
    part's pool and scored units."""
    X, y, units, pool, scored, sfreq = load_task(task, part)
    tag = Path(str(encoder_name)).name
    path = CACHE / f"{tag}-{task}-{part}.npz"
    if path.exists():
        with np.load(path) as f:
            feats = {name: f[name] for name in FULL.blocks}
    else:
        start = time.perf_counter()
        feats, _ = block_features(X, FULL, sfreq=sfreq, encoder=load_encoder(encoder_name))
        feats = {name: np.asarray(feats[name]) for name in FULL.blocks}
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(path, **feats)
        logger.info("%s %s: features in %.0f s", task, part, time.perf_counter() - start)
    return feats, X, y, units, pool, scored, sfreq


def cells(task, scored):
    """The (k, seeds) of a task's part: EEGMAT's label counts, one block for MI's
    selection, one block and both for MI's test."""
    if task == EEGMAT:
        return [(k, SEEDS) for k in KS]
    if scored is None:
        return [("1", SEEDS)]
    return [("1", SEEDS), ("all", (0,))]


def score(summary, method, few=None):
    """The rule's score of ``method``: the mean over tasks of each task's mean over its
    cells (``few``: True, the cells of fewer than three labelled units; False, three or
    more; None, all)."""
    s = summary[summary.method == method]
    if few is not None:
        s = s[(s.n_units < MIN_GROUPS) == few]
    if s.empty:
        return np.nan
    return float(s.groupby("task")["mean"].mean().mean())

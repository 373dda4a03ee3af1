"""The development tasks: labelled tasks of different character, each with a fixed
selection split and a fixed test split.

Defaults of the library are chosen on the **selection** splits only; each **test**
split is scored once per reported configuration and never used to choose. Encoders
that a selection run scores with are pretrained without any subject (or recording)
that a selection or test split scores: on the **pool** subjects of EEGMAT and the
unlabelled corpora (Sleep-EDF segments, the Muse recordings).

=====================  ==========================================  ======  ========
task                   what                                        window  split by
=====================  ==========================================  ======  ========
``eegmat-arithmetic``  EEGMAT rest vs mental arithmetic            10 s    subject
``mi-imagery-lr``      PhysioNet-MI S001 imagined left vs right    4 s     block
``mi-executed-lr``     PhysioNet-MI S001 executed left vs right    4 s     block
``mi-imagery-4``       PhysioNet-MI S001 left, right, fists, feet  4 s     block
``mi-executed-ff``     PhysioNet-MI S001 executed fists vs feet    4 s     block
=====================  ==========================================  ======  ========

The four PhysioNet-MI tasks read every task run of S001 (runs 3-14): imagined left vs
right fist (4, 8, 12), executed left vs right fist (3, 7, 11), the four imagined
classes (4, 6, 8, 10, 12, 14) and executed both fists vs both feet (5, 9, 13). Runs 1-2
are one-minute baselines with no task.

EEGMAT's good vs bad counters (a per-subject trait, from the rest recordings) was
tried and dropped: leaving one of the 12 selection subjects out at a time, 10-s rest
windows at 100 Hz, both floors sit at chance (balanced accuracy 0.475 for band power,
0.472 for the Riemannian tangent space; 0.444 for both by majority vote per
subject), so the task cannot rank recipes.

EEGMAT's 36 subjects: the 12 test subjects of the main job
(:data:`~braindecode_pars.datasets.EEGMAT_TEST_SUBJECTS`), 12 selection subjects and
12 pool subjects, the last two drawn from the other 24 with
``numpy.random.default_rng(2026)``, half of the good and half of the bad counters
each (3 bad counters in each; 4 among the test subjects), so that a trait task
could use the same splits. PhysioNet-MI's one subject
is split by block of runs (runs 3-6, 7-10, 11-14; see
:func:`run_block`): blocks 1 and 2 select,
block 3 tests. S001 is scored by both, so no selection encoder sees any of its runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from braindecode_pars._util.checks import check_option
from braindecode_pars.datasets.eegmat import (
    EEGMAT_POOL_SUBJECTS,
    EEGMAT_SELECTION_SUBJECTS,
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
)
from braindecode_pars.demo.low_label import draw_subjects

#: The shared data folder beside the repository (``../shared/data``).
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"

#: PhysioNet-MI S001 blocks of runs that select, and the one that tests.
MI_SELECTION_BLOCKS = (1, 2)
MI_TEST_BLOCKS = (3,)


@dataclasses.dataclass(frozen=True)
class DevData:
    """The windows of a development task's part: ``X`` (n_windows, n_chans, n_times),
    labels ``y``, the unit each window belongs to (``groups``: a subject or a block) and
    the sampling rate."""

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    sfreq: float


@dataclasses.dataclass(frozen=True)
class DevTask:
    """A labelled development task and its fixed splits.

    Attributes
    ----------
    name : str
    description : str
    window_seconds : float
    unit : {"subject", "block"}
        What the splits and the labelled sets are made of.
    selection, test : tuple of int
        The units of the selection split and of the test split.
    runs : tuple of int
        The PhysioNet-MI runs of the task; empty for EEGMAT tasks.
    """

    name: str
    description: str
    window_seconds: float
    unit: str
    selection: tuple
    test: tuple
    runs: tuple = ()

    def load(self, part, eegmat_path=None, sfreq=100.0):
        """The windows of ``part`` ("selection" or "test") at ``sfreq``.

        PhysioNet-MI S001 is bundled with the package. EEGMAT tasks read PhysioNet's
        EDF files from ``eegmat_path`` (the package bundles 20 of the 36 subjects,
        not every selection subject).

        Returns
        -------
        data : DevData
        """
        check_option("part", part, ("selection", "test"))
        units = self.selection if part == "selection" else self.test
        return self.load_units(units, eegmat_path, sfreq)

    def load_units(self, units, eegmat_path=None, sfreq=100.0):
        """The windows of ``units`` (subjects or blocks) at ``sfreq``: the one reader of
        the development tasks (:meth:`load` reads a part's units with it, and
        :func:`load_task` the labelled pool and the scored units of one).

        Returns
        -------
        data : DevData
        """
        if self.name.startswith("eegmat") and eegmat_path is None:
            raise ValueError(
                f"'eegmat_path' is needed for the task {self.name!r}: the folder of "
                "PhysioNet's EEGMAT files (SubjectNN_1.edf, SubjectNN_2.edf, "
                "subject-info.csv), but got None."
            )
        if self.runs:
            return _physionet(self.runs, units, sfreq, self.window_seconds)
        return _eegmat(units, sfreq, self.window_seconds, eegmat_path)


def _eegmat(units, sfreq, window_seconds, path):
    from braindecode_pars.datasets.eegmat import load_eegmat
    from braindecode_pars.io.windows import read_windows

    windows = load_eegmat(path, list(units), sfreq=sfreq, window_seconds=window_seconds)
    data = read_windows(windows)
    meta = windows.get_metadata()
    subjects = meta["subject"].to_numpy().astype(int)
    return DevData(data.X, data.y, subjects, float(data.sfreq))


def run_block(run):
    """The block of a PhysioNet-MI run: 0 for the baselines (runs 1-2), 1-3 for runs 3-6,
    7-10 and 11-14 (each block holds one run of every task); ``load_physionet_mi`` puts
    the same number in its windows' ``block``."""
    return 0 if run < 3 else (run - 3) // 4 + 1


def _physionet(runs, units, sfreq, window_seconds):
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi
    from braindecode_pars.io.windows import read_windows

    chosen = [r for r in runs if run_block(r) in units]
    windows = load_physionet_mi(runs=chosen, window_seconds=window_seconds, sfreq=sfreq)
    data = read_windows(windows)
    blocks = windows.get_metadata()["block"].to_numpy().astype(int)
    if not set(blocks.tolist()) <= set(units):  # the loader numbers blocks otherwise
        raise RuntimeError(
            f"runs {chosen} read as blocks {sorted(set(blocks.tolist()))}, not {units}"
        )
    return DevData(data.X, data.y, blocks, float(sfreq))


#: The development tasks by name.
DEV_TASKS = {
    task.name: task
    for task in (
        DevTask(
            "eegmat-arithmetic",
            "EEGMAT rest vs mental arithmetic, across subjects",
            10.0,
            "subject",
            EEGMAT_SELECTION_SUBJECTS,
            EEGMAT_TEST_SUBJECTS,
        ),
        DevTask(
            "mi-imagery-lr",
            "PhysioNet-MI S001 imagined left vs right fist, across blocks of runs",
            4.0,
            "block",
            MI_SELECTION_BLOCKS,
            MI_TEST_BLOCKS,
            (4, 8, 12),
        ),
        DevTask(
            "mi-executed-lr",
            "PhysioNet-MI S001 executed left vs right fist, across blocks of runs",
            4.0,
            "block",
            MI_SELECTION_BLOCKS,
            MI_TEST_BLOCKS,
            (3, 7, 11),
        ),
        DevTask(
            "mi-imagery-4",
            "PhysioNet-MI S001 imagined left fist, right fist, both fists, both feet",
            4.0,
            "block",
            MI_SELECTION_BLOCKS,
            MI_TEST_BLOCKS,
            (4, 6, 8, 10, 12, 14),
        ),
        DevTask(
            "mi-executed-ff",
            "PhysioNet-MI S001 executed both fists vs both feet, across blocks of runs",
            4.0,
            "block",
            MI_SELECTION_BLOCKS,
            MI_TEST_BLOCKS,
            (5, 9, 13),
        ),
    )
}


def load_task(name, part, sfreq=100.0):
    """Windows, labels, units and the (pool, scored) units of a task's part: the pool's
    and the scored units, read by the one loader of the development tasks
    (:meth:`DevTask.load_units`)."""
    pool, scored = part_units(name, part)
    units = sorted({*pool, *(scored or ())})
    data = DEV_TASKS[name].load_units(units, SHARED / "eegmat", sfreq)
    return data.X.astype(np.float32), data.y, data.groups, tuple(pool), scored, data.sfreq


def part_units(name, part):
    """The (pool, scored) units of a task's part: the labelled units are drawn from the
    pool; ``scored`` None: the pool's other units are scored (one-subject task,
    selection part)."""
    if name == "eegmat-arithmetic":
        if part == "selection":
            return EEGMAT_POOL_SUBJECTS, EEGMAT_SELECTION_SUBJECTS
        return EEGMAT_TRAIN_SUBJECTS, EEGMAT_TEST_SUBJECTS
    return (
        (MI_SELECTION_BLOCKS, None)
        if part == "selection"
        else (MI_SELECTION_BLOCKS, MI_TEST_BLOCKS)
    )


def labelled_units(pool, scored, k, seed):
    """The labelled units of draw ``seed`` (see :func:`split`)."""
    if scored is None:  # one-subject task, selection part: one block labelled, the other scored
        return [pool[seed % len(pool)]]
    k = len(pool) if k == "all" else int(k)
    return draw_subjects(pool, k, seed, spread=True)


def split(units, pool, scored, k, seed):
    """Indices of the labelled and the scored windows of a draw, and the labelled units."""
    labelled = labelled_units(pool, scored, k, seed)
    if scored is None:
        scored = [u for u in pool if u not in labelled]
    train = np.flatnonzero(np.isin(units, labelled))
    test = np.flatnonzero(np.isin(units, scored))
    return train, test, labelled


def draw_summary(df, metric, by=("task", "method", "k")):
    """Mean ± std of ``metric`` per group of the columns ``by`` (a row's task, method and
    k), each distinct labelled set weighted once.

    Seeds that draw the same labelled set (PhysioNet-MI has two blocks to label, so its
    five seeds draw two sets, three times and twice) are averaged first; the mean and
    std are then over the distinct sets. With one set (k = all) they are over the seeds
    (the training's own randomness; 0 for the deterministic rows). ``sets`` is the
    number of distinct labelled sets, ``draws`` the number of rows.
    """
    rows = []
    for keys, g in df.groupby(list(by), sort=False):
        per_set = g.groupby("units")[metric].mean()
        values = per_set if len(per_set) > 1 else g[metric]
        rows.append(
            dict(
                zip(by, keys, strict=True),
                mean=values.mean(),
                std=np.nan_to_num(values.std(ddof=1)) if len(values) > 1 else 0.0,
                sets=len(per_set),
                draws=len(g),
            )
        )
    return pd.DataFrame(rows)


def lowest_k(df, metric):
    """Methods x tasks: ``metric`` at one labelled unit (each distinct labelled set
    weighted once, :func:`draw_summary`), with the "mean over tasks" (blank unless every
    task ran); None when no row has k = 1. ``df``'s ``k`` and ``units`` as strings."""
    s = draw_summary(df[df.k == "1"], metric)
    if s.empty:
        return None
    tasks = [t for t in df.task.unique() if t in set(s.task)]
    low = s.pivot(index="method", columns="task", values="mean")[tasks]
    low["mean over tasks"] = low.mean(axis=1, skipna=False)
    return low

"""The paper's datasets by name, each with its paper split (appendix A.3)."""

from __future__ import annotations

import numpy as np

from braindecode_pars._util.checks import check_option
from braindecode_pars.datasets.eesm17 import load_eesm17
from braindecode_pars.datasets.physionet_mi import PHYSIONET_MI_SPLIT, load_physionet_mi
from braindecode_pars.datasets.tuh import load_tuab, load_tusz, tuh_subject_split
from braindecode_pars.datasets.ysyw import load_ysyw, ysyw_split

RECIPES = ("physionet_mi", "ysyw", "tuab", "tusz", "eesm17")


def subject_column(windows):
    """The description column that names the patient ('subject', or YSYW's 'record')."""
    columns = windows.description.columns
    return "subject" if "subject" in columns else "record"


def load_recipe(name, path=None, random_state=0, **options):
    """A dataset of the paper, split as the paper splits it.

    Parameters
    ----------
    name : {"physionet_mi", "ysyw", "tuab", "tusz", "eesm17"}
    path : str | Path | None
        Local copy of the dataset (PhysioNet-MI: MNE's eegbci layout, default the
        bundled subject; YSYW: the folder with ``training/`` and ``test/``; TUAB and
        TUSZ: the ``edf`` folder; EESM17: the BIDS root).
    random_state : int
        Seed of the random patient splits (YSYW 60/20/20, TUH 80/20 train/valid).
        YSYW's split is drawn once and written to its split file
        (:func:`~braindecode_pars.datasets.ysyw.ysyw_split`), which
        ``pretraining_corpus`` reads too; a file drawn with another seed is refused.
    **options
        PhysioNet-MI: ``split`` (dict of train/valid/test subject lists; default
        subjects 1-70/71-89/90-109); YSYW: ``split_file`` (default ``splits.json``
        in ``path``); TUH: ``max_files``; EESM17: ``subjects``, ``channels``,
        ``stages``. YSYW, TUH and EESM17: ``cache_dir``, a folder where the
        windows are prepared once, one recording at a time, and read back lazily
        (the way to the paper's full datasets; see ``load_ysyw``).

    Returns
    -------
    split : dict of str -> braindecode BaseConcatDataset
        ``train``, ``valid`` and ``test`` windows; EESM17, evaluated
        leave-one-subject-out, gives ``all``.
    """
    check_option("name", name, RECIPES)
    if name == "physionet_mi":
        split = options.pop("split", PHYSIONET_MI_SPLIT)
        return {
            part: load_physionet_mi(subjects=list(subjects), path=path, **options)
            for part, subjects in split.items()
        }
    if name == "ysyw":
        parts = ysyw_split(path, options.pop("split_file", None), random_state=random_state)
        parts = {part: records for part, records in parts.items() if records}  # as TUH's
        if options.get("cache_dir") is None:
            return {part: load_ysyw(path, records=records) for part, records in parts.items()}
        windows = load_ysyw(path, records=sum(parts.values(), []), **options)
        records = windows.description["record"]
        return windows.split(
            {part: np.flatnonzero(records.isin(names)).tolist() for part, names in parts.items()}
        )
    if name in ("tuab", "tusz"):
        loader = load_tuab if name == "tuab" else load_tusz
        return tuh_subject_split(loader(path, **options), random_state=random_state)
    return {"all": load_eesm17(path, **options)}


def subjects_of(windows):
    """Sorted patient names of a windows dataset."""
    return sorted(set(np.asarray(windows.description[subject_column(windows)]).tolist()))

"""The encoders pretrained for the benchmark tables, kept out of the tree.

``benchmarks/encoders/`` (12.5 MB: the selection encoders ``pars-selection*``,
``pars-small-v3``, ``mae-small``, the run state ``pars-small-v2-run`` and the pretext
comparison's ``comparison/runs.json``) is not tracked since the tree that travels to a
GPU machine had to shrink (issue 61). The files are in the repository's history:
``make benchmark-encoders`` writes them back with
``git archive <ENCODERS_COMMIT> benchmarks/encoders | tar -x``, and the input
normalisation's (``benchmarks/encoders/normalization/``) from
``NORMALIZATION_COMMIT`` (a full clone holds those commits; a shallow one needs ``git
fetch --unshallow`` first).
"""

from __future__ import annotations

from pathlib import Path

#: The folder the benchmarks read their pretrained encoders from.
ENCODERS = Path(__file__).resolve().parents[1] / "encoders"
#: The last commit whose tree holds ``benchmarks/encoders/``.
ENCODERS_COMMIT = "09227cb0b85c531beb195eda6e215936f4dba107"
#: The commit whose tree holds ``benchmarks/encoders/normalization/``, the encoders of
#: ``bench_normalization.py`` (retired) pretrained since (each added in one commit and removed in
#: the next, so that the tree stays small).
NORMALIZATION_COMMIT = "c7af8f645cf3de7f5fde0692f4c290d5ef865dce"
#: The command that restores them.
RESTORE = "make benchmark-encoders"
#: The selection corpus's small encoders of today's settings, by seed (10-s crops, 40 patches).
SELECTION_ENCODERS = {
    0: "benchmarks/encoders/pars-selection",
    1: "benchmarks/encoders/pars-selection-seed1",
    2: "benchmarks/encoders/pars-selection-seed2",
}


def benchmark_encoder(encoder):
    """``encoder`` unchanged, checked to exist when it lies in ``benchmarks/encoders/``.

    Parameters
    ----------
    encoder : str | Path
        A shipped encoder's name (``'pars-small-v2'``) or a folder or file.

    Returns
    -------
    encoder : str | Path
        The argument, unchanged.

    Raises
    ------
    FileNotFoundError
        If ``encoder`` names a path inside ``benchmarks/encoders/`` that is absent; the
        message names the make target that restores the folder.
    """
    path = Path(encoder).resolve()
    if not path.exists() and (path == ENCODERS or ENCODERS in path.parents):
        raise FileNotFoundError(
            f"'{encoder}' is absent: benchmarks/encoders/ is not tracked. Restore it from "
            f"the repository's history with `{RESTORE}` (git archive of commit "
            f"{ENCODERS_COMMIT[:7]}; a shallow clone needs `git fetch --unshallow` first)."
        )
    return encoder

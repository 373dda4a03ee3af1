"""The probe rows of the development tasks' benchmarks (``bench_dev_tasks``, and
through :mod:`.selection` the selections' scripts): every window's raw features, block by
block, the rows' names (``floor (band power)``, ``probe[enc+bp+ts, 100]``,
``probe[enc|bp+ts, 100]``...; ``bench_dev_tasks`` says what they mean) and the library's
probe of each row fitted on some of the windows."""

from __future__ import annotations

import re

import numpy as np
import torch

from braindecode_pars.features.blocks import block_features
from braindecode_pars.features.recipe import ProbeRecipe, compare_recipes, fit_blocks
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.models.encoder import PatchEncoder

#: The blocks that read the encoder otherwise than its mean token, and their
#: ``EncoderFeatures`` readout.
READOUT_BLOCKS = {"encstd": "mean+std", "encblocks": "blocks"}
#: The grid of C a ``cv`` row chooses from (in the rows' units).
C_GRID = (0.1, 1.0, 10.0, 100.0)


def rows_of(blocks, rows):
    """The windows ``rows`` of every block (``{name: raw features}``)."""
    return {name: F[rows] for name, F in blocks.items()}


def fit_probe(blocks, y, train, C, seed, units):
    """The library's probe of ``blocks`` (``C`` in the library's units) fitted on the
    windows ``train``; with ``units``, each unit aligned on its own windows."""
    recipe = ProbeRecipe(tuple(blocks), C=C, align=None if units is None else "groups")
    groups = None if units is None else units[train]
    return fit_blocks(recipe, rows_of(blocks, train), y[train], groups, random_state=seed)


def predict_blocks(blocks, y, train, test, C, seed, units=None):
    """The library's probe of ``blocks`` (``{name: raw features}``, in order; ``C`` in the
    library's units) fitted on the windows ``train``, its predictions of ``test``; with
    ``units``, each unit aligned on its own windows."""
    model = fit_probe(blocks, y, train, C, seed, units)
    proba = model.predict_proba(rows_of(blocks, test), None if units is None else units[test])
    return model.classes_[proba.argmax(axis=1)]


def features(X, sfreq, encoder, rand_seeds=(0,), readouts=()):
    """The raw features of every window, ``{name: array}``: the encoder (read as
    ``readout="mean"``), the encoder's other readouts named in ``readouts`` (of
    :data:`READOUT_BLOCKS`), random encoders (one block per seed of ``rand_seeds``:
    ``rand`` for seed 0, ``rand<seed>`` for the others), band power, covariances; each by
    the library's :func:`~braindecode_pars.features.blocks.block_features`."""
    enc = load_encoder(encoder)

    def encoded(model, readout):
        recipe = ProbeRecipe(("encoder",), readout=readout)
        return block_features(X, recipe, sfreq=sfreq, encoder=model)[0]["encoder"]

    blocks = {"enc": encoded(enc, "mean")}
    for name in readouts:
        blocks[name] = encoded(enc, READOUT_BLOCKS[name])
    for seed in rand_seeds:
        torch.manual_seed(seed)
        rand = PatchEncoder(sfreq=enc.sfreq, **enc.config.asdict())
        blocks["rand" if seed == 0 else f"rand{seed}"] = encoded(rand, "mean")
    classical = block_features(X, ProbeRecipe(("bandpower", "tangentspace")), sfreq=sfreq)[0]
    blocks["bp"], blocks["ts"] = classical["bandpower"], classical["tangentspace"]
    return blocks


def parse_probe(method):
    """``probe[enc+bp, cv]`` -> ({"enc", "bp"}, "cv", False); ``probe[enc+bp, 100,
    aligned]`` -> ({"enc", "bp"}, 100.0, True)."""
    inner = method[len("probe[") : -1]
    parts = [s.strip() for s in inner.split(",")]
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "aligned"):
        raise ValueError(
            f"Unknown probe row {method!r}: probe[BLOCKS, C] or probe[BLOCKS, C, aligned]."
        )
    blocks, C = parts[:2]
    return set(re.split(r"[+|]", blocks)), (C if C == "cv" else float(C)), len(parts) == 3


def fusion_parts(method):
    """The parts of a late-fusion probe row, in order: ``probe[enc|bp+ts, 100]`` ->
    [["enc"], ["bp", "ts"]]; None for a row without ``|`` (one regression)."""
    blocks = method[len("probe[") :].split(",")[0].strip()
    if "|" not in blocks:
        return None
    return [block_order(set(part.split("+"))) for part in blocks.split("|")]


#: The floors, by row name: (block, aligned within units).
FLOORS = {
    "floor (band power)": ("bp", False),
    "floor (tangent space)": ("ts", False),
    "floor (band power, aligned)": ("bp", True),
    "floor (tangent space, aligned)": ("ts", True),
}


def _width(F):
    """The features a block gives the regression: its columns, or for covariances the
    tangent space's ``n (n + 1) / 2``."""
    return F.shape[1] * (F.shape[1] + 1) // 2 if F.ndim == 3 else F.shape[1]


def library_c(C, blocks):
    """The library's C of a probe row's ``C``: the rows were recorded with each block of
    total variance 1, the library scales each to ``P / B``; scaling every feature by
    ``s`` is the same fit as ``C * s**2``, so the row's fit is the library's with
    ``C * B / P``."""
    widths = [_width(F) for F in blocks.values()]
    return C * len(widths) / sum(widths)


def fit_fused(parts, y, train, test, C, seed, units=None):
    """Late fusion: one probe per part (a dict of blocks, ``C`` in the rows' units), the
    class probabilities of the scored windows averaged over the parts, the most probable
    class predicted."""
    proba = 0.0
    for blocks in parts:
        model = fit_probe(blocks, y, train, library_c(C, blocks), seed, units)
        groups = None if units is None else units[test]
        proba = proba + model.predict_proba(rows_of(blocks, test), groups) / len(parts)
    return model.classes_[np.argmax(proba, axis=1)]


def inner_c(blocks, y, train, units, seed, aligned=False):
    """C of C_GRID (the rows' units) with the best leave-one-group-out balanced accuracy
    over the labelled units; 1 with a single unit."""
    if len(np.unique(units[train])) < 2:
        return 1.0
    align = "groups" if aligned else None
    candidates = [ProbeRecipe(tuple(blocks), C=library_c(C, blocks), align=align) for C in C_GRID]
    scores = compare_recipes(
        candidates, rows_of(blocks, train), y[train], units[train], random_state=seed
    )
    return C_GRID[int(np.argmax(scores["mean"].fillna(-np.inf).to_numpy()))]


def random_block_seed(name):
    """The initialisation seed of a random-encoder block: ``rand`` 0, ``rand3`` 3; None
    for any other block."""
    if name == "rand":
        return 0
    if name.startswith("rand") and name[4:].isdigit():
        return int(name[4:])
    return None


def block_order(names):
    """Blocks in the order they are stacked: the encoder (its mean token, then the
    other readouts), random encoders by seed, band power, tangent space."""
    rand = sorted((n for n in names if random_block_seed(n) is not None), key=random_block_seed)
    return [n for n in ("enc", *READOUT_BLOCKS, *rand, "bp", "ts") if n in names]


def requested_blocks(methods):
    """Every block name the probe rows of ``methods`` use; unknown names are refused."""
    names = set()
    for method in methods:
        if method.startswith("probe["):
            names |= parse_probe(method)[0]
    known = ("enc", *READOUT_BLOCKS, "bp", "ts")
    unknown = sorted(n for n in names if n not in known and random_block_seed(n) is None)
    if unknown:
        raise ValueError(
            f"Unknown probe block(s) {unknown}: blocks are enc, encstd, encblocks, rand "
            "(rand1, rand2, ...: other random initialisations), bp and ts."
        )
    return names


def fit_probe_row(method, blocks, y, train, test, units, seed):
    """The predictions of a floor or probe row (:data:`FLOORS`, ``probe[...]``)."""
    if method in FLOORS:  # one block, standardised: the library's C is the floor's
        block, aligned = FLOORS[method]
        chosen = {block: blocks[block]}
        return predict_blocks(chosen, y, train, test, 1.0, seed, units if aligned else None)
    names, C, aligned = parse_probe(method)
    groups = units if aligned else None
    fused = fusion_parts(method)
    if fused is not None:
        if C == "cv":
            raise ValueError(f"{method!r}: late fusion takes a fixed C.")
        parts = [{b: blocks[b] for b in part} for part in fused]
        return fit_fused(parts, y, train, test, C, seed, groups)
    chosen = {b: blocks[b] for b in block_order(names)}
    if C == "cv":
        C = inner_c(chosen, y, train, units, seed, aligned)
    return predict_blocks(chosen, y, train, test, library_c(C, chosen), seed, groups)

"""A pretraining run's record (``config.json``) and the check that a resumed run is the same.

``_run_config`` writes down what a run must keep to be resumed: the pretext model,
its encoder (:class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`), the
optimisation, the epoch budget and the data's fingerprint (:func:`data_fingerprint`).
:func:`_check_resume` compares a folder's record with a net about to resume it and
raises a :class:`RunMismatchError` that names what differs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from pathlib import Path

import numpy as np
import torch

from braindecode_pars._util.logs import plural
from braindecode_pars.models.encoder_config import RECORD_PREFIX, PatchEncoderConfig
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.schedule import warmup_cosine_factor

logger = logging.getLogger(__name__)

#: The keys of the data's identity in a record; a run that records a description of
#: its data (``data.*`` entries of ``run_info``) names what changed in its words.
_DATA_IDENTITY = ("data.n_windows", "data.fingerprint")


class RunMismatchError(ValueError):
    """A checkpoint folder holds a run with other settings than the one asked for.

    Attributes
    ----------
    folder : Path
        The checkpoint folder.
    differences : dict
        ``{setting: (saved, now)}`` for every setting that differs. When the data
        differ and both runs describe their data (the ``data.*`` facts of
        ``run_info``, e.g. ``data.preprocessing``), the parts of the description that
        differ come first, under their own keys, then the data's fingerprint.
    """

    def __init__(self, folder, differences, name="checkpoint_dir"):
        self.folder = Path(folder)
        self.differences = dict(differences)
        listed = "; ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in differences.items())
        hint = ""
        if "max_epochs" in differences:
            hint = " (another epoch budget: pass allow_new_budget=True to change it)"
        super().__init__(
            f"'{name}' {str(folder)!r} holds a run with other settings; resuming it would mix "
            f"them. Differences: {listed}{hint}. Use another '{name}', or the saved settings."
        )


def _run_config(net, X=None):
    """The settings a resumed run must share: model, pretext task, encoder,
    optimisation, epoch budget and, given the training data ``X``, their fingerprint.

    Parameters
    ----------
    net : PretrainNet
        An initialised net.
    X : dataset | None
        The training data.

    Returns
    -------
    config : dict
        Flat and JSON-serialisable; the encoder's settings as ``encoder.<setting>``
        (:meth:`PatchEncoderConfig.record`).
    """
    model = net.pretext_
    config = {"model": type(model).__name__}
    for name in ("n_times", "sfreq"):
        value = getattr(model, name, None)
        if isinstance(value, int | float):
            config[name] = value
    config.update(model.settings())
    config.update(model.encoder.config.record())
    config.update(
        lr=net.lr,
        batch_size=net.batch_size,
        weight_decay=net.get_params_for("optimizer").get("weight_decay"),
        optimizer=getattr(net.optimizer, "__name__", str(net.optimizer)),
        warmup_fraction=net.warmup_fraction,
        valid_fraction=net.valid_fraction,
        max_epochs=net.max_epochs,
    )
    if X is not None:
        config.update(data_fingerprint(X))
    return config


def _read_record(saved):
    """A saved run record with its encoder settings as ``_run_config`` writes them
    (:meth:`PatchEncoderConfig.from_record`: checked, the activation by its name)."""
    encoder = PatchEncoderConfig.from_record(saved)
    saved = {k: v for k, v in saved.items() if not k.startswith(RECORD_PREFIX)}
    return {**saved, **encoder.record()}


def _check_resume(net, folder, X=None):
    """Refuse to resume a run whose saved settings differ from ``net``'s.

    Parameters
    ----------
    net : PretrainNet
        The initialised net about to resume.
    folder : str | Path
        The run's checkpoint folder.
    X : dataset | None
        The training data (their fingerprint is compared too).

    Returns
    -------
    config : dict
        ``net``'s record (``_run_config``), to be written to ``config.json``.

    Raises
    ------
    RunMismatchError
        When a setting differs; another ``max_epochs`` only without
        ``net.allow_new_budget`` (with it, a warning says where the learning rate
        goes).
    """
    saved_file = Path(folder) / "config.json"
    config = json.loads(json.dumps(_run_config(net, X)))
    if not saved_file.is_file():
        return config
    saved = _read_record(json.loads(saved_file.read_text()))
    info = set(net.run_info or {}) | set(saved.get("run_info", []))
    diffs = {
        key: (saved.get(key), config.get(key))
        for key in sorted(set(saved) | set(config))
        if not _same(saved.get(key), config.get(key)) and key not in info and key != "run_info"
    }
    if any(key in diffs for key in _DATA_IDENTITY):
        described = _data_description_changes(saved, net.run_info or {})
        diffs = {**described, **diffs}
    budget = diffs.pop("max_epochs", None)
    if diffs or (budget and not net.allow_new_budget):
        if budget:
            diffs["max_epochs"] = budget
        raise RunMismatchError(folder, diffs)
    if budget:
        done = json.loads((Path(folder) / "state.json").read_text()).get("epoch", 0)
        old, new = budget
        lr, warmup = net.lr, net.warmup_fraction
        logger.warning(
            "Resuming %s with %s epochs instead of %s: after epoch %d the learning rate "
            "goes from %.3g (%.0f %% of the old run) to %.3g (%.0f %% of the new one) "
            "and follows the new curve.",
            folder, new, old, done,
            lr * warmup_cosine_factor(done / old, warmup), 100 * done / old,
            lr * warmup_cosine_factor(done / new, warmup), 100 * done / new,
        )  # fmt: skip
    return config


def _data_description_changes(saved, run_info):
    """``{fact: (saved, now)}`` of the ``data.*`` facts both runs describe differently.

    A description made of clauses (``"resampled to 100 Hz, high-pass 0.5 Hz, notch
    none; 10-s windows every 1.25 s"``) is cut down to the clauses that differ
    (``"notch none"`` against ``"notch 50.0"``) when both hold as many clauses.
    """
    recorded = set(saved.get("run_info", []))
    changes = {}
    for key, now in run_info.items():
        if not key.startswith("data.") or key in _DATA_IDENTITY or key not in recorded:
            continue
        before = saved.get(key)
        if _same(before, now):
            continue
        if isinstance(before, str) and isinstance(now, str):
            before, now = _differing_clauses(before, now)
        changes[key] = (before, now)
    return changes


def _differing_clauses(before, now):
    """The clauses of two descriptions that differ, if they hold as many, else both whole."""
    split = re.compile(r"[,;]\s+")
    a, b = split.split(before), split.split(now)
    if len(a) != len(b):
        return before, now
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    return ", ".join(x for x, _ in pairs), ", ".join(y for _, y in pairs)


def data_fingerprint(X):
    """Number of windows and a short hash of a pretraining dataset, to recognise it.

    For a :class:`~braindecode_pars.pretraining.SingleChannelWindows` view (or any object
    with ``recordings`` and ``index``), the hash covers the window index, the
    recordings' shapes, the first and last 4,096 samples of each recording, the window
    length and the sampling rate: cheap for a memory-mapped store of any size, and
    different whenever other recordings or windows are given. Other datasets are
    recognised by their length and type only.
    """
    digest = hashlib.sha1(type(X).__name__.encode())
    recordings, index = getattr(X, "recordings", None), getattr(X, "index", None)
    if recordings is not None and index is not None:
        digest.update(np.ascontiguousarray(np.asarray(index, dtype=np.int64)).tobytes())
        digest.update(repr((getattr(X, "n_times", None), getattr(X, "sfreq", None))).encode())
        for rec in recordings:
            digest.update(repr(tuple(rec.shape)).encode())
            flat = np.asarray(rec).reshape(-1)
            for part in (flat[:4096], flat[-4096:]):
                digest.update(np.ascontiguousarray(part, dtype=np.float32).tobytes())
    return {"data.n_windows": len(X), "data.fingerprint": digest.hexdigest()[:16]}


def _log_resumed(net, folder, done, steps=0):
    """Say what a sitting that found a saved state in ``folder`` does: it resumes after
    ``done`` epochs (and ``steps`` steps of the next), or, when ``done`` reaches the
    net's ``max_epochs``, the run is finished already and nothing is trained."""
    if done >= net.max_epochs:
        logger.info(
            "The run in %s is finished already (%d of %s): nothing to train. A larger "
            "epoch budget trains it further (allow_new_budget=True; the command's "
            "--epochs and --extend).",
            folder, done, plural(net.max_epochs, "epoch"),
        )  # fmt: skip
        return
    logger.info(
        "Resuming pretraining from %s after %s%s.",
        folder, plural(done, "epoch"),
        f" and {plural(steps, 'step')} of epoch {done + 1}" if steps else "",
    )  # fmt: skip


def _log_launch_change(net, folder):
    """Log how this sitting's launch (processes, compile, amp) differs from the saved one,
    and, on a CPU, when it computes on another number of torch threads than the sitting
    that saved the state (:func:`_log_thread_change`)."""
    pointer = Path(folder) / "state.json"
    saved = json.loads(pointer.read_text()) if pointer.is_file() else {}
    _log_thread_change(net, folder, saved)
    _log_worker_change(net, folder, saved)
    now = {
        "world_size": distributed.world_size() if net.distributed_ else 1,
        "compile": bool(net.compile),
        "amp": bool(net.amp),
    }
    changed = [f"{k} {saved[k]} -> {v}" for k, v in now.items() if k in saved and saved[k] != v]
    if changed:
        logger.warning(
            "Resuming %s with %s (the global batch is batch_size x processes: %d x %d).",
            folder, ", ".join(changed), net.batch_size, now["world_size"],
        )  # fmt: skip


def _log_worker_change(net, folder, saved):
    """Warn when a run that reads its store in the order of the disk resumes on another
    number of DataLoader workers than the sitting that saved it (``workers`` in
    ``state.json``): the workers interleave the batches, so the order changes."""
    workers = saved.get("workers")
    if workers is None or net.store_read != "disk" or saved.get("epoch", 0) >= net.max_epochs:
        return
    now = int(net.get_params_for("iterator_train").get("num_workers", 0) or 0)
    if int(workers) != now:
        logger.warning(
            "Resuming %s on %d DataLoader workers, where the state was saved on %d: a store "
            "read in the order of the disk hands its batches over worker by worker, so the "
            "run goes on with the batches in another order than the run never stopped "
            "(--workers %d, or iterator_train__num_workers=%d, keeps them).",
            folder, now, workers, workers, workers,
        )  # fmt: skip


def _log_thread_change(net, folder, saved):
    """Warn when a sitting on a CPU resumes with another count of torch threads than the
    one that saved the state (``threads`` in ``state.json``): torch's CPU kernels split
    their sums and products by thread, so that the run goes on with other bits than the
    run never stopped (every draw is the same; the rounding is not)."""
    threads = saved.get("threads")
    if threads is None or torch.device(net.device or "cpu").type != "cpu":
        return
    if saved.get("epoch", 0) >= net.max_epochs:  # finished: nothing is computed
        return
    now = torch.get_num_threads()
    if int(threads) != now:
        logger.warning(
            "Resuming %s on %d torch threads, where the state was saved on %d: on a CPU "
            "the sums split by thread round otherwise, so the weights will not end bit for "
            "bit as those of the run never stopped (--threads %d, or OMP_NUM_THREADS=%d, "
            "or torch.set_num_threads(%d), keeps the count).",
            folder, now, threads, threads, threads, threads,
        )  # fmt: skip


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return a == b

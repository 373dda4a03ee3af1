"""The callbacks of a pretraining run: its pretext skill, its progress, its sampler's epoch."""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time

import numpy as np
import torch
from skorch.callbacks import Callback, PrintLog, ProgressBar

from braindecode_pars._util.logs import shows_bars
from braindecode_pars._util.progress import ANSI, duration, logs_above_bars
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.schedule import _batches_per_epoch
from braindecode_pars.pretraining.steps import _kept

logger = logging.getLogger(__name__)


class PretextSkill(Callback):
    """Record the pretext skill of every epoch: ``1 - loss / trivial_loss``.

    After every batch, keeps the ``trivial_loss`` entry of the batch's output (the
    ``y_pred`` that skorch hands to ``on_batch_end``: the loss of a predictor that
    learned nothing, on the same batch and draws) as ``train_trivial`` or
    ``valid_trivial``: a copy of the device tensor, so that no step waits for the
    device to log it (and a CUDA graph's replay cannot rewrite it). So does the
    count of pairs the pair decoder could not compute exactly, when the output has
    one (``unresolved_pairs``). :class:`~braindecode_pars.pretraining.PretrainNet` reads
    these values with the losses at its report cadence (:meth:`PretrainNet.read_log
    <braindecode_pars.pretraining.PretrainNet.read_log>`: one transfer, and under
    DistributedDataParallel one all-reduce that averages the trivial losses over the
    processes, as the losses, and sums the counts), then calls :meth:`on_epoch_read`
    for each epoch ended since, which records ``train_skill`` in each training batch
    and, for the epoch, ``train_trivial``, ``train_skill`` and, with a validation set,
    ``valid_trivial`` and ``valid_skill``, each weighted by batch size, and the pair
    decoder's largest logit gap (``train_pair_gap``, ``valid_pair_gap``, in nats), and
    warns if any pair went unresolved; pairs unresolved at two reports in a row move the
    run's decoder to float64 factor tables, and at two more the run stops with an error.
    The move, and the count of reports in a row, are saved with the run's state
    (:class:`~braindecode_pars.pretraining.StateCheckpoint`): a resumed run goes on in
    float64. 0 skill means the encoder learned nothing, 1 a perfect prediction.
    """

    def on_batch_end(self, net, batch=None, training=None, loss=None, y_pred=None, **kwargs):
        if not isinstance(y_pred, dict) or "trivial_loss" not in y_pred:
            return
        prefix = "train" if training else "valid"
        copy = getattr(net, "cuda_graphs_", False)  # the step's outputs, copied under graphs
        net.history.record_batch(f"{prefix}_trivial", _kept(y_pred["trivial_loss"], copy))
        for key in (_UNRESOLVED, _GAP):
            if key in y_pred:
                net.history.record_batch(f"{prefix}_{key}", _kept(y_pred[key], copy))

    def on_epoch_read(self, net, row):
        """Record the skill of epoch ``row`` (a row of the history), whose values are read."""
        batches = row["batches"]
        for b in batches:
            if "train_trivial" in b and "train_loss" in b:
                b["train_skill"] = pretext_skill(b["train_loss"], b["train_trivial"])
        for prefix in ("train", "valid"):
            rows = [b for b in batches if f"{prefix}_trivial" in b and f"{prefix}_loss" in b]
            if not rows:
                continue
            n = np.array([b[f"{prefix}_batch_size"] for b in rows], dtype=float)
            loss = float(np.dot(n, [b[f"{prefix}_loss"] for b in rows]) / n.sum())
            trivial = float(np.dot(n, [b[f"{prefix}_trivial"] for b in rows]) / n.sum())
            row[f"{prefix}_trivial"] = trivial
            row[f"{prefix}_skill"] = pretext_skill(loss, trivial)
            gaps = [b[f"{prefix}_{_GAP}"] for b in rows if f"{prefix}_{_GAP}" in b]
            if gaps:
                row[f"{prefix}_{_GAP}"] = float(max(gaps))
            unresolved = sum(b.get(f"{prefix}_{_UNRESOLVED}", 0) for b in rows)
            if unresolved:
                row[f"{prefix}_{_UNRESOLVED}"] = unresolved
                logger.warning(
                    "Epoch %s: the pair decoder could not compute %g pair-head(s) of its %s "
                    "batches exactly (logits spread over tens of nats at every key; largest "
                    "gap %.1f nats): in each such pair-head the term is 0 and passes no "
                    "gradient.",
                    row.get("epoch", "?"), unresolved, prefix, max(gaps, default=math.nan),
                )  # fmt: skip
        self._escalate(net, row)

    def _escalate(self, net, row):
        """A run whose pairs go unresolved at two reports in a row does not go on
        silently: its cross-attention decoders move to float64 factor tables (which
        underflow only about 8 times as far out); if pairs still go unresolved with
        float64 tables at two reports in a row, the run stops with an error."""
        if not any(row.get(f"{prefix}_{_UNRESOLVED}") for prefix in ("train", "valid")):
            self.unresolved_reports_ = 0
            return
        self.unresolved_reports_ = getattr(self, "unresolved_reports_", 0) + 1
        if self.unresolved_reports_ < 2:
            return
        decoders = _pair_decoders(net.module_)
        if decoders and all(d.table_dtype == torch.float64 for d in decoders):
            raise RuntimeError(
                f"Epoch {row.get('epoch', '?')}: the pair decoder left pairs unresolved at "
                "two reports in a row even with float64 factor tables: the attention's "
                "logits have grown hundreds of nats apart (attention-entropy collapse). "
                "Lower the learning rate, or resume from an earlier state checkpoint."
            )
        for decoder in decoders:
            decoder.table_dtype = torch.float64
        self.unresolved_reports_ = 0
        logger.warning(
            "Epoch %s: pairs went unresolved at two reports in a row; the pair decoder "
            "computes its factor tables in float64 for the rest of this run.",
            row.get("epoch", "?"),
        )

    def on_epoch_end(self, net, **kwargs):
        if getattr(net, "valid_split_", None) and "valid_batch_count" in net.history[-1]:
            net.history.record("valid_split", net.valid_split_)  # recordings, groups, windows


def _pair_decoders(module):
    """The cross-attention pair decoders of ``module`` (PARS's; none in MAE, MP3,
    DropPos)."""
    from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder

    return [m for m in module.modules() if isinstance(m, CrossAttentionPairDecoder)]


def _pair_tables(net):
    """The state of the float64 escalation of ``net``'s run, as its saved state keeps
    it: ``{"pair_tables": "float32" | "float64", "unresolved_reports": n}``; empty for a
    model without a pair decoder."""
    decoders = _pair_decoders(net.pretext_)
    if not decoders:
        return {}
    wide = all(d.table_dtype == torch.float64 for d in decoders)
    skill = dict(getattr(net, "callbacks_", []) or []).get("pretext_skill")
    return {
        "pair_tables": "float64" if wide else "float32",
        "unresolved_reports": int(getattr(skill, "unresolved_reports_", 0) or 0),
    }


def _restore_pair_tables(net, saved):
    """Put back the float64 escalation that ``saved`` (a state's pointer) records: the
    pair decoders of ``net`` compute their tables in float64 again, and its
    :class:`PretextSkill` counts on from the reports in a row saved."""
    decoders = _pair_decoders(net.pretext_)
    if not decoders or "pair_tables" not in saved:
        return
    if saved["pair_tables"] == "float64":
        for decoder in decoders:
            decoder.table_dtype = torch.float64
        logger.info(
            "The saved run had moved its pair decoder to float64 factor tables "
            "(pairs unresolved at two reports in a row): it goes on in float64."
        )
    skill = dict(getattr(net, "callbacks_", []) or []).get("pretext_skill")
    if skill is not None:
        skill.unresolved_reports_ = int(saved.get("unresolved_reports", 0))


#: The output entry that counts the pairs a pair decoder could not compute exactly.
_UNRESOLVED = "unresolved_pairs"

#: The output entry of the pair decoder's largest logit gap, in nats (a health figure:
#: float32 factor tables underflow from about 43.7).
_GAP = "pair_gap"


class EpochProgress(Callback):
    """The progress of a run over its epochs: epoch k of N, loss, skill, time.

    On a terminal (or in a notebook), one ``tqdm`` bar whose postfix holds the last
    reported epoch's training and validation pretext skill and whose estimate of the
    time left is tqdm's, from the epochs done in this sitting; a resumed run starts at
    the epochs already done. Runs with long epochs (``batch_bar_from`` batches or more)
    also get skorch's bar over the batches of each epoch (without the batch loss, which
    is read on the report cadence, not at every step). While the bars show, the console
    handlers of the package's loggers and of the root logger write through
    ``tqdm.write``, so a log line is never glued to a bar.

    Elsewhere (the stream redirected to a file, a pipe), no bar: one plain line per
    epoch, ``<desc>: epoch k/N | train loss L, skill S | valid loss L, skill S | T s``
    (the valid part with validation only) and the time this sitting expects to be
    left.

    Parameters
    ----------
    desc : str
        The bar's label, and the start of every plain line.
    batch_bar_from : int
        Batches per epoch from which a second bar shows the batches of each epoch.
    stream : file-like | None
        Where to write; None: ``sys.stderr`` at the start of training (so the progress
        shows without any logging set up).
    """

    def __init__(self, desc="pretraining", batch_bar_from=50, stream=None):
        self.desc = desc
        self.batch_bar_from = batch_bar_from
        self.stream = stream

    def initialize(self):
        self.close()
        return self

    def on_train_begin(self, net, X=None, **kwargs):
        self.close()  # what an earlier fit that ended by an error left open
        self.redirect_ = contextlib.ExitStack()
        self.stream_ = sys.stderr if self.stream is None else self.stream
        self.plain_ = not shows_bars(self.stream_)
        self.sitting_ = (len(net.history), time.monotonic())  # epochs done before, start
        if self.plain_:
            return
        from tqdm.auto import tqdm

        done = len(net.history)  # the epochs of a resumed run already in the history
        self.bar_ = tqdm(
            total=net.max_epochs, initial=done, desc=self.desc, unit="epoch", file=self.stream_
        )
        # no loss beside the batches: reading it would make every step wait for the device
        self.batches_ = ProgressBar(postfix_keys=[]).initialize()
        self.redirect_.enter_context(logs_above_bars(tqdm))

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        self.epoch_start_ = time.monotonic()
        if self.plain_ or dataset_train is None or not self._long_epochs(net, dataset_train):
            return
        self.batches_.on_epoch_begin(net, dataset_train=dataset_train, **kwargs)

    def on_batch_end(self, net, **kwargs):
        if getattr(self.batches_, "pbar_", None) is not None:
            self.batches_.on_batch_end(net, **kwargs)

    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        if self.plain_:
            if not getattr(net, "reports_epoch_", True):
                return  # one line per report (see PretrainNet's eval_every_steps)
            self.stream_.write(self._line(net, row) + "\n")
            self.stream_.flush()
            return
        if getattr(self.batches_, "pbar_", None) is not None:
            self.batches_.pbar_.close()
            self.batches_.pbar_ = None
        postfix = {k: f"{row[k]:.3f}" for k in ("train_skill", "valid_skill") if k in row}
        if postfix:  # a reported epoch (the net reads its log on the report cadence)
            self.bar_.set_postfix(postfix, refresh=False)
        self.bar_.update(1)

    def on_train_end(self, net, **kwargs):
        self.close()

    def close(self):
        """Close the bars and give the console log handlers back (idempotent)."""
        if getattr(getattr(self, "batches_", None), "pbar_", None) is not None:
            self.batches_.pbar_.close()
        if getattr(self, "bar_", None) is not None:
            self.bar_.close()
        if getattr(self, "redirect_", None) is not None:
            self.redirect_.close()
        self.bar_ = self.batches_ = self.redirect_ = None

    def _line(self, net, row):
        """The plain line of the epoch just ended."""
        epoch = len(net.history)
        parts = [f"{self.desc}: epoch {epoch}/{net.max_epochs}"]
        for prefix in ("train", "valid"):
            loss, skill = row.get(f"{prefix}_loss"), row.get(f"{prefix}_skill")
            if loss is None:
                continue
            text = f"{prefix} loss {loss:.4f}"
            parts.append(text if skill is None else f"{text}, skill {skill:.3f}")
        now = time.monotonic()
        seconds = f"{now - self.epoch_start_:.1f} s"
        done_before, start = self.sitting_
        left = net.max_epochs - epoch
        if left > 0 and epoch > done_before:
            per_epoch = (now - start) / (epoch - done_before)
            seconds += f" (about {duration(per_epoch * left)} left)"
        parts.append(seconds)
        return " | ".join(parts)

    def _long_epochs(self, net, dataset):
        world = distributed.world_size() if getattr(net, "distributed_", False) else 1
        return _batches_per_epoch(len(dataset), net.batch_size, world) >= self.batch_bar_from


def _reports_epoch(epoch, max_epochs, steps_per_epoch, every_steps):
    """Whether epoch ``epoch`` (1-based) of ``max_epochs`` is validated and reported:
    the first, the last, and every ``ceil(every_steps / steps_per_epoch)``-th.

    A function of the epoch's number only, so a resumed run reports the epochs the
    uninterrupted run would have.
    """
    every = max(1, math.ceil(every_steps / max(1, steps_per_epoch)))
    return epoch <= 1 or epoch >= max_epochs or epoch % every == 0


class _EpochTable(PrintLog):
    """skorch's epoch table, one row per reported epoch (the net's ``reports_epoch_``),
    without colour codes unless stderr is a terminal (a log file gets plain text)."""

    def on_epoch_end(self, net, **kwargs):
        if getattr(net, "reports_epoch_", True):
            super().on_epoch_end(net, **kwargs)

    def _sink(self, text, verbose):
        if not shows_bars(sys.stderr):
            text = ANSI.sub("", text)
        super()._sink(text, verbose)


class _SamplerEpoch(Callback):
    """Give the distributed sampler the epoch number, so that every epoch reshuffles."""

    def on_epoch_begin(self, net, **kwargs):
        sampler = getattr(net, "train_sampler_", None)
        if sampler is not None:
            sampler.set_epoch(len(net.history))

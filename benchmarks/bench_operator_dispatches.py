"""The pair operator's dispatches per training step: the aten calls of its eager body.

:func:`braindecode_pars.models.pair.tables.pair_attention` is a ``torch.library``
operator, opaque to ``torch.compile``: inside a compiled step its body still runs
eagerly, and each aten call it makes is dispatched from Python, one kernel launch for
most of them on a GPU. This script counts them with a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` over one training step
(forward and backward, no optimiser step) of PARS on the CPU, in three kinds:

- **launching**: the calls that run a kernel on a GPU (products, elementwise, reductions,
  copies, fills, index operations);
- **views and metadata**: views by their schema (``view``, ``transpose``, ``slice``,
  ``select``, ``expand``, ``detach``...) and the few metadata-only calls
  (:data:`METADATA`);
- **allocations**: ``empty`` and its kin (:data:`ALLOCATIONS`), memory from the caching
  allocator without a kernel.

Each is counted inside the operator's forward and backward bodies, for the operator's
ways of running: the path an accelerator takes (forced on this CPU) with the tables kept
for the backward pass (the default byte budget) or recomputed there (a budget of 0, the
only way before the budget), with the fallback's torch kernels or its Triton kernels
(which cannot run on a CPU without Triton's interpreter: they are replaced by a stub
counted as one launch each way, what they launch on a GPU; no pair-head underflows at
this initialisation, so the stub changes no value); the CPU's own path; and the fused
operator (:mod:`braindecode_pars.models.pair.fused`, ``PARS(decoder_kernel="fused")``),
whose two kernels run for real under Triton's interpreter in a child process
(``TRITON_INTERPRET=1``), each launch counted as one call and the interpreter's own work
not counted, in a step after a first one (its constants are made once). The whole step's
calls, with the operator as one call each way, are given beside them.

The issue's target (issue 70): at most 10 launching calls a step, forward and backward,
after fusing the operator into one Triton kernel each way.

Usage::

    python -m benchmarks.bench_operator_dispatches --out benchmarks/results/operator_dispatches.md
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode,
)

from benchmarks.lib.measure import command_line, machine, report_parser, table_head, write_report
from benchmarks.lib.steps import SMALL_BATCH, SMALL_N_TIMES, SMALL_SFREQ, model_and_batch
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.models.pair import fused, triton_fallback
from braindecode_pars.models.pair import kernels as pair_kernels
from braindecode_pars.models.pair import tables as pair_attention

#: The kinds of a dispatch, in the report's order.
KINDS = ("launching", "view/metadata", "allocation")

#: aten operators that allocate without running a kernel.
ALLOCATIONS = frozenset(
    {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_"}
)

#: aten operators that change only metadata but are not views by their schema.
METADATA = frozenset(
    {"_unsafe_view", "_reshape_alias", "lift_fresh", "set_", "sym_size", "sym_stride"}
)

#: The ways of running the operator: label -> (accelerator's path, byte budget of the
#: tables kept for backward (None: the default), fallback kernels).
WAYS = {
    "accelerator, tables kept, torch fallback": (True, None, "torch"),
    "accelerator, tables recomputed, torch fallback": (True, 0, "torch"),
    "accelerator, tables kept, Triton fallback": (True, None, "triton"),
    "CPU path, torch fallback": (False, None, "torch"),
}

#: The fused operator's way, counted in a child process under Triton's interpreter.
FUSED = "fused: one Triton kernel each way"


def kind(func):
    """The kind of the aten call ``func`` (an ``OpOverload``): one of :data:`KINDS`."""
    name = func.overloadpacket.__name__
    if func.namespace == "profiler":  # a profiler's range: no kernel
        return "view/metadata"
    if name in ALLOCATIONS:
        return "allocation"
    returns = func._schema.returns
    viewed = any(r.alias_info is not None and not r.alias_info.is_write for r in returns)
    return "view/metadata" if viewed or name in METADATA else "launching"


class DispatchCounter(TorchDispatchMode):
    """Count the aten calls dispatched inside the block, by kind and by name.

    ``calls``: a :class:`collections.Counter` of ``(kind, name)``; :meth:`by_kind`
    sums it by kind. :meth:`record` adds a call that no aten operator makes (a Triton
    kernel's launch) to the counter active now.
    """

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[(kind(func), str(func))] += 1
        return func(*args, **(kwargs or {}))

    def by_kind(self):
        """Calls per kind, every kind of :data:`KINDS` present."""
        totals = dict.fromkeys(KINDS, 0)
        for (k, _), count in self.calls.items():
            totals[k] += count
        return totals

    @staticmethod
    def record(name, what="launching"):
        """Count one call ``name`` of kind ``what`` in the innermost active counter."""
        mode = _get_current_dispatch_mode()
        if isinstance(mode, DispatchCounter):
            mode.calls[(what, name)] += 1

    def to_json(self):
        return [[k, name, count] for (k, name), count in sorted(self.calls.items())]

    @classmethod
    def from_json(cls, rows):
        counter = cls()
        counter.calls.update({(k, name): count for k, name, count in rows})
        return counter


@contextlib.contextmanager
def _patched(module, **values):
    before = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(module, name, value)


def _counted(counters, which, body):
    """``body`` with each call's dispatches counted in a new :class:`DispatchCounter`,
    appended to ``counters[which]``."""

    def run(*args):
        with DispatchCounter() as counter:
            out = body(*args)
        counters[which].append(counter)
        return out

    return run


@contextlib.contextmanager
def counting_operator(accelerator, fallback):
    """Count the operator's forward and backward bodies: yields a dict of lists of
    :class:`DispatchCounter`, one per call; ``accelerator``: take the accelerator's
    path; ``fallback``: "torch", or "triton" with its kernels stubbed (one launch)."""
    counters = {"forward": [], "backward": []}
    counted = functools.partial(_counted, counters)  # (which, body): counted body

    def forward_stub(theta, *args):
        DispatchCounter.record("triton: _forward_kernel")
        return theta

    def backward_stub(*args):
        DispatchCounter.record("triton: _backward_kernel")

    triton = fallback == "triton"
    choice = dict(use_triton=lambda x, fallback="auto": True) if triton else {}
    kernels = dict(forward_=forward_stub, backward_=backward_stub) if triton else {}
    with (
        pair_attention.accelerator_layout(bool(accelerator)),
        pair_attention.observed(counted),
        _patched(pair_kernels, **choice),
        _patched(triton_fallback, **kernels),
    ):
        yield counters


@contextlib.contextmanager
def counting_fused():
    """Count the fused operator's forward and backward bodies (a dict of lists of
    :class:`DispatchCounter`, one per call): each kernel launch as one call, the
    interpreter's work inside it not counted."""
    counters = {"forward": [], "backward": []}

    def observe(which, body):
        if which in counters:
            return _counted(counters, which, body)
        kernel = "_forward_kernel" if which == "forward launch" else "_backward_kernel"

        def launching(grid, *args, **kwargs):
            DispatchCounter.record(f"triton: fused {kernel}")
            with _disable_current_modes():
                body(grid, *args, **kwargs)

        return launching

    with fused.observed(observe):
        yield counters


def count_step(size, n_patches, batch_size, decoder_heads, accelerator, keep_bytes, fallback):
    """One training step's dispatches: ``{"operator": {"forward": ..., "backward": ...},
    "step": {...}}``, each a :class:`DispatchCounter` (the operator's summed over its
    calls in the step, one each way)."""
    torch.manual_seed(0)
    model, X, _, _ = model_and_batch(
        batch_size,
        SMALL_N_TIMES,
        SMALL_SFREQ,
        n_patches=n_patches,
        decoder_heads=decoder_heads,
        decoder_keep_tables_bytes=keep_bytes,
        decoder_fallback="auto" if fallback == "fused" else fallback,
        decoder_kernel="fused" if fallback == "fused" else "tables",
        **size,
    )
    draws = model.draw(batch_size, generator=torch.Generator().manual_seed(0))
    if fallback == "fused":  # a step's calls once warm: the kernels' constants made once
        model(X, draws=draws)["loss"].backward()
        model.zero_grad(set_to_none=True)
    counting = counting_fused() if fallback == "fused" else counting_operator(accelerator, fallback)
    with counting as inside:
        with DispatchCounter() as step_forward:
            loss = model(X, draws=draws)["loss"]
        with DispatchCounter() as step_backward:
            loss.backward()
    operator = {}
    for which, counters in inside.items():
        assert len(counters) == 1, f"{len(counters)} {which} calls of the operator in a step"
        operator[which] = counters[0]
    return {"operator": operator, "step": {"forward": step_forward, "backward": step_backward}}


def count_operator(batch_size, heads, n, n_patches, head_dim, accelerator, keep_bytes, fallback):
    """The operator alone, forward and backward on random inputs of these shapes:
    ``{"forward": DispatchCounter, "backward": DispatchCounter}``. Its calls depend on
    the shapes through the number of chunks only (on the accelerator's path, a function
    of ``n``, ``n_patches`` and ``head_dim``; on a CPU's, of the batch too)."""
    torch.manual_seed(0)
    q = torch.randn(batch_size, heads, 2 * n, head_dim, requires_grad=True)
    k = torch.randn(batch_size, heads, n_patches, head_dim, requires_grad=True)
    s = torch.randn(batch_size, heads, n_patches, requires_grad=True)
    if fallback == "fused":
        q5 = q.view(batch_size, heads, 2, n, head_dim)
        with torch.no_grad():  # the kernels' constants made once, before the count
            fused.pair_attention_fused(q5, k, s, head_dim**-0.5, False)
        with counting_fused() as inside:
            fused.pair_attention_fused(q5, k, s, head_dim**-0.5, False)[0].sum().backward()
        return {which: counters[0] for which, counters in inside.items()}
    with counting_operator(accelerator, fallback) as inside:
        theta = pair_attention.pair_attention(q, k, s, n, head_dim**-0.5, keep_bytes, fallback)[0]
        theta.sum().backward()
    return {which: counters[0] for which, counters in inside.items()}


def _cells(operator):
    cells = []
    for which in ("forward", "backward"):
        totals = operator[which].by_kind()
        cells += [str(totals[k]) for k in KINDS]
    launching = sum(operator[w].by_kind()["launching"] for w in ("forward", "backward"))
    return [*cells, f"**{launching}**"]


def _row(label, counts):
    step = sum(counts["step"][w].by_kind()["launching"] for w in ("forward", "backward"))
    return "| " + " | ".join([label, *_cells(counts["operator"]), str(step)]) + " |"


def _top(counter, limit=None):
    """The launching calls of ``counter``, most frequent first: ``name xcount``."""
    launching = [(n, c) for (k, n), c in counter.calls.items() if k == "launching"]
    launching.sort(key=lambda item: (-item[1], item[0]))
    return ", ".join(f"`{n.removeprefix('aten.')}` x{c}" for n, c in launching[:limit])


def main(argv=None):
    """Count, write the report; returns ``{"step": {label: count_step(...)}, "operator":
    {label: count_operator(...)}}``, the labels of :data:`WAYS`."""
    parser = report_parser(__doc__)
    parser.add_argument("--size", default="small", choices=sorted(ENCODER_SIZES))
    parser.add_argument("--emb-dim", type=int, help="over --size: the token size")
    parser.add_argument("--depth", type=int, help="over --size: the encoder's layers")
    parser.add_argument("--heads", type=int, help="over --size: the encoder's heads")
    parser.add_argument("--decoder-heads", type=int, default=8)
    parser.add_argument("--n-patches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=SMALL_BATCH)
    parser.add_argument(
        "--paper-head-dim",
        type=int,
        default=64,
        help="the head size of the operator-alone table (the paper's: 512 / 8)",
    )
    parser.add_argument(
        "--fused-json",
        type=Path,
        help="(internal) count the fused way only, into this file: the child process "
        "that runs under Triton's interpreter",
    )
    args = parser.parse_args(argv)
    size = dict(ENCODER_SIZES[args.size])
    for key, value in (("emb_dim", args.emb_dim), ("depth", args.depth), ("n_heads", args.heads)):
        if value is not None:
            size[key] = value
    if args.emb_dim is not None:
        size["ff_dim"] = 2 * args.emb_dim
    n_masked = round(0.8 * args.n_patches)
    if args.fused_json is not None:
        step = count_step(size, args.n_patches, args.batch_size, args.decoder_heads, True,
                          None, "fused")  # fmt: skip
        alone = count_operator(args.batch_size, args.decoder_heads, n_masked, args.n_patches,
                               args.paper_head_dim, True, None, "fused")  # fmt: skip
        payload = {
            "step": {part: {w: c.to_json() for w, c in step[part].items()} for part in step},
            "operator": {w: c.to_json() for w, c in alone.items()},
        }
        args.fused_json.write_text(json.dumps(payload))
        return payload
    rows = {
        label: count_step(
            size, args.n_patches, args.batch_size, args.decoder_heads, *way
        )
        for label, way in WAYS.items()
    }  # fmt: skip
    chunks_step = _chunks(
        args.batch_size, n_masked, args.n_patches, size["emb_dim"] // args.decoder_heads
    )
    chunks_alone = _chunks(args.batch_size, n_masked, args.n_patches, args.paper_head_dim)
    alone = {
        label: count_operator(
            args.batch_size, args.decoder_heads, n_masked, args.n_patches, args.paper_head_dim,
            *way,
        )
        for label, way in WAYS.items()
    }  # fmt: skip
    fused_counts = count_fused_in_a_child(argv, args.out)
    if fused_counts is not None:
        rows[FUSED], alone[FUSED] = fused_counts
    # the tables (2n x N), den and ratios (n x n) of every window and head, float32
    kept_bytes = (
        args.batch_size * args.decoder_heads * 2 * n_masked * (args.n_patches + n_masked) * 4
    )
    head = table_head(
        "operator's way", *(f"{w} {k}" for w in ("forward", "backward") for k in KINDS),
        "launching, forward + backward", "whole step's launching (operator as 1 each way)",
    )  # fmt: skip
    first = rows[next(iter(WAYS))]["operator"]
    recomputed = rows["accelerator, tables recomputed, torch fallback"]["operator"]
    lines = [
        "# The pair operator's dispatches per training step",
        "",
        f"- Machine: {machine()}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d} UTC",
        f"- Command: `{command_line(__spec__.name, argv)}`",
        f"- Step: PARS, encoder {size['emb_dim']} x {size['depth']} ({size['n_heads']} "
        f"heads), {args.decoder_heads} decoder heads, {args.n_patches} patches "
        f"({n_masked} position-masked), batch {args.batch_size}, float32, eager on the "
        "CPU; forward and `loss.backward()`, no optimiser step. The accelerator's path "
        f"takes the batch in {chunks_step} chunks (head size "
        f"{size['emb_dim'] // args.decoder_heads}); most of the operator's calls are per chunk.",
        "- Counted: every aten call the operator's forward and backward bodies dispatch "
        "(a `TorchDispatchMode`), by kind: **launching** (a kernel on a GPU), "
        "views/metadata, allocations (`empty` and kin). The Triton fallback's kernels are "
        "stubbed and counted as one launch each way. The fused operator's two kernels "
        '(`PARS(decoder_kernel="fused")`) run for real under Triton\'s interpreter in a '
        "child process, each launch counted as one call; it takes its inputs in the "
        "projections' layout and dtype, so the step around it makes fewer copies too.",
        f"- Tables kept (accelerator): {kept_bytes / 2**20:.2f} MiB at this size, under the "
        f"default budget of {pair_attention.KEEP_TABLES_BYTES / 2**20:.0f} MiB.",
        "- Target (issue 70): at most 10 launching calls a step, forward and backward, "
        "after fusing the operator.",
        "",
        *head,
        *(_row(label, counts) for label, counts in rows.items()),
        "",
        *_verdict(rows),
        "Launching calls of the operator, accelerator's path, tables kept, torch fallback:",
        "",
        f"- forward: {_top(first['forward'])}",
        f"- backward: {_top(first['backward'])}",
        "",
        "With the tables recomputed in backward (the accelerator's only way before the "
        "byte budget):",
        "",
        f"- backward: {_top(recomputed['backward'])}",
        "",
        f"## The operator alone at a head size of {args.paper_head_dim}",
        "",
        f"The same operator on random inputs of {args.decoder_heads} heads of "
        f"{args.paper_head_dim} ({args.decoder_heads * args.paper_head_dim}-wide tokens, the "
        f"paper's at 64), {args.n_patches} patches, {n_masked} position-masked, batch "
        f"{args.batch_size}. On the accelerator's path the calls depend on the shapes "
        "through the number of chunks only, which falls as the head size grows "
        f"({chunks_alone} here, {chunks_step} in the step above), and not with the batch.",
        "",
        *table_head(*head[0].strip("| ").split(" | ")[:-1]),
        *("| " + " | ".join([label, *_cells(counts)]) + " |" for label, counts in alone.items()),
    ]
    write_report(lines, args.out)
    return {"step": rows, "operator": alone}


def _verdict(rows):
    """The target's line: the fused way's launching calls against 10, and what they are."""
    if FUSED not in rows:
        return ["The fused way was not counted: this torch has no Triton.", ""]
    operator = rows[FUSED]["operator"]
    total = sum(operator[w].by_kind()["launching"] for w in ("forward", "backward"))
    met = "met" if total <= 10 else "not met"
    return [
        f"The fused operator: **{total}** launching calls a step, forward and backward "
        f"(target at most 10: {met}); forward: {_top(operator['forward'])}; backward: "
        f"{_top(operator['backward'])}.",
        "",
    ]


def count_fused_in_a_child(argv, out):
    """The fused way's ``(step, operator)`` counts (as :func:`count_step` and
    :func:`count_operator` give them), from this script rerun under Triton's
    interpreter with ``--fused-json``; None without Triton."""
    if fused.triton is None:
        return None
    path = Path(str(out) + ".fused.json")
    argv = [a for a in (sys.argv[1:] if argv is None else argv)]
    env = dict(os.environ, TRITON_INTERPRET="1")
    command = [sys.executable, "-m", __spec__.name, *argv, "--fused-json", str(path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"the fused way's count failed:\n{done.stderr[-3000:]}")
    payload = json.loads(path.read_text())
    path.unlink()

    def counters(part):
        return {w: DispatchCounter.from_json(rows) for w, rows in part.items()}

    step = {part: counters(payload["step"][part]) for part in ("operator", "step")}
    return step, counters(payload["operator"])


def _chunks(batch_size, n, n_patches, head_dim):
    """Chunks of the accelerator's path (``pair_attention.chunk_size``'s rule)."""
    q = torch.empty(batch_size, 1, 2 * n, head_dim, device="meta")
    k = torch.empty(batch_size, 1, n_patches, head_dim, device="meta")
    chunk = pair_attention.chunk_size(q, k)
    return -(-batch_size // chunk)


if __name__ == "__main__":
    main()

"""Cost of the PARS pair decoder beside the encoder, on this machine.

Measures, at the paper's defaults (emb_dim 512, depth 8, 8 heads, ff 512, 1-s patches
of 30-s windows at 200 Hz, pos_mask_ratio 0.8, batch 16):

1. the time of one training step (forward, backward, AdamW step) of PARS with the
   folded decoder and with the naive, materialising one, against the step of the
   encoder alone on the same patches (its loss a plain mean of squares);
2. the peak resident memory of one training step at n_patches 40, 80 and 128, each
   configuration in a fresh process.

Usage::

    python benchmarks/bench_pair_decoder.py --out benchmarks/results/pair_decoder.md
"""

from __future__ import annotations

import argparse
import json

import torch
from _measure import in_child, machine, median_times, peak_growth, write_report

from braindecode_pars import PARS

N_TIMES, SFREQ = 6000, 200.0  # 30-s windows at 200 Hz (paper section 2.5)


def make_steps(n_patches, decoder, impl, batch_size):
    model = PARS(
        n_times=N_TIMES, sfreq=SFREQ, n_patches=n_patches, decoder=decoder, decoder_impl=impl
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    X = torch.randn(batch_size, 1, N_TIMES)
    starts = model.sample_patches(batch_size, "cpu")
    pos_mask, _ = model.mask_positions(batch_size, "cpu")

    def pars_step():
        opt.zero_grad(set_to_none=True)
        model(X)["loss"].backward()
        opt.step()

    def encoder_step():
        opt.zero_grad(set_to_none=True)
        model.encoder(X, starts=starts, pos_mask=pos_mask).pow(2).mean().backward()
        opt.step()

    return pars_step, encoder_step


def memory_child(n_patches, impl, what, batch_size):
    """Run in a fresh process: growth of the peak resident memory over one step, in MiB."""
    pars_step, encoder_step = make_steps(n_patches, "cross_attention", impl, batch_size)
    peak, elapsed = peak_growth(pars_step if what == "pars" else encoder_step)
    print(json.dumps({"peak_mib": peak, "step_s": elapsed}))


def measure_memory(n_patches, impl, what, batch_size):
    return in_child(__file__, n_patches, impl, what, batch_size)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the Markdown table here (default: stdout only)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n_patches, impl, what, batch_size = args.child
        memory_child(int(n_patches), impl, what, int(batch_size))
        return

    torch.manual_seed(0)
    B = args.batch_size
    lines = [
        "# Pair decoder benchmark",
        "",
        f"Machine: {machine()}. Paper defaults: emb_dim 512, depth 8, 30-s windows at 200 Hz, "
        f"pos_mask_ratio 0.8, batch {B}. Median of {args.repeats} steps.",
        "",
        "Command: `python benchmarks/bench_pair_decoder.py --out "
        "benchmarks/results/pair_decoder.md`",
        "",
        "## Training step time, n_patches = 40",
        "",
        "| decoder | implementation | PARS step (s) | encoder-alone step (s) | ratio |",
        "|---|---|---|---|---|",
    ]
    for decoder in ("cross_attention", "mlp"):
        for impl in ("folded", "naive"):
            pars_step, encoder_step = make_steps(40, decoder, impl, B)
            t_pars, t_enc = median_times([pars_step, encoder_step], args.repeats)
            lines.append(
                f"| {decoder} | {impl} | {t_pars:.3f} | {t_enc:.3f} | {t_pars / t_enc:.2f} |"
            )
            print(lines[-1], flush=True)
    lines += [
        "",
        "## Peak memory of one training step (cross-attention decoder)",
        "",
        "Growth of the process's peak resident memory (VmHWM, reset before the step) over "
        "the first training step, which also allocates the gradients and AdamW's state "
        "(about 200 MiB at this size); each configuration in a fresh process. Step times "
        "here are first steps.",
        "",
        "| n_patches | masked pairs per window | encoder alone (MiB) | folded (MiB) | "
        "naive (MiB) | folded step (s) | naive step (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_patches in (40, 80, 128):
        enc = measure_memory(n_patches, "folded", "encoder", B)
        fol = measure_memory(n_patches, "folded", "pars", B)
        nai = measure_memory(n_patches, "naive", "pars", B)
        n_m = round(0.8 * n_patches)
        lines.append(
            f"| {n_patches} | {n_m * n_m} | {enc['peak_mib']:.0f} | {fol['peak_mib']:.0f} | "
            f"{nai['peak_mib']:.0f} | {fol['step_s']:.2f} | {nai['step_s']:.2f} |"
        )
        print(lines[-1], flush=True)
    write_report(lines, args.out)


if __name__ == "__main__":
    main()

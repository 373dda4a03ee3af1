"""Pretraining throughput and memory of every pretext task at the paper's size.

Training steps (forward, backward, AdamW) on 30-s single-channel windows at 200 Hz,
encoder at the paper's size (emb_dim 512, depth 8, 8 heads, ff 512): windows per
second and the growth of peak resident memory over the first step, for PARS, MAE,
MP3 and DropPos, and for PARS at n_patches 20, 40, 80 and 128.

Usage::

    python -m benchmarks.bench_pretraining --out benchmarks/results/pretraining.md
    python -m benchmarks.bench_pretraining --device cuda --batch-size 256 --out ...
"""

from __future__ import annotations

import argparse
import json

import torch

from benchmarks.lib.measure import in_child, machine, median_times, peak_growth, write_report
from braindecode_pars.models.pretext import PRETEXT_MODELS

N_TIMES, SFREQ = 6000, 200.0


def make_step(method, n_patches, batch_size, device, amp):
    kwargs = {"n_patches": n_patches} if method == "pars" else {}
    model = PRETEXT_MODELS[method](n_times=N_TIMES, sfreq=SFREQ, **kwargs).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
    X = torch.randn(batch_size, 1, N_TIMES, device=device)
    dtype = torch.bfloat16 if amp else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=torch.device(device).type, dtype=dtype, enabled=amp):
            loss = model(X)["loss"]
        loss.backward()
        opt.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return step


def child(method, n_patches, batch_size, device, amp):
    step = make_step(method, int(n_patches), int(batch_size), device, amp == "1")
    peak, _ = peak_growth(step)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        step()
        peak = torch.cuda.max_memory_allocated() / 2**20
    (t,) = median_times([step], repeats=5, warmup=1)
    print(json.dumps({"peak_mib": peak, "windows_per_s": int(batch_size) / t, "step_s": t}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    B, dev, amp = args.batch_size, args.device, "1" if args.amp else "0"
    mem = "peak GPU memory allocated" if dev.startswith("cuda") else "peak RSS growth"
    lines = [
        "# Pretraining throughput",
        "",
        f"Machine: {machine()}; device {dev}{', bf16 autocast' if args.amp else ''}. "
        f"30-s windows at 200 Hz, paper-size encoder, batch {B}, median of 5 steps "
        f"after one warm-up; memory: {mem} over one step (fresh process each).",
        "",
        f"Command: `python -m benchmarks.bench_pretraining --batch-size {B} --device {dev}"
        f"{' --amp' if args.amp else ''} --out <file>`",
        "",
        "| pretext task | n_patches | windows/s | step (s) | memory (MiB) |",
        "|---|---|---|---|---|",
    ]
    configs = [("pars", 40), ("mae", 30), ("mp3", 30), ("droppos", 30)]
    configs += [("pars", n) for n in (20, 80, 128)]
    for method, n in configs:
        r = in_child(__spec__.name, method, n, B, dev, amp)
        lines.append(
            f"| {method} | {n} | {r['windows_per_s']:.1f} | {r['step_s']:.3f} | "
            f"{r['peak_mib']:.0f} |"
        )
        print(lines[-1], flush=True)
    lines += ["", "MAE, MP3 and DropPos use the 30 non-overlapping 1-s patches of a window."]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()

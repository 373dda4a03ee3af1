"""The GPU check of issue 56 in one call: the pair decoder A/B, the loops, the CUDA tests.

``benchmarks/device_check.sh`` installs the wheels of ``.device-wheels/`` (``make
device-wheels``) and runs this script, which runs, each in its own process under its own
time limit and all within ``--budget`` seconds:

1. ``bench_gpu.py`` for this tree's pair decoder, then for db22036's
   (``--decoder db22036``, written by ``make device-wheels`` from git): the training
   step at batch 256 and 1024 under bf16 autocast and bf16 + ``torch.compile``, against
   the encoder alone, and the peak memory of one step at 40, 80, 128 and 256 patches,
   batch 1024;
2. ``bench_pretrain_loop.py --size paper --rounds 1 --steps 1000``: ``PARSPretrainer.fit``
   and ``braindecode-pars pretrain`` against the bare step (batch 256, bf16 + compile);
3. the CUDA tests (:data:`CUDA_TESTS`), among them the training steps under
   ``torch.cuda.set_sync_debug_mode("error")`` and with CUDA graphs.

It writes one Markdown file: the card (``torch.cuda.get_device_name``), what each part
returned, the issue's targets checked against the numbers (:func:`checks`), then each
part's own report. The compiled steps of the second and later processes may reuse the
first's compiled kernels from torch's on-disk cache (``--compile-caches``), so their first
steps say nothing of compilation time.

``--tiny`` is the dry run on a CPU: the same parts at the benchmarks' tiny sizes
(``--device cpu``, the aot_eager backend, 20 loop steps), in a minute or two; the CUDA
tests skip.

Usage::

    bash benchmarks/device_check.sh       # on the GPU machine: writes $OUT/device_check.md
    python benchmarks/device_check.py --tiny --out /tmp/device_check.md   # a CPU dry run
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"

#: The CUDA tests: files, and the ``-k`` expression that picks their CUDA tests (they
#: skip, with a reason, without a GPU).
CUDA_TESTS = (
    [
        "tests/test_training_steps.py",
        "tests/test_pretrainer.py",
        "tests/test_distributed.py",
        "tests/test_pair_decoders.py",
    ],
    "cuda or gpu",
)

#: Each part's time limit in seconds on a GPU (the budget left caps it).
LIMITS = {"bench_tree": 150, "bench_db22036": 150, "loop": 170, "tests": 150}

#: The issue's targets (issue 56, "Done when").
TARGETS = dict(
    speed_vs_db22036=1.0,  # PARS at least as fast as db22036, each batch and precision
    pars_over_encoder=1.15,  # batch 1024, bf16 + compile
    peak_over_encoder=1.5,  # peak step memory at 128 patches, batch 1024
    loop_over_step=0.9,  # estimator and command line, paper size, batch 256
    moonshot_wps=50_000,  # compiled, batch 1024, on an H200
)


def bench_gpu_argv(decoder, tiny, json_path, out_path):
    """The command line of ``bench_gpu.py`` for one side of the A/B."""
    argv = [sys.executable, str(BENCH / "bench_gpu.py"), "--decoder", decoder,
            "--variants", "bf16", "bf16-compile", "--json", str(json_path),
            "--out", str(out_path)]  # fmt: skip
    if tiny:
        return argv + ["--device", "cpu", "--tiny", "--compile-backend", "aot_eager",
                       "--batch-size", "8", "--memory-batch-size", "8",
                       "--memory-patches", "40", "--repeats", "2"]  # fmt: skip
    return argv + ["--batch-size", "256", "1024", "--memory-batch-size", "1024",
                   "--memory-patches", "40", "80", "128", "256", "--repeats", "11"]  # fmt: skip


def loop_argv(tiny, out_path):
    """The command line of ``bench_pretrain_loop.py``."""
    argv = [sys.executable, str(BENCH / "bench_pretrain_loop.py"), "--rounds", "1",
            "--out", str(out_path)]  # fmt: skip
    if tiny:
        return argv + ["--tiny", "--device", "cpu", "--steps", "20", "--repeats", "3"]
    return argv + ["--size", "paper", "--steps", "1000"]


def tests_argv():
    files, keyword = CUDA_TESTS
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *files,
            "-k", keyword]  # fmt: skip


def run_part(argv, limit, log_path, env=None):
    """Run ``argv`` from the repository's root with its output in ``log_path``, killed
    after ``limit`` seconds: {"rc", "seconds", "timed_out", "command"}."""
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(
                argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=limit, env=env
            ).returncode
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    command = shlex.join(
        "python" if a == sys.executable else a.replace(f"{ROOT}{os.sep}", "") for a in argv
    )
    return dict(rc=rc, seconds=time.monotonic() - t0, timed_out=timed_out, command=command)


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def loop_ratios(text):
    """(estimator/step, command line/step) from ``bench_pretrain_loop.py``'s last line."""
    found = re.search(r"estimator/step ([0-9.]+), command line/step ([0-9.]+)", text or "")
    return (float(found[1]), float(found[2])) if found else None


def test_counts(text):
    """{"passed": n, "failed": n, ...} from pytest's last summary line."""
    lines = [line for line in (text or "").splitlines() if re.search(r" in [0-9.]+s", line)]
    if not lines:
        return {}
    kinds = r"(\d+) (passed|failed|skipped|errors?|deselected)"
    return {k: int(n) for n, k in re.findall(kinds, lines[-1])}


def _verdict(ok):
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def checks(tree, old, loop, tests):
    """The issue's targets against the results: Markdown lines.

    Parameters
    ----------
    tree, old : dict | None
        ``bench_gpu.py --json`` of this tree's decoder and of db22036's.
    loop : tuple | None
        (estimator/step, command line/step).
    tests : dict
        pytest's counts.
    """
    lines = ["| target | measured | met |", "|---|---|---|"]
    tree_steps = (tree or {}).get("steps", {})
    old_steps = (old or {}).get("steps", {})
    for batch in sorted(set(tree_steps) | set(old_steps), key=int):
        for variant in ("bf16 autocast", "bf16 autocast + torch.compile"):
            a = old_steps.get(batch, {}).get(variant, {}).get("pars_wps")
            b = tree_steps.get(batch, {}).get(variant, {}).get("pars_wps")
            ratio = b / a if a and b else None
            said = (f"{b:,.0f} against {a:,.0f} windows/s ({ratio:.2f})" if ratio
                    else "missing")  # fmt: skip
            met = None if ratio is None else ratio >= TARGETS["speed_vs_db22036"]
            lines.append(
                f"| PARS at least as fast as db22036, batch {batch}, {variant} | {said} "
                f"| {_verdict(met)} |"
            )
    big = max(tree_steps, key=int, default=None)
    compiled = tree_steps.get(big, {}).get("bf16 autocast + torch.compile", {}) if big else {}
    ratio = compiled.get("ratio")
    lines.append(
        f"| PARS / encoder step at most {TARGETS['pars_over_encoder']}, batch {big}, bf16 + "
        f"compile | {'missing' if ratio is None else f'{ratio:.2f}'} "
        f"| {_verdict(None if ratio is None else ratio <= TARGETS['pars_over_encoder'])} |"
    )
    memory = (tree or {}).get("memory", {})
    by_patches = {int(k.split("x")[1]): (int(k.split("x")[0]), v) for k, v in memory.items()}
    for n_patches, (batch, row) in sorted(by_patches.items()):
        (enc_growth, enc_peak), (pars_growth, pars_peak) = row["encoder"], row["pars"]
        if pars_growth is None and pars_peak is None:
            said, met = "out of memory", False
        elif pars_peak is None:  # a CPU: growths only
            said, met = f"growth {pars_growth:,.0f} against {enc_growth:,.0f} MiB", None
        else:
            said = (f"peak {pars_peak / 1024:,.1f} against {enc_peak / 1024:,.1f} GiB "
                    f"({pars_peak / enc_peak:.2f})")  # fmt: skip
            met = pars_peak / enc_peak <= TARGETS["peak_over_encoder"] if n_patches == 128 else True
        target = (
            f"peak step memory at most {TARGETS['peak_over_encoder']} x the encoder's"
            if n_patches == 128
            else "trains (the moonshot: the paper's limit pushed out)"
            if n_patches > 128
            else "peak step memory (for the record)"
        )
        lines.append(f"| {target}, {n_patches} patches, batch {batch} | {said} | {_verdict(met)} |")
    wps = compiled.get("pars_wps")
    lines.append(
        f"| moonshot: {TARGETS['moonshot_wps']:,} windows/s compiled at batch {big} (H200) | "
        f"{'missing' if wps is None else f'{wps:,.0f}'} "
        f"| {_verdict(None if wps is None else wps >= TARGETS['moonshot_wps'])} |"
    )
    for i, what in enumerate(("`PARSPretrainer.fit`", "`braindecode-pars pretrain`")):
        value = None if loop is None else loop[i]
        lines.append(
            f"| {what} at least {TARGETS['loop_over_step']} of the bare step | "
            f"{'missing' if value is None else f'{value:.2f}'} "
            f"| {_verdict(None if value is None else value >= TARGETS['loop_over_step'])} |"
        )
    said = ", ".join(f"{n} {k}" for k, n in tests.items()) or "no summary"
    ok = (
        None
        if not tests
        else not (tests.get("failed") or tests.get("error") or tests.get("errors"))
    )
    lines.append(f"| the CUDA tests pass | {said} | {_verdict(ok)} |")
    return lines


def describe_device(tiny):
    """The card's name (``torch.cuda.get_device_name``) and the versions, asked in a
    child process, so that this one holds no CUDA context while the parts run."""
    ask = (
        "import platform, torch; cuda = torch.cuda.is_available() and not TINY; "
        "print(torch.cuda.get_device_name(0) if cuda else 'CPU (' + (platform.processor() "
        "or platform.machine()) + '), a dry run'); print(f'torch {torch.__version__}, CUDA "
        "{torch.version.cuda}, Python {platform.python_version()}')"
    ).replace("TINY", str(bool(tiny)))
    out = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    return (lines[0], lines[1]) if len(lines) == 2 else ("unknown", out.stderr.strip()[-300:])


def commit():
    """The tree's commit, and whether files differ from it, as git says (if it can)."""
    try:
        head, status = (
            subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=30)
            for cmd in (["rev-parse", "--short", "HEAD"], ["status", "--porcelain", "-uno"])
        )
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    if head.returncode:
        return "not a git checkout"
    return head.stdout.strip() + (" with changes not committed" if status.stdout.strip() else "")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the results file (Markdown)")
    parser.add_argument("--tiny", action="store_true", help="the dry run on a CPU")
    parser.add_argument(
        "--budget", type=float, default=540.0,
        help="seconds for all the parts together (default: 540, inside the device call's 600)",
    )  # fmt: skip
    parser.add_argument(
        "--compile-caches", action=argparse.BooleanOptionalAction, default=True,
        help="let the later processes reuse compiled kernels from torch's disk cache "
        "(default: on, to fit the budget)",
    )  # fmt: skip
    parser.add_argument(
        "--parts", nargs="+", choices=list(LIMITS), default=list(LIMITS),
        help="the parts to run, in this order (default: all)",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv=None):
    """Run the parts, write the results file; the checks' lines."""
    args = parse_args(argv)
    start = time.monotonic()
    card, versions = describe_device(args.tiny)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.compile_caches:
        env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    results, reports = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for part in args.parts:
            left = args.budget - (time.monotonic() - start)
            limit = min(LIMITS[part], left) if not args.tiny else left
            log = tmp / f"{part}.log"
            if limit < 20:
                results[part] = dict(
                    rc=None, seconds=0.0, timed_out=True, command="not run: no time left"
                )
                continue
            if part.startswith("bench_"):
                decoder = part.removeprefix("bench_")
                argv = bench_gpu_argv(decoder, args.tiny, tmp / f"{part}.json", tmp / f"{part}.md")
                if args.compile_caches:
                    argv.append("--compile-caches")
            elif part == "loop":
                argv = loop_argv(args.tiny, tmp / "loop.md")
            else:
                argv = tests_argv()
            print(f"[device check] {part}: up to {limit:.0f} s", flush=True)
            results[part] = run_part(argv, limit, log, env)
            report = tmp / f"{part}.md"
            text = report.read_text() if report.exists() else ""
            output = log.read_text() if log.exists() else ""
            reports[part] = (text, output[-4000:])
            print(f"[device check] {part}: {results[part]}", flush=True)
        tree = read_json(tmp / "bench_tree.json")
        old = read_json(tmp / "bench_db22036.json")
    loop = loop_ratios(reports.get("loop", ("", ""))[0] or reports.get("loop", ("", ""))[1])
    tests = test_counts(reports.get("tests", ("", ""))[1])
    summary = checks(tree, old, loop, tests)
    lines = [
        "# Device check (issue 56)",
        "",
        "Written by `benchmarks/device_check.py`"
        + (" (a dry run on a CPU: `--tiny`, no GPU figure)" if args.tiny else "")
        + ": the pair decoder's A/B against db22036 (`bench_gpu.py`), the loops "
        "(`bench_pretrain_loop.py`) and the CUDA tests, in one call on one machine.",
        "",
        f"- Card: {card}",
        f"- Versions: {versions}",
        f"- Tree: {commit()}",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Whole check: {time.monotonic() - start:.0f} s of a {args.budget:.0f}-s budget",
        "",
        "## The targets",
        "",
        *summary,
        "",
        "## The parts",
        "",
        "| part | command | exit | seconds |",
        "|---|---|---|---|",
    ]
    for part, r in results.items():
        status = "timed out" if r["timed_out"] else str(r["rc"])
        lines.append(f"| {part} | `{r['command']}` | {status} | {r['seconds']:.0f} |")
    for part, (report, output) in reports.items():
        lines += ["", f"## {part}", ""]
        if report:
            lines += [line.replace("# ", "### ", 1) if line.startswith("#") else line
                      for line in report.splitlines()]  # fmt: skip
        if part == "tests" or not report or results[part]["rc"] != 0:
            lines += ["", "Output (its end):", "", "```", output.rstrip(), "```"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(summary), flush=True)
    return summary


if __name__ == "__main__":
    main()

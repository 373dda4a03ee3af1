"""The GPU check of issues 56, 61 and 79 in one call of at most 8 minutes: the CUDA
tests of what changed, the paper-size step with the tables and the fused pair operator,
each with and without CUDA graphs, and the loop with and without them; its last lines
say which CUDA defaults the rows choose.

``benchmarks/device_check.sh`` installs the wheels of ``.device-wheels/`` (``make
device-wheels``) and runs this script, which runs, each in its own process under its own
time limit (:data:`LIMITS`; the default parts', :data:`DEFAULT_PARTS`, add up to the
default ``--budget``, 480 s), in this order:

1. ``tests``: the CUDA tests of what changed (:data:`CUDA_TESTS`: the fused operator
   against float64 on the GPU, the training steps with CUDA graphs, without a
   synchronisation, in pinned memory; the estimator on CUDA);
2. ``bench_tree``: ``bench_gpu.py`` at the paper's size, batch 1024, bf16 +
   ``torch.compile``: the tables operator and the fused one
   (``models/pair/fused.py``), each in torch's default mode and replayed as CUDA graphs
   ("reduce-overhead"), each against the encoder alone compiled the same way, under
   ``TORCH_LOGS=cudagraphs`` (whether inductor skips or partitions PARS's graphs, and
   why); a ``torch.profiler`` breakdown of the two default-mode rows (the operator
   forward and backward, its fallback, the encoder, the rest of the decoder);
3. ``loop``, ``loop_graphs``: ``bench_pretrain_loop.py --size paper --rounds 1
   --no-cli`` (``PARSPretrainer.fit`` against the bare step, batch 256, 150 steps; the
   command line's loop is the same net), in torch's default mode and replayed as CUDA
   graphs, the crops drawn on the host (``--batches host``).

``--parts`` names others: ``bench_256``, the two CUDA-graph rows at batch 256 (where
the H200 record saw the decoder's cost grow under graphs); ``loop_device`` and
``loop_graphs_device``, the two loops with the crops drawn on the device (``--batches
device``); ``bench_db22036``, db22036's pair decoder's A/B rows (bf16 and bf16 +
compile at batch 1024; ``--decoder db22036``, written by ``make device-wheels`` from
git; passed twice), ``all_tests``, the whole CUDA suite (:data:`ALL_CUDA_TESTS`), and
``trace``, ``bench_loop_trace.py`` (per step of the bare step and of both loops: the
host's waits for the device, the copies, the kernels and the GPU's busy share).
``--tests`` names the tests the ``tests`` part runs instead (pytest's node ids, a rerun
of the ones that failed), ``--tb`` pytest's traceback style.

It writes one Markdown file, rewritten after every part (so that a call cut short still
returns what ran): the card (``torch.cuda.get_device_name``), what each part returned,
the targets checked against the numbers (:func:`checks`), then each part's own report,
with the tests' failures whole (pytest's failure sections and its summary:
:func:`pytest_failures`) and the end of any other part's output where it failed, and
last the defaults the rows choose for CUDA by the speed page's rule
(:func:`chosen_defaults`: the pair operator, the compile mode, the training batches).
With ``--logs DIR`` (``device_check.sh`` passes ``$OUT/device_check_logs``) each part's
whole output is also written to ``DIR/<part>.log`` as it runs (:data:`LOG_BYTES` at
most: its start and its end).
The compiled steps of the later processes may reuse the earlier ones' compiled kernels
from torch's on-disk cache (``--compile-caches``), so their first steps say nothing of
compilation time.

``--tiny`` is the dry run on a CPU: the same parts at the benchmarks' tiny sizes
(``--device cpu``, the aot_eager backend, 20 loop steps), in a few minutes; the CUDA
tests skip.

Usage::

    bash benchmarks/device_check.sh       # on the GPU machine: writes $OUT/device_check.md
    bash benchmarks/device_check.sh --parts tests loop --budget 180 --tb long \
        --tests tests/internals/test_pair_fused.py::test_on_a_gpu_the_fused_operator_is_exact
    python -m benchmarks.device_check --tiny --out /tmp/device_check.md   # a CPU dry run
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

#: The CUDA tests: the files (by name, wherever ``tests/`` keeps them), and the ``-k``
#: expression that picks their CUDA tests (they skip, with a reason, without a GPU).
CUDA_TESTS = (
    [
        "test_pair_fused.py",
        "test_training_steps.py",
        "test_pretrainer.py",
    ],
    "cuda or gpu",
)
#: The whole CUDA suite (``--parts all_tests``): it last passed on an H100 and the code
#: of the files not in :data:`CUDA_TESTS` has not changed since.
ALL_CUDA_TESTS = [
    "test_pair_decoders.py",
    "test_pair_fallback.py",
    "test_pair_fused.py",
    "test_training_steps.py",
    "test_pretrainer.py",
    "test_distributed.py",
]


def cuda_test_files(names=None):
    """The paths of the files ``names`` (None: :data:`CUDA_TESTS`'s) under ``tests/``,
    relative to the repository; a name found nowhere is refused, naming it."""
    names = CUDA_TESTS[0] if names is None else names
    found = {p.name: p for p in sorted((ROOT / "tests").rglob("test_*.py"))}
    missing = [name for name in names if name not in found]
    if missing:
        raise FileNotFoundError(f"CUDA_TESTS names files that tests/ does not hold: {missing}")
    return [str(found[name].relative_to(ROOT)) for name in names]


#: Each part's time limit in seconds on a GPU, in the order they run. tests: 58 s of
#: pytest and 74 s in all on an H200 (9470f02), when the CUDA-graph test failed in its
#: first seconds (it took 11.5 s on an H100). bench_tree: 115 s on an H200 for its four
#: compiled rows (PARS's first step 11 to 23 s, the encoder's 11 to 14 s, the later rows
#: reusing the first one's compiled kernels from torch's caches) and the profiles.
#: bench_256: two CUDA-graph rows at batch 256, each a compilation (timed out at 60 s).
#: The loops: PARSPretrainer.fit alone (the command line's loop is the same net), 150
#: steps, one round; every loop part timed out at 40 s on an H200, which holds barely
#: more than one compilation: each run is a new model (an untimed warm-up fit, the bare
#: step twice, a short and a long fit), each fit compiles its training step and its
#: validation step (eval mode) and the bare step is compiled with other options
#: (``dynamic=False``), so a loop pays at least three paper-size compilations of 11 to
#: 23 s (later models of the same options reuse the compiled code) beside the imports,
#: the corpus and about 250 steps; under CUDA graphs each new model is also recorded.
LIMITS = {
    "tests": 100,
    "bench_tree": 140,
    "bench_256": 90,
    "loop": 110,
    "loop_graphs": 130,
    "loop_device": 110,
    "loop_graphs_device": 130,
    "bench_db22036": 70,
    "all_tests": 150,
    "trace": 150,
}
#: The parts run by default (issue 79): the CUDA tests of what changed; the paper-size
#: step at batch 1024, the tables against the fused operator, each in torch's default
#: mode and under CUDA graphs, each against the encoder in the same mode, with a profile
#: of the two default-mode operator rows; the loop at batch 256 with the crops drawn on
#: the host, in the default mode and under CUDA graphs. Not by default (they do not fit
#: 8 minutes beside these at limits that hold their compilations): the CUDA-graph rows at
#: batch 256, the loops drawing on the device, db22036's A/B (passed twice), the whole
#: CUDA suite and the loops' trace. (The compiled fit with a validation set, 0 graph
#: breaks and 0 recompiles on an H100, was a part until its script retired:
#: benchmarks/README.md.)
DEFAULT_PARTS = (
    "tests",
    "bench_tree",
    "loop",
    "loop_graphs",
)

#: The default budget: the default parts' limits together (480 s), at most 8 minutes so
#: that a 15-minute device slot leaves room for a rerun, inside a device call's 600 s
#: with the installation of the wheels and the child that names the card.
BUDGET = sum(LIMITS[part] for part in DEFAULT_PARTS)

#: The most bytes of a part's output written to ``--logs`` (its first quarter and its
#: last three quarters): the device tool brings back at most 8 files of 16 MiB.
LOG_BYTES = 6 * 2**20

#: The most characters of the tests' failure sections the report holds.
FAILURES_CHARS = 100_000

#: The loop parts: (CUDA graphs, the training batches).
LOOP_PARTS = {
    "loop": (False, "host"),
    "loop_graphs": (True, "host"),
    "loop_device": (False, "device"),
    "loop_graphs_device": (True, "device"),
}

#: The issue's targets (issues 56 and 61, "Done when").
TARGETS = dict(
    speed_vs_db22036=1.0,  # PARS at least as fast as db22036, each precision, batch 1024
    pars_over_encoder=1.15,  # batch 1024, bf16 + compile
    peak_over_encoder=1.5,  # peak step memory at 128 patches, batch 1024
    loop_over_step=0.9,  # estimator and command line, paper size, batch 256
    moonshot_wps=50_000,  # compiled, batch 1024, on an H200
)

#: The rows of the A/B on each side.
AB_VARIANTS = ("bf16", "bf16-compile")
#: The rows this tree's side runs beside the compiled step (``bf16-compile``): replayed
#: as CUDA graphs, with the fused pair operator, and both (the Triton fallback's, TF32
#: and float64-table rows were measured on an H100 and can be named with
#: ``--tree-variants``).
TREE_VARIANTS = ("bf16-compile-graphs", "bf16-compile-fused", "bf16-compile-fused-graphs")
#: The rows of the batch-256 part: the tables and the fused operator under CUDA graphs.
GRAPH_VARIANTS = ("bf16-compile-graphs", "bf16-compile-fused-graphs")
#: The labels of those rows in ``bench_gpu.py``'s results.
GRAPHS_ROW = "bf16 autocast + torch.compile, CUDA graphs"
TRITON_ROW = "bf16 autocast + torch.compile, Triton fallback"
FUSED_ROW = "bf16 autocast + torch.compile, fused operator"
FUSED_GRAPHS_ROW = "bf16 autocast + torch.compile, fused operator, CUDA graphs"
#: The rows this tree's side profiles (those of them it runs): the compiled step with
#: the tables operator, and with the fused operator.
PROFILED = ("bf16-compile", "bf16-compile-fused")


def bench_gpu_argv(decoder, tiny, json_path, out_path, tree_variants=TREE_VARIANTS,
                   batch=1024):  # fmt: skip
    """The command line of ``bench_gpu.py``: this tree's step (``decoder="tree"``: the
    compiled row and ``tree_variants``' rows, the default-mode rows profiled; at
    ``batch`` 256 the :data:`GRAPH_VARIANTS` alone) or db22036's side of the A/B
    (:data:`AB_VARIANTS`); no memory table."""
    tree = decoder == "tree"
    variants = ["bf16-compile", *tree_variants] if tree else list(AB_VARIANTS)
    if tree and batch != 1024:
        variants = list(GRAPH_VARIANTS)
    argv = [sys.executable, "-m", "benchmarks.bench_gpu", "--decoder", decoder,
            "--variants", *variants, "--json", str(json_path), "--out", str(out_path)]  # fmt: skip
    if tree and batch == 1024:
        argv += ["--profile", *(v for v in PROFILED if v in variants)]
    if tiny:
        argv += ["--device", "cpu", "--tiny", "--compile-backend", "aot_eager",
                 "--batch-size", "8", "--repeats", "2"]  # fmt: skip
        return argv + ["--memory-patches"]
    return argv + ["--batch-size", str(batch), "--repeats", "11", "--memory-patches"]


def loop_argv(tiny, out_path, graphs=False, batches="host"):
    """The command line of ``bench_pretrain_loop.py``, ``PARSPretrainer.fit`` alone
    (``--no-cli``) with its training ``batches``; with ``graphs``, the bare step and the
    loop replayed as CUDA graphs (compile mode "reduce-overhead")."""
    argv = [sys.executable, "-m", "benchmarks.bench_pretrain_loop", "--rounds", "1",
            "--no-cli", "--batches", batches, "--out", str(out_path)]  # fmt: skip
    if graphs:
        argv += ["--compile-mode", "reduce-overhead"]
    if tiny:
        return argv + ["--tiny", "--device", "cpu", "--steps", "20", "--repeats", "3"]
    return argv + ["--size", "paper", "--steps", "150", "--repeats", "11"]


def trace_argv(tiny, out_path):
    """The command line of ``bench_loop_trace.py`` (torch's default compile mode)."""
    argv = [sys.executable, "-m", "benchmarks.bench_loop_trace", "--out", str(out_path)]
    if tiny:
        return argv + ["--tiny", "--device", "cpu", "--steps", "10"]
    return argv + ["--size", "paper", "--steps", "60"]


def tests_argv(names=None, tests=None, tb="short"):
    """pytest's command line: the CUDA tests of the files ``names`` (None:
    :data:`CUDA_TESTS`'s), or the node ids ``tests`` alone (a rerun); tracebacks in
    pytest's style ``tb``."""
    # -rfEsp: the short summary names every test, and a failure's message, without the
    # captured output of the passing tests (whose log lines buried a failure's message)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEsp",
            f"--tb={tb}"]  # fmt: skip
    if tests:
        return [*argv, *tests]
    return [*argv, *cuda_test_files(names), "-k", CUDA_TESTS[1]]


def pytest_failures(output, most=FAILURES_CHARS):
    """What of pytest's ``output`` says why tests failed: its FAILURES and ERRORS sections
    (each test's traceback and message, in the ``--tb`` style) and everything from its
    short summary on, at most ``most`` characters (the sections' end kept); "" when it
    has neither."""
    lines = output.splitlines()
    heading = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
    summary = re.compile(r"^=+ short test summary info =+$")
    start = next((i for i, line in enumerate(lines) if heading.match(line)), None)
    end = next((i for i, line in enumerate(lines) if summary.match(line)), None)
    if start is None and end is None:
        return ""
    failures = "\n".join(lines[start:end]) if start is not None else ""
    rest = "\n".join(lines[end:]) if end is not None else ""
    room = most - len(rest)
    if len(failures) > room:
        kept = failures[len(failures) - max(room, 0) :]
        failures = "[... the failures' first part cut ...]\n" + kept
    return (failures + "\n" + rest).strip()


def write_log(text, path, most=LOG_BYTES):
    """``text`` to ``path``, at most ``most`` bytes of it: its first quarter and its last
    three quarters when longer."""
    data = text.encode(errors="replace")
    if len(data) > most:
        cut = f"\n[... {len(data) - most} bytes cut ...]\n".encode()
        data = data[: most // 4] + cut + data[-(most - most // 4) :]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


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
    """(estimator/step, command line/step) from ``bench_pretrain_loop.py``'s last line
    (the second None when the command line's loop did not run)."""
    found = re.search(r"estimator/step ([0-9.]+), command line/step ([0-9.]+|n/a)", text or "")
    if not found:
        return None
    return float(found[1]), None if found[2] == "n/a" else float(found[2])


def loop_rate(text):
    """``PARSPretrainer.fit``'s windows per second in ``bench_pretrain_loop.py``'s table."""
    found = re.search(r"^\| `PARSPretrainer.fit` \| ([0-9,]+) \|", text or "", re.M)
    return float(found[1].replace(",", "")) if found else None


def test_counts(text):
    """{"passed": n, "failed": n, ...} from pytest's last summary line."""
    lines = [line for line in (text or "").splitlines() if re.search(r" in [0-9.]+s", line)]
    if not lines:
        return {}
    kinds = r"(\d+) (passed|failed|skipped|errors?|deselected)"
    return {k: int(n) for n, k in re.findall(kinds, lines[-1])}


def _verdict(ok):
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def checks(tree, old, loop, tests, loop_graphs=None):
    """The issue's targets against the results: Markdown lines.

    Parameters
    ----------
    tree, old : dict | None
        ``bench_gpu.py --json`` of this tree's decoder and of db22036's.
    loop, loop_graphs : tuple | None
        (estimator/step, command line/step): compile mode default, and replayed as CUDA
        graphs (reduce-overhead).
    tests : dict
        pytest's counts.
    """
    lines = ["| target | measured | met |", "|---|---|---|"]
    tree_steps = (tree or {}).get("steps", {})
    old_steps = (old or {}).get("steps", {})
    for batch in sorted(set(tree_steps) | set(old_steps), key=int) if old else ():
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
    graphs = tree_steps.get(big, {}).get(GRAPHS_ROW, {}) if big else {}
    for row, how in ((compiled, ""), (graphs, ", CUDA graphs (reduce-overhead)")):
        ratio = row.get("ratio")
        if how and ratio is None and "ratio" not in compiled:
            continue  # nothing ran: one missing row says so
        said = "missing" if ratio is None else f"{ratio:.2f} ({row['pars_wps']:,.0f} windows/s)"
        lines.append(
            f"| PARS / encoder step at most {TARGETS['pars_over_encoder']}, batch {big}, bf16 + "
            f"compile{how} | {said} "
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
    rates = [(r["pars_wps"], how) for r, how in ((compiled, ""), (graphs, ", CUDA graphs"))
             if r.get("pars_wps")]  # fmt: skip
    wps, how = max(rates, default=(None, ""))
    lines.append(
        f"| moonshot: {TARGETS['moonshot_wps']:,} windows/s compiled at batch {big} (H200) | "
        f"{'missing' if wps is None else f'{wps:,.0f}{how}'} "
        f"| {_verdict(None if wps is None else wps >= TARGETS['moonshot_wps'])} |"
    )
    for ratios, how in ((loop, ""), (loop_graphs, ", CUDA graphs (reduce-overhead)")):
        if how and ratios is None and loop is None:
            continue
        for i, what in enumerate(("`PARSPretrainer.fit`", "`braindecode-pars pretrain`")):
            if ratios is not None and ratios[i] is None:
                continue  # a loop not run (the command line's, --no-cli)
            value = None if ratios is None else ratios[i]
            lines.append(
                f"| {what} at least {TARGETS['loop_over_step']} of the bare step{how} | "
                f"{'missing' if value is None else f'{value:.2f}'} "
                f"| {_verdict(None if value is None else value >= TARGETS['loop_over_step'])} |"
            )
    for variant, base in (
        ("bf16 autocast, matmul precision 'high' (TF32)", "bf16 autocast"),
        ("bf16 autocast, float64 factor tables", "bf16 autocast"),
        (TRITON_ROW, "bf16 autocast + torch.compile"),
        (FUSED_ROW, "bf16 autocast + torch.compile"),
    ):
        row = tree_steps.get(big, {}).get(variant, {}) if big else {}
        if not row:
            continue  # a row this check did not run (see --tree-variants)
        eager = tree_steps.get(big, {}).get(base, {}) if big else {}
        said = (
            f"{row['pars_wps']:,.0f} windows/s, PARS / encoder {row['ratio']:.2f}"
            + (
                f", {row['pars_wps'] / eager['pars_wps']:.2f} x {base}'s"
                if eager.get("pars_wps")
                else ""
            )  # fmt: skip
            if row.get("pars_wps")
            else "missing"
        )
        lines.append(f"| for the record: {variant}, batch {big} | {said} | n/a |")
    passed = (
        None
        if not tests
        else not (tests.get("failed") or tests.get("error") or tests.get("errors"))
    )
    fused = tree_steps.get(big, {}).get(FUSED_ROW, {}) if big else {}
    if fused:  # (a row of --tree-variants)
        lines.append(fused_decision(fused, compiled, big, passed))
    said = ", ".join(f"{n} {k}" for k, n in tests.items()) or "no summary"
    lines.append(f"| the CUDA tests pass | {said} | {_verdict(passed)} |")
    return lines


def fused_decision(fused, tables, batch, passed):
    """The line that says whether the fused pair operator should become CUDA's default
    (``_DEVICE_DEFAULTS["cuda"]["decoder_kernel"]``): its compiled row (``fused``)
    faster than the tables operator's (``tables``, the compiled row) and the CUDA tests
    passing (``passed``, None if unknown); n/a where the fused row ran the tables
    operator (no Triton kernel on the device) or a number is missing."""
    a, b = fused.get("pars_wps"), tables.get("pars_wps")
    said = (
        f"fused operator: {a:,.0f} windows/s vs {b:,.0f} for the tables operator "
        f"(compiled, batch {batch}), {a / b:.2f} x"
        if a and b
        else "missing"
    )
    ran_tables = fused.get("operator") == "tables"
    if ran_tables:
        said += "; the fused row ran the tables operator: no Triton kernel runs on this device"
    met = None if ran_tables or not (a and b) or passed is None else a > b and passed
    return (
        "| the fused operator CUDA's default (`_DEVICE_DEFAULTS`): faster than the tables "
        f"operator, compiled, and the CUDA tests pass | {said} | {_verdict(met)} |"
    )


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
    parser.add_argument("--budget", type=float, default=float(BUDGET),
        help=f"seconds for all the parts together (default: {BUDGET}, the parts' limits)",
    )  # fmt: skip
    parser.add_argument("--compile-caches", action=argparse.BooleanOptionalAction, default=True,
        help="let the later processes reuse compiled kernels from torch's disk cache "
        "(default: on, to fit the budget)")  # fmt: skip
    parser.add_argument("--tree-variants", nargs="*", default=list(TREE_VARIANTS),
        help="bench_gpu.py's rows this tree's side adds to the A/B's (default: "
        f"{' '.join(TREE_VARIANTS)}; also bf16-tf32, bf16-f64tables)")  # fmt: skip
    parser.add_argument("--parts", nargs="+", choices=list(LIMITS), default=list(DEFAULT_PARTS),
        help=f"the parts to run, in this order (default: {' '.join(DEFAULT_PARTS)})")  # fmt: skip
    parser.add_argument("--tests", nargs="+", metavar="NODEID",
        help="the tests part runs these tests (pytest's node ids) in place of the CUDA "
        "tests of CUDA_TESTS (a rerun of those that failed)")  # fmt: skip
    parser.add_argument("--tb", default="short", choices=["short", "long", "native", "line"],
        help="pytest's traceback style in the tests parts (default: short)")  # fmt: skip
    parser.add_argument("--logs", metavar="DIR",
        help="also write each part's whole output to DIR/<part>.log (device_check.sh: "
        "$OUT/device_check_logs)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv=None):
    """Run the parts, write the results file after each; the checks' lines."""
    args = parse_args(argv)
    start = time.monotonic()
    card, versions = describe_device(args.tiny)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.compile_caches:
        env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    results, reports = {}, {}
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for part in args.parts:
            left = args.budget - (time.monotonic() - start)
            limit = min(LIMITS[part], left) if not args.tiny else left
            # in --logs as it runs: a call cut short still brings back what the part said
            log = (Path(args.logs) if args.logs else tmp) / f"{part}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            if limit < 20:
                results[part] = dict(
                    rc=None, seconds=0.0, timed_out=True, command="not run: no time left"
                )
                continue
            part_env = env
            if part.startswith("bench_"):
                decoder = "db22036" if part == "bench_db22036" else "tree"
                argv = bench_gpu_argv(
                    decoder, args.tiny, tmp / f"{part}.json", tmp / f"{part}.md",
                    args.tree_variants, batch=256 if part == "bench_256" else 1024,
                )  # fmt: skip
                if args.compile_caches:
                    argv.append("--compile-caches")
                # whether inductor skips or partitions PARS's CUDA graphs, and why
                part_env = dict(env, TORCH_LOGS="cudagraphs")
            elif part in LOOP_PARTS:
                graphs, batches = LOOP_PARTS[part]
                argv = loop_argv(args.tiny, tmp / f"{part}.md", graphs, batches)
            elif part == "all_tests":
                argv = tests_argv(ALL_CUDA_TESTS, tb=args.tb)
            elif part == "trace":
                argv = trace_argv(args.tiny, tmp / "trace.md")
            else:
                argv = tests_argv(tests=args.tests, tb=args.tb)
            print(f"[device check] {part}: up to {limit:.0f} s", flush=True)
            results[part] = run_part(argv, limit, log, part_env)
            report = tmp / f"{part}.md"
            text = report.read_text() if report.exists() else ""
            output = log.read_text(errors="replace") if log.exists() else ""
            graph_log = cudagraph_lines(output) if part_env is not env else ""
            if args.logs:
                write_log(output, log)  # at most LOG_BYTES of it
            kept = output[-4000:]
            if part in ("tests", "all_tests"):
                kept = pytest_failures(output) or kept
            reports[part] = (text + graph_log, kept)
            print(f"[device check] {part}: {results[part]}", flush=True)
            summary = write_results(args, card, versions, start, results, reports, tmp)
    print("\n".join(summary), flush=True)
    return summary


def cudagraph_lines(output, most=40):
    """The lines of a part's output that ``TORCH_LOGS=cudagraphs`` wrote (skips,
    partitions, re-records), as a Markdown section; empty when there are none."""
    found = [line for line in output.splitlines() if "cudagraph" in line.lower()]
    if not found:
        return ""
    shown = found[:most] + ([f"... {len(found) - most} more"] if len(found) > most else [])
    return "\n".join(["", "#### TORCH_LOGS=cudagraphs", "", "```", *shown, "```", ""])


def chosen_defaults(tree, b256, loops, tests):
    """The last lines: what CUDA's defaults would be by the rows (speed page's rule):
    the pair operator, the compile mode and the training batches, each with its reason,
    or "unchanged" where a row is missing or the CUDA tests did not pass.

    Parameters
    ----------
    tree, b256 : dict | None
        ``bench_gpu.py --json`` of the batch-1024 and batch-256 parts.
    loops : dict
        Part name (of :data:`LOOP_PARTS`) -> (windows/s, estimator/step) or None.
    tests : dict
        pytest's counts.
    """
    passed = bool(tests) and not (tests.get("failed") or tests.get("error") or tests.get("errors"))
    gate = "" if passed else " (unchanged: the CUDA tests did not pass)"

    def wps(result, batch, row):
        return ((result or {}).get("steps", {}).get(batch, {}).get(row) or {}).get("pars_wps")

    big = max((tree or {}).get("steps", {}), key=int, default=None)
    rows = {
        "tables": wps(tree, big, "bf16 autocast + torch.compile"),
        "fused": wps(tree, big, FUSED_ROW),
        "tables, graphs": wps(tree, big, GRAPHS_ROW),
        "fused, graphs": wps(tree, big, FUSED_GRAPHS_ROW),
    }
    fused_ran = ((tree or {}).get("steps", {}).get(big, {}).get(FUSED_ROW) or {}).get("operator")
    measured = {k: v for k, v in rows.items() if v}
    if fused_ran != "fused" or not measured:
        kernel = "tables (unchanged: no fused row ran the Triton kernels)"
    else:
        best = max(measured, key=measured.get)
        kernel = ("fused" if best.startswith("fused") else "tables") + (
            f" (fastest step at batch {big}: {best}, {measured[best]:,.0f} windows/s)"
        )
    loop = {part: (loops.get(part) or (None, None)) for part in LOOP_PARTS}
    rates = {part: rate for part, (rate, _) in loop.items() if rate}
    if not rates:
        mode, batches = "None (unchanged: no loop ran)", "host (unchanged: no loop ran)"
    else:
        best = max(rates, key=rates.get)
        graphs, chosen = LOOP_PARTS[best]
        ratio = loop[best][1]
        keeps = ratio is not None and ratio >= TARGETS["loop_over_step"]
        mode = ("reduce-overhead" if graphs and keeps else "None") + (
            f" (fastest loop: {best}, {rates[best]:,.0f} windows/s, {ratio or 0:.2f} of its "
            f"bare step)"
        )
        batches = f"{chosen} (fastest loop: {best})"
    b256_rows = {
        "tables": wps(b256, "256", GRAPHS_ROW),
        "fused": wps(b256, "256", FUSED_GRAPHS_ROW),
    }
    said_256 = ", ".join(f"{k} {v:,.0f}" for k, v in b256_rows.items() if v) or "missing"
    return [
        "## The defaults these rows choose for CUDA",
        "",
        f"- decoder_kernel: {kernel}{gate}",
        f"- compile_mode: {mode}{gate}",
        f"- batches: {batches}{gate}",
        f"- batch 256 under CUDA graphs (windows/s): {said_256}",
    ]


def write_results(args, card, versions, start, results, reports, tmp):
    """Write the results file from the parts run so far; the checks' lines."""
    tree = read_json(tmp / "bench_tree.json")
    old = read_json(tmp / "bench_db22036.json")
    loop, loop_graphs = (
        loop_ratios(reports.get(part, ("", ""))[0] or reports.get(part, ("", ""))[1])
        for part in ("loop", "loop_graphs")
    )
    tests = test_counts(reports.get("tests", ("", ""))[1])
    summary = checks(tree, old, loop, tests, loop_graphs)
    loops = {}
    for part in LOOP_PARTS:
        text = reports.get(part, ("", ""))[0]
        ratios = loop_ratios(text)
        loops[part] = (loop_rate(text), ratios[0] if ratios else None) if text else None
    defaults = chosen_defaults(tree, read_json(tmp / "bench_256.json"), loops, tests)
    lines = [
        "# Device check (issues 56, 61 and 79)",
        "",
        "Written by `benchmarks/device_check.py`"
        + (" (a dry run on a CPU: `--tiny`, no GPU figure)" if args.tiny else "")
        + ": the CUDA tests, the pair decoder's A/B against db22036 with a profile and "
        "the memory (`bench_gpu.py`), and the loops against the bare step "
        "(`bench_pretrain_loop.py`), compiled with and without CUDA graphs, in one call on "
        "one machine.",
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
        if part in ("tests", "all_tests") or not report or results[part]["rc"] != 0:
            said = "Output (its end)"
            if part in ("tests", "all_tests") and re.search(r"^=+ short test summary", output,
                                                            re.M):  # fmt: skip
                said = "Output (pytest's failures, if any, and its summary)"
            lines += ["", f"{said}:", "", "```", output.rstrip(), "```"]
    lines += ["", *defaults]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    return [*summary, "", *defaults]


if __name__ == "__main__":
    main()

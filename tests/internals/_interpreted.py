"""Tests of Triton kernels under Triton's interpreter, on CPU tensors: the interpreter is
chosen when the kernels are defined, at import, so the ``interpreted`` tests of a file
run in a child process started with ``TRITON_INTERPRET=1``."""

import os
import subprocess
import sys
from pathlib import Path


def run_interpreted(test_file, passed):
    """Run ``test_file``'s tests named ``interpreted`` in a child process under Triton's
    interpreter, and check that it ends well with ``passed`` tests passed (its output's
    tail is the failure's message)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, TRITON_INTERPRET="1")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            str(test_file), "-k", "interpreted"]  # fmt: skip
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{passed} passed" in done.stdout, done.stdout[-1000:]

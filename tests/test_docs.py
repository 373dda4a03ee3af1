"""The documentation builds as ``make docs`` builds it, a warning failing it, with every
example of the gallery run (at the reduced size ``BRAINDECODE_PARS_QUICK_EXAMPLES=1``
gives: ``make test`` runs each example once, here)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("plot_*.py"))


@pytest.mark.slow
def test_the_docs_build_without_a_warning_and_run_every_example(tmp_path):
    pytest.importorskip("sphinx_gallery", reason="needs the [docs] extra (make install has it)")
    env = {**os.environ, "BRAINDECODE_PARS_QUICK_EXAMPLES": "1", "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
    command += ["-d", str(tmp_path / "doctrees"), "docs", str(tmp_path / "html")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"sphinx-build exited {done.returncode}:\n{done.stderr[-6000:]}"
    assert len(EXAMPLES) >= 4
    for name in EXAMPLES:
        page = (tmp_path / "html" / "auto_examples" / f"{name}.html").read_text()
        assert "sphx-glr-script-out" in page, f"{name}: no output of its run on its page"
        assert f"sphx_glr_{name}_001.png" in page, f"{name}: no figure on its page"
    # a quick build leaves no record of its runs: the next full build runs them all again
    assert not list((ROOT / "docs" / "auto_examples").glob("*.md5"))

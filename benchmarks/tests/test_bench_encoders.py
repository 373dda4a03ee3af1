"""The benchmark encoders out of the tree: the clear error when absent, and the pinned commit."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.lib import encoders as encoders_module

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def encoders(tmp_path, monkeypatch):
    module = encoders_module
    monkeypatch.setattr(module, "ENCODERS", tmp_path / "encoders")
    return module


def test_an_absent_benchmark_encoder_names_the_make_target(encoders):
    (encoders.ENCODERS / "mae-small").mkdir(parents=True)
    assert encoders.benchmark_encoder(encoders.ENCODERS / "mae-small") == (
        encoders.ENCODERS / "mae-small"
    )
    with pytest.raises(FileNotFoundError, match=r"pars-selection' is absent.*make benchmark-enc"):
        encoders.benchmark_encoder(str(encoders.ENCODERS / "pars-selection"))
    with pytest.raises(FileNotFoundError, match="git fetch --unshallow"):
        encoders.benchmark_encoder(encoders.ENCODERS / "comparison" / "runs.json")
    # Shipped names and folders elsewhere are the loader's to check.
    assert encoders.benchmark_encoder("pars-small-v2") == "pars-small-v2"
    elsewhere = encoders.ENCODERS.parent / "mine"
    assert encoders.benchmark_encoder(elsewhere) == elsewhere


def test_the_makefile_restores_from_the_commit_named_beside_the_benchmarks():
    module = encoders_module
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"^ENCODERS_COMMIT := {module.ENCODERS_COMMIT}$", makefile, re.M)
    assert "git archive $(ENCODERS_COMMIT) benchmarks/encoders | tar -x" in makefile
    assert re.search(rf"^NORMALIZATION_COMMIT := {module.NORMALIZATION_COMMIT}$", makefile, re.M)
    restore = "git archive $(NORMALIZATION_COMMIT) benchmarks/encoders/normalization | tar -x"
    assert restore in makefile


def files_at(commit, folder):
    """The files under ``folder`` in ``commit``'s tree; skips where the history is absent."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the history that holds the encoders is absent")
    tree = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit, folder],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if tree.returncode != 0:
        pytest.skip(f"commit {commit[:7]} is not here (a shallow clone)")
    return set(tree.stdout.split())


def test_the_pinned_commit_holds_the_encoders():
    names = files_at(encoders_module.ENCODERS_COMMIT, "benchmarks/encoders")
    for name in ("mae-small", "pars-selection", "pars-small-v3"):
        assert f"benchmarks/encoders/{name}/model.safetensors" in names
    assert "benchmarks/encoders/comparison/runs.json" in names


def test_the_normalisation_commit_holds_its_encoders():
    """The encoders the retired bench_normalization pretrained are in the commit the
    Makefile names."""
    folder = "benchmarks/encoders/normalization"
    names = files_at(encoders_module.NORMALIZATION_COMMIT, folder)
    for name in [f"{mode}-seed{seed}" for mode in ("window-scale", "fixed") for seed in range(3)]:
        assert f"{folder}/{name}/model.safetensors" in names
        assert f"{folder}/{name}/config.json" in names


def test_the_density_commit_holds_the_patch_density_encoders():
    """The patch-density selection's finished encoders are in the commit the Makefile
    names (``make benchmark-encoders`` restores them), one folder per finished run."""
    makefile = (REPO / "Makefile").read_text()
    commit = re.search(r"^DENSITY_COMMIT := ([0-9a-f]{40})$", makefile, re.M)[1]
    assert "git archive $(DENSITY_COMMIT) benchmarks/encoders/density | tar -x" in makefile
    folder = "benchmarks/encoders/density"
    names = files_at(commit, folder)
    finished = [f"{c}-seed{s}" for c in "bcd" for s in range(3)]
    for name in finished:
        assert f"{folder}/density-{name}/model.safetensors" in names

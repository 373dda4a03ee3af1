"""The lab's size, capped so that it cannot grow back (issue 80, item 4): the lines of
Python outside ``benchmarks/tests``, the files in ``benchmarks/results`` and the pairs
of repeated code in the whole repository (the ``duplicates`` command, where it is
installed).

Each cap is the count when the lab was last cut; lower it when a cut lands, never raise
it. The issue's targets: 11,000 lines and 60 result files, reached at the third cut;
20 pairs, not reached. What holds the rest (``benchmarks/README.md``, *The scripts, by
question*): the scripts behind the docs' current tables and the open issues' runs (75:
the fault harnesses; 76: the density and normalisation selections, the subject probe
and the token readout; 77: the fine-tuning recipe and the pretext comparison; 79: the
device check and what it runs); the result files those pages quote, with the rows and
``.commands`` that remake them. Of the 31 pairs, 24 are inside the package and its
tests alone (``duplicates --most 60`` lists them), alike by shape only (signatures, keyword
and import lists: a braindecode model spells out its six signal arguments); of the
7 that touch ``benchmarks/``, two are the lab's copies of ``_util/checks.py`` and
``_util/seeding.py`` (the lab imports nothing private, and ``bench_pair_decoder --mode
ab`` and the device check run old revisions' decoders that import the checks copy),
three pair lab code with the package's or its tests' by shape, two are shapes repeated
inside one lab file (``bench_gpu``'s variant table, a test's parameter list)."""

import re
import shutil
import subprocess

import pytest

from .conftest import ROOT

LAB = ROOT / "benchmarks"

#: ``find benchmarks -name '*.py' -not -path '*/tests/*' | xargs wc -l``: 17,831 before
#: the first cut, 15,275 after; 15,819 with ``bench_finetuning_recipe``; 12,845 after
#: the second cut (six scripts and ``lab compare`` retired at 3ab04e9, and the
#: copies they shared merged into ``lib/``); 10,977 after the third (five scripts and
#: ``bench_pair_decoder --mode repeat`` retired at 111df39, 6043dfd and f823f58, the
#: figures nobody kept, ``lab finetune`` and ``evaluate``, ``lib/plots`` into
#: ``lib/protocols``); 10,617 with ``bench_normalization`` retired at ea3cc37 (issue 68
#: decided), ``bench_patch_density``'s test splits and settled decision added and the
#: lab's two CLI helpers gone; 10,616 with ``eegmat_subjects`` the lab's (issue 80's
#: fourth pass on the public names, in the lines its store command's imports freed).
MOST_LINES = 10_616
#: ``ls benchmarks/results | wc -l``: 80 before the first cut, 76 after, 79 with
#: ``finetuning_recipe``; 71 after the second (one frozen record per retired script,
#: ``finetuning_amplitude.jsonl`` at 3ab04e9); 59 after the third (retired scripts'
#: records one file per question, ``.commands`` folded into their reports, the stale
#: ``normalization.png`` and ``rehearsal_tueg.csv`` gone); 59 with ``normalization_test.md``
#: a section of ``normalization.md``, ``patch_density_test.csv`` and ``_probes.csv`` added and
#: ``normalization_test.csv`` folded into ``normalization.csv``.
MOST_RESULT_FILES = 59
#: ``duplicates --seconds 120 | head -1`` from the repository's root: 61 before the first
#: cut, 47 after, 41 after the second, 36 after the third, 33 with the test helpers written
#: twice merged, 31 with ``bench_normalization`` retired.
MOST_DUPLICATE_PAIRS = 31


def lab_lines():
    """Lines of the lab's Python files outside its tests."""
    files = [p for p in LAB.rglob("*.py") if "tests" not in p.relative_to(LAB).parts]
    return sum(len(p.read_text().splitlines()) for p in files)


def test_the_lab_has_at_most_its_lines():
    assert lab_lines() <= MOST_LINES


def test_the_results_folder_has_at_most_its_files():
    files = [p for p in (LAB / "results").iterdir() if p.is_file()]
    assert len(files) <= MOST_RESULT_FILES, sorted(p.name for p in files)


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="the duplicates command")
def test_the_repository_repeats_itself_in_at_most_its_pairs():
    done = subprocess.run(
        ["duplicates", "--seconds", "120"], cwd=ROOT, capture_output=True, text=True
    )
    first = done.stdout.splitlines()[0] if done.stdout else ""
    if first.startswith("no duplicates"):
        return
    found = re.match(r"(\d+) pairs", first)
    assert found, done.stdout[:500]
    assert "incomplete:" not in done.stdout, "the count did not finish"
    assert int(found[1]) <= MOST_DUPLICATE_PAIRS, done.stdout

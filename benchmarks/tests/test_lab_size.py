"""The lab's result files, capped so that they cannot grow back (issue 80, item 4): the
files in ``benchmarks/results``.

The cap is the count when the lab was last cut; lower it when a cut lands, never raise
it. The issue's target, 60 result files, was reached at the third cut. What holds the
rest (``benchmarks/README.md``, *The scripts, by question*): the result files the docs'
pages quote, with the rows and ``.commands`` that remake them.

The lab's lines and the repository's repeated code are not capped here (issue 88): a
line count decided how code was formatted rather than what it held, and the
``duplicates`` command that counts the pairs is a place to look, not a verdict.
``benchmarks/README.md`` (*Size*) gives both counts and their commands.
"""

from .conftest import ROOT

LAB = ROOT / "benchmarks"

#: ``ls benchmarks/results | wc -l``: 80 before the first cut, 76 after, 79 with
#: ``finetuning_recipe``; 71 after the second (one frozen record per retired script,
#: ``finetuning_amplitude.jsonl`` at 3ab04e9); 59 after the third (retired scripts'
#: records one file per question, ``.commands`` folded into their reports, the stale
#: ``normalization.png`` and ``rehearsal_tueg.csv`` gone); 59 with ``normalization_test.md``
#: a section of ``normalization.md``, ``patch_density_test.csv`` and ``_probes.csv`` added and
#: ``normalization_test.csv`` folded into ``normalization.csv``.
MOST_RESULT_FILES = 59


def test_the_results_folder_has_at_most_its_files():
    files = [p for p in (LAB / "results").iterdir() if p.is_file()]
    assert len(files) <= MOST_RESULT_FILES, sorted(p.name for p in files)

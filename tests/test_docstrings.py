"""Package code states facts, not their history: no result files of the repository's lab
and no issue numbers in the installed package (docstrings, comments, messages).

The numbers and their story live in the documentation's benchmark pages and the
changelog; a docstring links the page (``:doc:`/benchmarks/defaults```).
"""

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "braindecode_pars"

#: what a line of package code must not hold: a result file of the lab, a lab script, an
#: issue or pull request by number ("issue 87", "issues 80 and 86", "#87", "PR 12")
FORBIDDEN = {
    "result file": re.compile(r"benchmarks/results|\bbench_\w+\.py"),
    "issue number": re.compile(r"\b(?:issues?|PR|pull request)\s*#?\d+", re.IGNORECASE),
    "#number": re.compile(r"(?<![\w&])#\d+\b"),
}


def references(text):
    """``(kind, line number, line)`` of each forbidden reference in ``text``."""
    return [
        (kind, number, line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        for kind, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]


@pytest.mark.parametrize(
    "line",
    [
        "(``benchmarks/results/probe_c.md``)",
        "a sleep task, 7 points under: issue 87.)",
        "Moved here (Issues 80 and 86)",
        "fixed in #87",
        "the lab's ``benchmarks/bench_pair_decoder.py``",
    ],
)
def test_the_check_finds_each_kind_of_reference(line):
    assert references(line)


@pytest.mark.parametrize(
    "line",
    [
        "(:doc:`/benchmarks/defaults`)",
        'default="results/demo"',
        "colour '#1f77b4'  # noqa: E731",
        "an issue of units",
    ],
)
def test_the_check_leaves_links_paths_and_words_alone(line):
    assert references(line) == []


def test_package_code_names_no_result_file_and_no_issue_number():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {kind}: {line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for kind, number, line in references(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "link the documentation page instead:\n" + "\n".join(found)

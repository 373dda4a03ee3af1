"""Write the tables and figure of ``bench_pretext_comparison`` again from its rows:
``benchmarks/results/pretext_comparison.md`` and ``.png``
(:mod:`benchmarks.lib.pretext_report` says what they hold).

Usage::

    python -m benchmarks.report_pretext_comparison
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.lib.pretext_report import write_report

if __name__ == "__main__":
    write_report(Path(__file__).resolve().parent / "results" / "pretext_comparison")

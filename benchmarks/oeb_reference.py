"""The published OpenEEG-Bench rows that a run of the shipped encoders through the
benchmark (docs/oeb.rst) is compared against, as a table.

The rows are transcribed, per seed, into ``results/oeb_published_reference.csv`` from
``results/oeb_results_non-fm_baselines.csv`` and ``results/oeb_results_reve_baseline.csv``
of https://github.com/PierreGtch/eeg-fm-masking at commit
f09761e2c72fa7066bd78e9a7203e0fdf6247b12 (the cached outputs of OpenEEG-Bench's
``Experiment`` behind "What masking geometry works best for EEG foundation models?",
whose README says every CSV there is the exact output used in the paper): braindecode's
networks trained from scratch (``training=sgd, finetuning=full, head=linear``, seeds
0-2) and REVE's frozen encoder under the ridge probe (one seed, three decimals, a file
that looks edited: see docs/oeb.rst), on the six classification datasets nearest this
library's tasks. This script writes
``results/oeb_published_reference.md`` from the CSV (mean ± std over seeds).

Usage::

    python -m benchmarks.oeb_reference
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).parent / "results"
DATASETS = ("arithmetic_zyma2019", "physionet", "bcic2a", "isruc-sleep", "tuab", "chbmit")
#: What the datasets are (OpenEEG-Bench's README).
DATASET_NOTES = (
    "arithmetic_zyma2019: EEGMAT mental arithmetic (the development task's recordings); "
    "physionet: PhysioNet-MI motor imagery, 4 classes; bcic2a: BCI Competition IV 2a "
    "motor imagery, 4 classes; isruc-sleep: ISRUC sleep staging, 5 classes; tuab: TUH "
    "abnormal EEG; chbmit: CHB-MIT seizure detection."
)


def reference_table(df):
    """Markdown lines: one row per backbone and strategy, one column per dataset,
    cells the mean ± std of ``test_balanced_accuracy`` over the seeds (the mean alone
    with one seed; empty where the source has no valid value)."""
    lines = [
        "| backbone (training, fine-tuning, head) | seeds | " + " | ".join(DATASETS) + " |",
        "|---|---|" + "---|" * len(DATASETS),
    ]
    keys = ["backbone", "training", "finetuning", "head"]
    for key, g in df.groupby(keys, sort=False):
        cells = []
        for name in DATASETS:
            v = g[g.dataset == name].test_balanced_accuracy
            if v.empty:
                cells.append("")
            elif len(v) == 1:
                cells.append(f"{v.iloc[0]:.3f}")
            else:
                cells.append(f"{v.mean():.3f} ± {v.std(ddof=1):.3f}")
        lines.append(
            f"| {key[0]} ({', '.join(key[1:])}) | {g.seed.nunique()} | " + " | ".join(cells) + " |"
        )
    return lines


def main():
    df = pd.read_csv(RESULTS / "oeb_published_reference.csv")
    lines = [
        "# Published OpenEEG-Bench rows",
        "",
        "Test balanced accuracy of OpenEEG-Bench's fixed splits; source and transcription: "
        f"benchmarks/oeb_reference.py. Datasets: {DATASET_NOTES}",
        "",
        *reference_table(df),
        "",
    ]
    (RESULTS / "oeb_published_reference.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()

"""The lab: the paper's benchmarks and experiments, beside the library and outside the
installed package (``pip install braindecode-pars`` does not ship it).

Each script runs from the repository's root as a module::

    python -m benchmarks.bench_gpu --out benchmarks/results/gpu.md
    python -m benchmarks.lab experiment --config docs/configs/label_efficiency.json

What two scripts share is in :mod:`benchmarks.lib`; no script imports another, and none
imports a private name of ``braindecode_pars``. ``benchmarks/results/README.md`` lists
the recorded results and the command that writes each; ``make test-lab`` runs the
lab's tests (``benchmarks/tests``).
"""

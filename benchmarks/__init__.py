"""The lab: the paper's benchmarks and experiments, beside the library and outside the
installed package. Each script runs from the repository's root as a module
(``python -m benchmarks.<script>``); ``benchmarks/README.md`` indexes them by question,
``benchmarks/results/README.md`` lists the recorded results, and ``make test-lab`` runs
the lab's tests."""

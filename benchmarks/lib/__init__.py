"""The lab's harness, beside the benchmark scripts and outside the installed package:
the development tasks and their splits (:mod:`.dev_tasks`), the paper's protocols from
JSON configurations (:mod:`.protocols`) and the pretext tasks compared on one footing
(:mod:`.comparison`). ``benchmarks/lab.py`` runs them from the command line; the
scripts in ``benchmarks/`` import them as ``lib.<module>`` (their folder is on the path
when they run)."""

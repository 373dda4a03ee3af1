"""What the lab's scripts share, so that no script imports another: timing and memory
(:mod:`.measure`), the training steps and loops the speed benchmarks time
(:mod:`.steps`, :mod:`.device_steps`, :mod:`.loops`), the development tasks, their
splits and probe rows (:mod:`.dev_tasks`, :mod:`.dev_probe`), the paper's datasets and
protocols (:mod:`.paper_datasets`, :mod:`.protocols`), and the small helpers they need
(:mod:`.checks`, :mod:`.seeding`). ``benchmarks/lab.py`` runs the protocols from the
command line.
"""

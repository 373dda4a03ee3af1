# One place for the project's commands. `make test` and `make demo` set everything up
# from nothing (a virtual environment in .venv) before they run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test test-slow test-next test-latest test-lab test-faults test-device test-kernels docs-check test-extended test-all lint demo docs benchmark benchmark-encoders device-wheels clean

# Everything: the package with its test, docs, MOABB and OpenEEG-Bench extras (make test,
# docs, benchmark). It holds the core, so its stamp stands for the core's too. pip
# byte-compiles what it installs on one core; compileall does it on every core (on two
# cores, 2026-11-29: pip alone 3 min 9 s; pip without compiling 1 min 38 s, then
# compileall 55 s). The compiled files are what a process that may not write them
# (PYTHONDONTWRITEBYTECODE) imports the package from in 12 s, not 27 s.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e ".[test,docs,moabb,oeb]"
	$(PY) -m compileall -q -j 0 $(VENV)/lib
	touch $@ $(VENV)/.installed-core

# The core alone, what the main job needs (make demo): torch, braindecode, skorch, MNE,
# scikit-learn and pyriemann, without the extras (README.md gives both sizes)
$(VENV)/.installed-core: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e .
	$(PY) -m compileall -q -j 0 $(VENV)/lib
	touch $@

install: $(VENV)/.installed

lint: install
	$(PY) -m ruff check braindecode_pars tests examples benchmarks docs/conf.py
	$(PY) -m ruff format --check braindecode_pars tests examples benchmarks docs/conf.py

# The README's test command: ruff, then every test not marked slow or serial in two
# pytest-xdist workers (one torch thread each, a file's tests in one worker). Install
# included, it stays under 15 minutes on a 2-core CPU.
test: lint
	$(PY) -m pytest -m "not serial and not slow" -n 2 --dist loadfile

# The tests marked slow (more than about 10 s each; among them the docs build without
# running the gallery) in the same two workers, then those marked serial, which start
# processes that take both cores (the whole-job signals, torchrun's stop and exact resume,
# the store's workers), one at a time. .ci/run runs them after `make test`; the tests
# marked gallery or extended are left to `make docs-check` and `make test-extended`
# (CONTRIBUTING.md says which guard runs where).
test-slow: install
	$(PY) -m pytest -m "slow and not serial and not gallery and not extended and not kernels" -n 2 --dist loadfile
	$(PY) -m pytest -m "serial and not extended"

# The docs built as `make docs` builds them, every example of the gallery run at its
# reduced size; then the digest of docs/, examples/ and what they import is recorded in
# .ci/checked.json, so that .ci/run builds the gallery again only when they change or
# the record is too old (.ci/changed.py).
docs-check: install
	$(PY) -m pytest -m gallery tests/test_docs.py
	$(PY) .ci/changed.py --record gallery

# The lab's fault harness run for real (signals, kills and a full disk to store and
# pretrain, torchrun's stress trial, the TUEG rehearsal; about 8 minutes), then its
# digest recorded (.ci/checked.json): .ci/run runs it again when the harness or what it
# imports and launches change, or the record is too old (.ci/changed.py).
test-faults: install
	$(PY) -m pytest benchmarks/tests -m "faults and not serial" -n 2 --dist loadfile
	$(PY) -m pytest benchmarks/tests -m "faults and serial"
	$(PY) .ci/changed.py --record faults

# The GPU device check's dry run on the CPU (benchmarks/device_check.py --tiny: its parts
# at the tiny sizes, about 3 minutes), then its digest recorded (.ci/checked.json): .ci/run
# runs it again when the device check, the benchmarks it runs or what they import change,
# or the record is too old (.ci/changed.py).
test-device: install
	$(PY) -m pytest benchmarks/tests -m device
	$(PY) .ci/changed.py --record device

# The pair operator's Triton kernels on the CPU (Triton's interpreter against float64, in
# a child process; its compiler down to an H100's machine code; 1 to 2 minutes), then
# their digest recorded (.ci/checked.json): .ci/run runs them when their tests or what
# those import (the kernels, the PARS model) or the pins changed, or the record is too
# old (.ci/changed.py).
test-kernels: install
	$(PY) -m pytest -m kernels -n 2 --dist loadfile
	$(PY) .ci/changed.py --record kernels

# What guards a behaviour that .ci/run guards through another test, or measures the
# machine (marked extended), in both suites
test-extended: install
	$(PY) -m pytest tests -m "extended and not serial" -n 2 --dist loadfile || test $$? -eq 5
	$(PY) -m pytest tests -m "extended and serial" || test $$? -eq 5
	$(PY) -m pytest benchmarks/tests -m "extended and not faults" || test $$? -eq 5

# Everything: what .ci/run runs, the gallery, the fault harness and the extended tests
# (before a release, or after a change to the stops, the launchers or the harness)
test-all: test test-slow test-lab docs-check test-faults test-device test-kernels test-extended

# The suite against braindecode's next release, in its own environment (.venv-next,
# ignored; not part of .ci/run; docs/architecture.rst, "Against braindecode's next
# release"). Its constraints are constraints.txt with braindecode's pin replaced by
# BRAINDECODE_NEXT: upstream's development builds are numbered 1.8.1.devN although they
# come after 1.8.1, so `pip install --pre braindecode` picks 1.8.1 and the build must be
# pinned (the newest: `pip index versions braindecode --pre`). torch and torchaudio, with
# their CUDA wheels, are copied from NEXT_TORCH_FROM when it holds the pinned versions
# (.ci/reuse_torch.py) instead of downloaded again; pip's cache serves the rest.
NEXT_VENV ?= .venv-next
NEXT_PY := $(NEXT_VENV)/bin/python
BRAINDECODE_NEXT ?= 1.8.1.dev184307392
NEXT_TORCH_FROM ?= $(VENV)

$(NEXT_VENV)/.installed-$(BRAINDECODE_NEXT): pyproject.toml constraints.txt .ci/reuse_torch.py
	$(PYTHON) -m venv $(NEXT_VENV)
	$(NEXT_PY) -m pip install --quiet --upgrade pip
	grep -v '^braindecode==' constraints.txt > $(NEXT_VENV)/constraints.txt
	echo 'braindecode==$(BRAINDECODE_NEXT)' >> $(NEXT_VENV)/constraints.txt
	$(NEXT_PY) .ci/reuse_torch.py $(NEXT_TORCH_FROM) $(NEXT_VENV)/constraints.txt
	$(NEXT_PY) -m pip install --quiet -c $(NEXT_VENV)/constraints.txt -e ".[test,docs,moabb,oeb]"
	$(NEXT_PY) -m pip check
	$(NEXT_PY) -c "import braindecode, torch, torchaudio; print('braindecode', braindecode.__version__, 'torch', torch.__version__, 'torchaudio', torchaudio.__version__)"
	touch $@

# The passes of `make test` and `make test-slow`, without the lint (the code is the same)
test-next: $(NEXT_VENV)/.installed-$(BRAINDECODE_NEXT)
	$(NEXT_PY) -m pytest -m "not serial" -n 2 --dist loadfile
	$(NEXT_PY) -m pytest -m serial

# The suite against the newest releases the registry offers, in an environment of its
# own (.venv-latest, ignored; not part of .ci/run): torch and torchaudio, scikit-learn,
# skorch, MNE, numpy, SciPy and braindecode's newest stable release, every other
# requirement upgraded as far as they allow (`--upgrade-strategy eager`), without
# constraints.txt and past any constraint file pip's configuration names
# (PIP_CONSTRAINT=/dev/null). Re-resolved at every call, so it follows new releases;
# pip's cache serves what did not change. docs/architecture.rst, "Against the newest
# releases", records the versions it last ran and what broke.
LATEST_VENV ?= .venv-latest
LATEST_PY := $(LATEST_VENV)/bin/python
LATEST_PACKAGES := torch torchaudio scikit-learn skorch mne numpy scipy braindecode

test-latest:
	test -x $(LATEST_PY) || $(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_PY) -m pip install --quiet --upgrade pip
	PIP_CONSTRAINT=/dev/null $(LATEST_PY) -m pip install --quiet --upgrade \
		--upgrade-strategy eager -e ".[test,docs,moabb,oeb]" $(LATEST_PACKAGES)
	$(LATEST_PY) -m pip check
	$(LATEST_PY) -m pip freeze --exclude-editable > $(LATEST_VENV)/versions.txt
	$(LATEST_PY) -c "import braindecode, mne, numpy, sklearn, skorch, torch, torchaudio; \
		print(*(f'{m.__name__} {m.__version__}' for m in (torch, torchaudio, braindecode, \
		sklearn, skorch, mne, numpy)), sep=', ')"
	$(LATEST_PY) -m pytest -m "not serial" -n 2 --dist loadfile
	$(LATEST_PY) -m pytest -m serial

# The lab's tests (benchmarks/tests: the benchmark scripts and benchmarks/lib), outside
# the library's suite, in the same two passes (pytest's status 5, no test selected, is a
# pass: the lab's serial tests are all the harness's today); .ci/run runs them after
# `make test-slow`.
# The fault harness run for real is `make test-faults`'s; here it is tested on recorded
# trial records (benchmarks/tests/test_fault_records.py).
test-lab: install
	$(PY) -m pytest benchmarks/tests -m "not serial and not faults and not device and not extended" -n 2 --dist loadfile
	$(PY) -m pytest benchmarks/tests -m "serial and not faults and not device and not extended" || test $$? -eq 5

demo: $(VENV)/.installed-core
	$(VENV)/bin/braindecode-pars demo --out results/demo

# -W: a warning fails the build (--keep-going lists them all first); docs/README.md
# says how to look at the pages
docs: install
	$(VENV)/bin/sphinx-build -b html -W --keep-going docs docs/_build/html

benchmark: install
	$(PY) -m benchmarks.bench_pair_decoder --out benchmarks/results/pair_decoder.md

# The encoders pretrained for the benchmark tables (12.5 MB), not tracked so that the tree
# that travels to a GPU machine stays small: written back from the last commit that held
# them (benchmarks/lib/encoders.py names the same one; a shallow clone needs
# `git fetch --unshallow` first)
ENCODERS_COMMIT := 09227cb0b85c531beb195eda6e215936f4dba107
NORMALIZATION_COMMIT := c7af8f645cf3de7f5fde0692f4c290d5ef865dce
# the patch-density selection's encoders (benchmarks/bench_patch_density.py), 10 MB
DENSITY_COMMIT := 09680b6b7a7cc242118a88708a1a6c647e242b7f
benchmark-encoders:
	git archive $(ENCODERS_COMMIT) benchmarks/encoders | tar -x
	git archive $(NORMALIZATION_COMMIT) benchmarks/encoders/normalization | tar -x
	git archive $(DENSITY_COMMIT) benchmarks/encoders/density | tar -x

# The wheels benchmarks/device_check.sh installs on a GPU machine (Python 3.12, x86-64),
# which has torch but not braindecode, skorch or MNE: benchmarks/device_wheels.txt, without
# their dependencies, into .device-wheels/ (ignored through .git/info/exclude; about 12 MB)
device-wheels: install
	mkdir -p .device-wheels .git/info
	grep -qx '/.device-wheels/' .git/info/exclude 2>/dev/null || echo '/.device-wheels/' >> .git/info/exclude
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d .device-wheels -r benchmarks/device_wheels.txt
	git show db22036:braindecode_pars/models/pair_decoders.py \
		| sed 's/from \.\._checks/from braindecode_pars._util.checks/' > .device-wheels/pair_decoders_db22036.py

clean:
	rm -rf docs/_build docs/auto_examples docs/generated docs/sg_execution_times.rst results

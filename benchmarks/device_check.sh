#!/usr/bin/env bash
# The GPU check of issues 56, 61 and 79 in one call of the device tool, at most 8 minutes
# of parts (benchmarks/device_check.py says what it runs; its last lines, which CUDA
# defaults the rows choose). The machine has torch but not braindecode, skorch or MNE: their
# wheels travel in .device-wheels/ (`make device-wheels` here, then name .device-wheels
# in the call's carry). Writes $OUT/device_check.md (benchmarks/results/ without $OUT) and,
# with $OUT, each part's whole output in $OUT/device_check_logs/<part>.log.
#
#   run(command="bash benchmarks/device_check.sh", carry=[".device-wheels"], timeout_s=560)
#
# A short rerun: the tests that failed, with whole tracebacks, and one loop:
#
#   bash benchmarks/device_check.sh --parts tests loop --budget 180 --tb long \
#       --tests tests/internals/test_training_steps.py::test_on_a_gpu_cuda_graphs_replay_...
set -u
cd "$(dirname "$0")/.."
ls .device-wheels/*.whl > /dev/null 2>&1 || { echo "no .device-wheels/: run make device-wheels and carry it"; exit 2; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/device-site .device-wheels/*.whl || exit 3
export PYTHONPATH="/tmp/device-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-8}"
python3 -m benchmarks.device_check --out "${OUT:-benchmarks/results}/device_check.md" \
    ${OUT:+--logs "$OUT/device_check_logs"} "$@"

#!/usr/bin/env bash
# Every member of gallery/mechanisms.diag and every control of gallery/control.diag at App. C's width,
# depth 1, 2 epochs, as concurrent processes on one GPU, sized to the lend by a timing shard
# (benchmarks/gpu/mechanisms_study.py). Run from the repository root on the device machine with the wheels of
# gpu_check.sh in .whl/ and $OUT set:  BUDGET=480 SEEDS=3 bash benchmarks/gpu/gpu_mechanisms.sh
# It continues the committed study (gallery/study/lm-gpu-mechanisms/study: its finished runs are skipped,
# the sizing takes the next runs in priority order); FRESH=1 starts an empty one.
# Afterwards, here: replace gallery/study/lm-gpu-mechanisms/{study,logs} by $OUT/mech/study.tgz's and run
#   stringdiag study --report gallery/study/lm-gpu-mechanisms/study
#   stringdiag study --report gallery/study/lm-gpu gallery/study/lm-gpu-mechanisms/study -o gallery/study/lm-gpu-mechanisms/with-lm-gpu
set -x
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/mech"
exec > >(tee -a "$OUT/mech/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
if [ -z "${FRESH:-}" ] && [ -d gallery/study/lm-gpu-mechanisms/study ] && [ ! -d /tmp/w3/study ]; then
  mkdir -p /tmp/w3 && cp -r gallery/study/lm-gpu-mechanisms/study /tmp/w3/study
fi
timeout $(( ${BUDGET:-480} + 60 )) python3 benchmarks/gpu/mechanisms_study.py --device cuda --budget "${BUDGET:-480}" \
  --processes "${PROCESSES:-6}" --threads 2 --seeds "${SEEDS:-1}" -o /tmp/w3
# packed here, whatever became of the script (its own timeout included): every finished run comes back
tar czf "$OUT/mech/study.tgz" --exclude=checkpoint.safetensors --exclude='*.tmp' --exclude='*.training.lock' \
  -C /tmp/w3 study logs || echo "FAILED: no study.tgz"
cat /tmp/w3/study/verdict.txt

#!/usr/bin/env bash
# Next device run: every member of gallery/mechanisms.diag and every control of gallery/control.diag at
# App. C's width, depth 1, 2 epochs, as concurrent processes on one GPU, sized to the lend by a timing shard
# (benchmarks/gpu/mechanisms_study.py). Run from the repository root on the device machine with the wheels of
# gpu_check.sh in .whl/ and $OUT set:  BUDGET=480 SEEDS=3 bash benchmarks/gpu/gpu_mechanisms.sh
# Afterwards, here: unpack $OUT/mech/study.tgz into gallery/study/lm-gpu-mechanisms and run
#   stringdiag study --report gallery/study/lm-gpu-mechanisms/study
set -x
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/mech"
exec > >(tee -a "$OUT/mech/log.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
timeout $(( ${BUDGET:-480} + 60 )) python3 benchmarks/gpu/mechanisms_study.py --device cuda --budget "${BUDGET:-480}" \
  --processes "${PROCESSES:-6}" --threads 2 --seeds "${SEEDS:-1}" -o /tmp/w3
# packed here, whatever became of the script (its own timeout included): every finished run comes back
tar czf "$OUT/mech/study.tgz" --exclude=checkpoint.safetensors --exclude='*.tmp' --exclude='*.training.lock' \
  -C /tmp/w3 study logs || echo "FAILED: no study.tgz"
cat /tmp/w3/study/verdict.txt

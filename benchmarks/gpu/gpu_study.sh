#!/usr/bin/env bash
# Second device run (gallery/study/lm-gpu): the App. C-width study slice, M0, M1 and the control at depths 1-2
# with three seeds, 2 epochs, as 6 shards in parallel on one GPU (the runs are launch-bound: one process
# leaves the GPU mostly idle). The shards' timings are taken while the others train: seconds_per_epoch
# in its results is not a clean measure (peak memory is, per process). Run from the repository root on
# the device machine with the wheels of gpu_check.sh in .whl/ and $OUT set:  bash benchmarks/gpu/gpu_study.sh
set -x
export PYTHONUNBUFFERED=1
T0=$(date +%s)
mkdir -p /tmp/w2 "$OUT"
exec > >(tee -a "$OUT/log2.txt") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
A="study gallery/anatomy.diag -d M0,M1 --layers 1-2 --seeds 3 --d-model 512 --heads 4 --d-ff 2048 --context 35 --batch-size 32 --epochs 2 --warmup 1500 --eval-every 1380 --test-tokens 10000 --timing-steps 20 --timing-repeats 3 --timing-device cuda --device cuda --threads 2 -o /tmp/w2/study"
for k in 1 2 3 4 5 6; do
  timeout 300 python3 -m stringdiag.cli.main $A --shard $k/6 --time-budget 250 > /tmp/w2/shard$k.txt 2>&1 &
  pids="$pids $!"
done
wait $pids  # the shards only: a bare `wait` also waits for the tee above, which never ends (it hung run 2)
echo "shards done at $(( $(date +%s) - T0 )) s"
for k in 1 2 3 4 5 6; do echo "== shard $k"; grep -v -E '^\s*$' /tmp/w2/shard$k.txt | grep -v 'it/s\]' ; done | tee "$OUT/shards.txt"
timeout 60 python3 -m stringdiag.cli.main study --report /tmp/w2/study -o /tmp/w2/report
cat /tmp/w2/report/verdict.txt /tmp/w2/report/summary.csv /tmp/w2/report/results.csv
tar -C /tmp/w2 --exclude='checkpoint.safetensors' --exclude='.*.tmp' -czf "$OUT/study2.tgz" . || echo "FAILED: tar"
echo "done in $(( $(date +%s) - T0 )) s"

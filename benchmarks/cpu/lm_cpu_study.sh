#!/usr/bin/env bash
# The CPU study of gallery/study/lm-cpu (docs/reproductions.md), stage by stage, most decisive first.
# Resumable: a finished run is skipped, a run with a checkpoint resumes. Several copies of this
# script may run at once (one per core): each takes the next run that no other process holds.
#   bash benchmarks/cpu/lm_cpu_study.sh            # one lane; start a second beside it for two cores
#   STAGES="controls-1" bash benchmarks/cpu/lm_cpu_study.sh
#   PLAN=1 bash benchmarks/cpu/lm_cpu_study.sh     # each stage's runs left and their CPU-hours; trains nothing
#   UNTIL=17:30 bash benchmarks/cpu/lm_cpu_study.sh  # stop at 17:30 (local time), the run in progress
#                                                    # checkpointed so that the next start resumes it
set -uo pipefail
cd "$(dirname "$0")/../.."
SD=${STRINGDIAG:-.venv/bin/stringdiag}
RECIPE=(--d-model 128 --heads 4 --context 35 --batch-size 32 --max-steps 1200 --warmup 200 --eval-every 400
        --test-tokens 10000 --timing-steps 10 --threads 1 -o gallery/study/lm-cpu)
# (b): eight members spanning the four structural groups, the best and the worst of each at seed 0
SPREAD=M4,M22,M7,M9,M23,M13,M3,M20
# (c): every member that uses both families
BOTH=M8,M9,M10,M11,M22,M23,M24,M25,M26,M27,M28,M29,M30
# (d): three epochs (4,140 steps), the whole test split: M0, M1, two members of each group, the controls
LONG=M0,M1,M4,M22,M7,M9,M23,M13,M3,M20
LONG_RECIPE=(--d-model 128 --heads 4 --context 35 --batch-size 32 --epochs 3 --warmup 200 --eval-every 1380
             --timing-steps 10 --threads 1 -o gallery/study/lm-cpu-long)
BUDGET=()
stage() {
  case $1 in
    controls-1)  "$SD" study gallery/mechanisms.diag -d M1 --control mixing --layers 1 --seeds 1 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    controls-13) "$SD" study gallery/mechanisms.diag -d M1 --control mixing --layers 1 --seeds 3 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    controls-21) "$SD" study gallery/mechanisms.diag -d M1 --control mixing --layers 1-2 --seeds 1 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    controls-2)  "$SD" study gallery/mechanisms.diag -d M1 --control mixing --layers 1-2 --seeds 3 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    members-3)   "$SD" study gallery/mechanisms.diag -d "$SPREAD" --control mixing --layers 1 --seeds 3 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    both-2)      "$SD" study gallery/mechanisms.diag -d "$BOTH" --control mixing --layers 2 --seeds 1 "${RECIPE[@]}" "${BUDGET[@]}" ;;
    long)        "$SD" study gallery/mechanisms.diag -d "$LONG" --control mixing --layers 1 --seeds 1 "${LONG_RECIPE[@]}" "${BUDGET[@]}" ;;
    *) echo "unknown stage $1" >&2; return 2 ;;
  esac
}
if [ -n "${PLAN:-}" ]; then RECIPE+=(--plan); LONG_RECIPE+=(--plan); fi
if [ -n "${UNTIL:-}" ]; then
  END=$(date -d "$UNTIL" +%s) || { echo "error: UNTIL=$UNTIL is not a time that date(1) reads" >&2; exit 2; }
fi
for s in ${STAGES:-controls-1 controls-13 controls-21 members-3 controls-2 both-2 long}; do
  if [ -n "${UNTIL:-}" ] && [ -z "${PLAN:-}" ]; then  # the session's training budget: what is left until then
    left=$(( END - $(date +%s) ))
    if [ "$left" -le 0 ]; then echo "== $UNTIL reached: stopping before stage $s"; exit 0; fi
    BUDGET=(--time-budget "$left")
  fi
  echo "== stage $s ($(date -u +%FT%TZ))"
  stage "$s" || exit $?
done

#!/bin/bash
# cellsched example: an emulated DL training job that consumes the plan the
# cellsched SPANK plugin injects, the way a real training script would.
#
# It sleeps instead of computing: iteration by iteration (batched into sleeps
# of at least 0.5 s) for the predicted iteration time times a time scale,
# faster once layers freeze, printing `cellsched-iter <seconds>` lines (the
# format `cellsched profile run` reads) and its progress.
#
# Usage (as an sbatch script or by hand):
#   sbatch --dl-model=gpt__350M --dl-batch=64 --dl-iters=500 --dl-cell=auto \
#          etc/examples/emulated-train.sh
#   sbatch --gres=gpu:a100:4 etc/examples/emulated-train.sh --iters 500 --iter-time 0.26
#
# Options (each also an environment variable):
#   --iters N        iterations to run       [CELLSCHED_DL_ITERS, then the plan file's "iters"]
#   --iter-time S    declared seconds per iteration, used only when no plan was
#                    injected (stock Slurm)  [CELLSCHED_EMU_ITER_TIME]
#   --scale X        real seconds slept per predicted second (default 1)
#                                            [CELLSCHED_EMU_SCALE]
#   --quiet          no per-chunk lines, only the plan and the summary
#
# What it reads from the SPANK plugin (see README, "Consuming the plan"):
#   CELLSCHED_ITER_TIME_S      predicted seconds per unfrozen iteration
#   CELLSCHED_CELL, CELLSCHED_GPU_TYPE, CELLSCHED_GPUS, CELLSCHED_NODES
#   CELLSCHED_DP / _TP / _PP / _MICRO_BATCHES / _ZERO_STAGE / _CHECKPOINTING
#   CELLSCHED_FREEZE_MODE, CELLSCHED_FREEZE_SCHEDULE ("PROGRESS:FRACTION,...")
#   CELLSCHED_PLAN_FILE        the same plan as JSON
# A real launcher would pass them on, e.g.
#   torchrun --nnodes "$CELLSCHED_NODES" --nproc-per-node "$LOCAL_WORLD_SIZE" \
#     train.py --tensor-parallel "$CELLSCHED_TP" --pipeline-parallel "$CELLSCHED_PP" \
#              --micro-batches "$CELLSCHED_MICRO_BATCHES" --zero-stage "$CELLSCHED_ZERO_STAGE"
#
# Exit codes: 0 done, 2 bad argument or missing input.
#SBATCH --job-name=emulated-train
#SBATCH --output=emulated-train-%j.out
set -euo pipefail

die() { echo "emulated-train: error: $*" >&2; exit 2; }
is_pos_num() { [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && awk -v x="$1" 'BEGIN{exit !(x+0>0)}'; }

ITERS=${CELLSCHED_DL_ITERS:-}
DECLARED=${CELLSCHED_EMU_ITER_TIME:-}
SCALE=${CELLSCHED_EMU_SCALE:-1}
QUIET=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --iters) ITERS=${2:-}; shift 2 || die "--iters needs a value" ;;
        --iters=*) ITERS=${1#*=}; shift ;;
        --iter-time) DECLARED=${2:-}; shift 2 || die "--iter-time needs a value" ;;
        --iter-time=*) DECLARED=${1#*=}; shift ;;
        --scale) SCALE=${2:-}; shift 2 || die "--scale needs a value" ;;
        --scale=*) SCALE=${1#*=}; shift ;;
        --quiet) QUIET=1; shift ;;
        -h|--help) sed -n '2,/^#SBATCH/p' "$0" | grep -v '^#SBATCH' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# Iterations: argument/env, else the plan file written by the SPANK plugin.
if [[ -z $ITERS && -n ${CELLSCHED_PLAN_FILE:-} && -r ${CELLSCHED_PLAN_FILE} ]]; then
    ITERS=$(sed -n 's/^[[:space:]]*"iters":[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$CELLSCHED_PLAN_FILE" | head -n1)
fi
[[ -n $ITERS ]] || die "no iteration count: give --iters N (or --dl-iters=N at submit)"
[[ $ITERS =~ ^[0-9]+$ && $ITERS -gt 0 ]] || die "--iters must be a positive integer, got '$ITERS'"
is_pos_num "$SCALE" || die "--scale (CELLSCHED_EMU_SCALE) must be a positive number, got '$SCALE'"

# Iteration time: the injected plan wins; stock Slurm jobs use the declared one.
if [[ -n ${CELLSCHED_ITER_TIME_S:-} ]]; then
    ITER_S=$CELLSCHED_ITER_TIME_S
    SOURCE="plan (${CELLSCHED_PLAN_SOURCE:-cellsched})"
elif [[ -n $DECLARED ]]; then
    ITER_S=$DECLARED
    SOURCE="declared (--iter-time)"
else
    die "no iteration time: no cellsched plan was injected and no --iter-time was given"
fi
is_pos_num "$ITER_S" || die "iteration time must be a positive number, got '$ITER_S'"

SCHEDULE=${CELLSCHED_FREEZE_SCHEDULE:-}
[[ $SCHEDULE == none ]] && SCHEDULE=
if [[ -n $SCHEDULE && ! $SCHEDULE =~ ^[0-9.]+:[0-9.]+(,[0-9.]+:[0-9.]+)*$ ]]; then
    die "CELLSCHED_FREEZE_SCHEDULE '$SCHEDULE' is not PROGRESS:FRACTION,..."
fi
# Extra iterations freezing costs (core::freezing defaults).
case ${CELLSCHED_FREEZE_MODE:-off} in
    conservative) PENALTY=1.02 ;;
    auto) PENALTY=1.05 ;;
    *) PENALTY=1 ;;
esac
[[ -n $SCHEDULE ]] || PENALTY=1
TOTAL=$(awk -v n="$ITERS" -v p="$PENALTY" 'BEGIN{t=n*p; printf "%d", (t==int(t))?t:int(t)+1}')

echo "cellsched plan: job=${SLURM_JOB_ID:-local} node=${SLURMD_NODENAME:-$(hostname)}"
echo "  cell=${CELLSCHED_CELL:--} gpu_type=${CELLSCHED_GPU_TYPE:--} gpus=${CELLSCHED_GPUS:--} nodes=${CELLSCHED_NODES:--}"
echo "  dp=${CELLSCHED_DP:--} tp=${CELLSCHED_TP:--} pp=${CELLSCHED_PP:--} mb=${CELLSCHED_MICRO_BATCHES:--} zero=${CELLSCHED_ZERO_STAGE:--} ckpt=${CELLSCHED_CHECKPOINTING:--}"
echo "  freeze=${CELLSCHED_FREEZE_MODE:-off} schedule=${SCHEDULE:-none} plan_file=${CELLSCHED_PLAN_FILE:--}"
echo "  iter_time_s=$ITER_S ($SOURCE) iterations=$TOTAL (declared $ITERS) scale=$SCALE"

now() { date +%s.%N; }
START=$(now)
# Iterations per sleep: at least 0.5 s of real sleep, at most ~200 chunks.
CHUNK=$(awk -v t="$ITER_S" -v s="$SCALE" -v n="$TOTAL" 'BEGIN{
    c=int(0.5/(t*s)); if (c*t*s<0.5) c++; m=int((n+199)/200); if (m>c) c=m; if (c<1) c=1; print c}')
DONE=0
TARGET=0 # predicted seconds of training done so far
while (( DONE < TOTAL )); do
    N=$(( TOTAL - DONE < CHUNK ? TOTAL - DONE : CHUNK ))
    # Iteration-time factor at this progress: 1 - 2/3 * frozen fraction.
    read -r STEP_S TARGET SLEEP < <(awk -v sched="$SCHEDULE" -v done="$DONE" -v n="$N" -v total="$TOTAL" \
        -v t="$ITER_S" -v target="$TARGET" -v s="$SCALE" -v start="$START" -v now="$(now)" 'BEGIN{
        p=done/total; f=0; k=split(sched, steps, ",");
        for (i=1; i<=k; i++) { split(steps[i], pf, ":"); if (p+1e-12 >= pf[1]+0) f=pf[2]+0 }
        it=t*(1-2/3*f); target+=n*it; sl=start+target*s-now; if (sl<0) sl=0;
        printf "%.6f %.6f %.3f\n", it, target, sl}')
    sleep "$SLEEP"
    DONE=$(( DONE + N ))
    if (( ! QUIET )); then
        echo "cellsched-iter $STEP_S"
        awk -v d="$DONE" -v n="$TOTAL" -v e="$(now)" -v st="$START" \
            'BEGIN{printf "progress: %d/%d iterations (%.0f%%), %.1f s elapsed\n", d, n, 100*d/n, e-st}'
    fi
done
awk -v e="$(now)" -v st="$START" -v tg="$TARGET" -v n="$TOTAL" \
    'BEGIN{printf "done: %d iterations, %.1f predicted s, %.1f s elapsed\n", n, tg, e-st}'

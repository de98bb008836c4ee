#!/bin/bash
# cellsched example: an emulated DL training job that consumes the plan the
# cellsched SPANK plugin injects, the way a real training script would, and
# runs at a *measured* speed.
#
# It sleeps instead of computing. Its seconds per iteration come from a truth
# table of measured iteration times (CSV: model,batch,gpu_type,nodes,
# gpus_per_node,iter_time_s; `#` comments; iter_time_s <= 0 = does not fit),
# looked up for the GPUs this job was actually granted (type, nodes, GPUs per
# node), never from the prediction the plugin injected (CELLSCHED_ITER_TIME_S
# is printed for comparison only). The shipped table,
# etc/examples/truth-gavel.csv, holds Gavel's measured throughputs (see its
# header). A point the table lacks makes the job fail with a message: it
# never invents a speed. Iterations are the job's real count (--iters).
#
# It sleeps iteration by iteration (batched into sleeps of at least 0.5 s)
# for the measured iteration time times a time scale, faster once layers
# freeze, printing `cellsched-iter <seconds>` lines (the format
# `cellsched profile run` and `cellsched report --iter-log` read) and its progress.
#
# Usage (as an sbatch script or by hand):
#   sbatch --dl-model=resnet50 --dl-batch=64 --dl-iters=500 --dl-cell=auto \
#          etc/examples/emulated-train.sh --model resnet50 --batch 64 --iters 500
#   sbatch --gres=gpu:v100:4 etc/examples/emulated-train.sh --model resnet50 --batch 256 --iters 500
#
# Options (each also an environment variable):
#   --iters N        iterations the job really runs      [CELLSCHED_EMU_ITERS]
#   --model M        model (catalog name)                [CELLSCHED_EMU_MODEL, then CELLSCHED_DL_MODEL]
#   --batch B        global batch                        [CELLSCHED_EMU_BATCH, then CELLSCHED_DL_BATCH]
#   --truth FILE     truth table                         [CELLSCHED_EMU_TRUTH]
#   --gpu-type T     granted GPU type (default: CELLSCHED_GPU_TYPE, else the node's Gres)
#   --nodes K        granted nodes (default: SLURM_JOB_NUM_NODES, else 1)
#   --gpus-per-node G  granted GPUs per node (default: SLURM_GPUS_ON_NODE, else
#                    the count of SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES)
#   --scale X        real seconds slept per measured second (default 1)
#                                                        [CELLSCHED_EMU_SCALE]
#   --restart-s X    measured seconds a restart from a checkpoint costs before
#                    the first iteration (load, process start; default 0,
#                    slept scaled on a resume)          [CELLSCHED_EMU_RESTART_S]
#   --quiet          no per-chunk lines, only the plan and the summary
#
# Elastic jobs (sbatch --dl-elastic[=SIGNAL]; see docs/GUIDE.md, "Elastic jobs"):
# with CELLSCHED_CKPT_DIR set (the SPANK plugin sets it for such jobs), on
# SIGUSR1, SIGUSR2 or the job's own --dl-elastic signal it writes the
# iterations done so far to $CELLSCHED_CKPT_DIR/emulated-train.iter and exits
# with $CELLSCHED_RECONF_EXIT (75): cellsched requeues it on its new Cell. On a
# restart (CELLSCHED_RESTART > 0) it resumes from that count, and after its
# first chunk prints `cellsched-restart <seconds>`: from its start to the end
# of that chunk, on the job's (unscaled) clock (`cellsched report --iter-log`).
#
# What it reads from the SPANK plugin (see README, "Consuming the plan"):
#   CELLSCHED_CELL, CELLSCHED_GPU_TYPE, CELLSCHED_GPUS, CELLSCHED_NODES
#   CELLSCHED_DP / _TP / _PP / _MICRO_BATCHES / _ZERO_STAGE / _CHECKPOINTING
#   CELLSCHED_FREEZE_MODE, CELLSCHED_FREEZE_SCHEDULE ("PROGRESS:FRACTION,...")
#   CELLSCHED_ITER_TIME_S (the prediction; printed, not used), CELLSCHED_PLAN_FILE
# A real launcher would pass them on, e.g.
#   torchrun --nnodes "$CELLSCHED_NODES" --nproc-per-node "$LOCAL_WORLD_SIZE" \
#     train.py --tensor-parallel "$CELLSCHED_TP" --pipeline-parallel "$CELLSCHED_PP" \
#              --micro-batches "$CELLSCHED_MICRO_BATCHES" --zero-stage "$CELLSCHED_ZERO_STAGE"
#
# Exit codes: 0 done, 2 bad argument or missing input, 3 the truth table says
# the configuration does not fit in memory (fails like an OOM), 4 the truth
# table has no measured point for the granted GPUs.
#SBATCH --job-name=emulated-train
#SBATCH --output=emulated-train-%j.out
set -euo pipefail

die() { echo "emulated-train: error: $*" >&2; exit 2; }
is_pos_num() { [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && awk -v x="$1" 'BEGIN{exit !(x+0>0)}'; }
is_pos_int() { [[ $1 =~ ^[0-9]+$ && $1 -gt 0 ]]; }

ITERS=${CELLSCHED_EMU_ITERS:-}
MODEL=${CELLSCHED_EMU_MODEL:-${CELLSCHED_DL_MODEL:-}}
BATCH=${CELLSCHED_EMU_BATCH:-${CELLSCHED_DL_BATCH:-}}
TRUTH=${CELLSCHED_EMU_TRUTH:-}
SCALE=${CELLSCHED_EMU_SCALE:-1}
RESTART_S=${CELLSCHED_EMU_RESTART_S:-0}
GPU_TYPE=${CELLSCHED_GPU_TYPE:-}
NODES=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-}}
GPN=${SLURM_GPUS_ON_NODE:-}
QUIET=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --iters) ITERS=${2:-}; shift 2 || die "--iters needs a value" ;;
        --iters=*) ITERS=${1#*=}; shift ;;
        --model) MODEL=${2:-}; shift 2 || die "--model needs a value" ;;
        --model=*) MODEL=${1#*=}; shift ;;
        --batch) BATCH=${2:-}; shift 2 || die "--batch needs a value" ;;
        --batch=*) BATCH=${1#*=}; shift ;;
        --truth) TRUTH=${2:-}; shift 2 || die "--truth needs a value" ;;
        --truth=*) TRUTH=${1#*=}; shift ;;
        --gpu-type) GPU_TYPE=${2:-}; shift 2 || die "--gpu-type needs a value" ;;
        --gpu-type=*) GPU_TYPE=${1#*=}; shift ;;
        --nodes) NODES=${2:-}; shift 2 || die "--nodes needs a value" ;;
        --nodes=*) NODES=${1#*=}; shift ;;
        --gpus-per-node) GPN=${2:-}; shift 2 || die "--gpus-per-node needs a value" ;;
        --gpus-per-node=*) GPN=${1#*=}; shift ;;
        --scale) SCALE=${2:-}; shift 2 || die "--scale needs a value" ;;
        --scale=*) SCALE=${1#*=}; shift ;;
        --restart-s) RESTART_S=${2:-}; shift 2 || die "--restart-s needs a value" ;;
        --restart-s=*) RESTART_S=${1#*=}; shift ;;
        --quiet) QUIET=1; shift ;;
        -h|--help) sed -n '2,/^#SBATCH/p' "$0" | grep -v '^#SBATCH' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

[[ -n $ITERS ]] || die "no iteration count: give --iters N (the iterations the job really runs)"
is_pos_int "$ITERS" || die "--iters must be a positive integer, got '$ITERS'"
[[ -n $MODEL ]] || die "no model: give --model M"
[[ -n $BATCH ]] || die "no batch: give --batch B"
is_pos_int "$BATCH" || die "--batch must be a positive integer, got '$BATCH'"
[[ -n $TRUTH ]] || die "no truth table: give --truth FILE (e.g. etc/examples/truth-gavel.csv)"
[[ -r $TRUTH ]] || die "truth table '$TRUTH' is not readable"
is_pos_num "$SCALE" || die "--scale (CELLSCHED_EMU_SCALE) must be a positive number, got '$SCALE'"
[[ $RESTART_S == 0 ]] || is_pos_num "$RESTART_S" || die "--restart-s (CELLSCHED_EMU_RESTART_S) must be a number >= 0, got '$RESTART_S'"

# The GPUs actually granted.
if [[ -z $GPU_TYPE && -n ${SLURMD_NODENAME:-} ]] && command -v scontrol >/dev/null; then
    GPU_TYPE=$(scontrol -o show node "$SLURMD_NODENAME" 2>/dev/null | sed -n 's/.*Gres=gpu:\([A-Za-z0-9_]*\):[0-9].*/\1/p' | head -n1)
fi
[[ -n $GPU_TYPE ]] || die "granted GPU type unknown: give --gpu-type T (no CELLSCHED_GPU_TYPE, no node Gres)"
if [[ -z $GPN ]]; then
    LIST=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
    [[ -n $LIST ]] && GPN=$(awk -F, '{print NF}' <<<"$LIST")
fi
[[ -n $GPN ]] || die "granted GPUs per node unknown: give --gpus-per-node G"
NODES=${NODES:-1}
is_pos_int "$NODES" || die "--nodes must be a positive integer, got '$NODES'"
is_pos_int "$GPN" || die "--gpus-per-node must be a positive integer, got '$GPN'"

# Measured seconds per iteration for (model, batch, type, nodes, GPUs per node).
LOOKUP=$(awk -F, -v m="${MODEL,,}" -v b="$BATCH" -v t="${GPU_TYPE,,}" -v n="$NODES" -v g="$GPN" '
    /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
    !hdr { for (i=1; i<=NF; i++) { gsub(/[[:space:]\r]/, "", $i); c[$i]=i }; hdr=1
           if (!("model" in c) || !("batch" in c) || !("gpu_type" in c) || !("nodes" in c) || !("gpus_per_node" in c) || !("iter_time_s" in c)) { print "badheader"; exit }
           next }
    { for (i=1; i<=NF; i++) gsub(/[[:space:]\r]/, "", $i) }
    tolower($c["model"])==m && $c["batch"]+0==b && tolower($c["gpu_type"])==t && $c["nodes"]+0==n && $c["gpus_per_node"]+0==g { print $c["iter_time_s"]; found=1; exit }
    END { if (!found && hdr) print "missing" }' "$TRUTH")
POINT="model=$MODEL batch=$BATCH gpu_type=$GPU_TYPE nodes=$NODES gpus_per_node=$GPN"
case $LOOKUP in
    badheader) die "truth table '$TRUTH' lacks a column (needs model,batch,gpu_type,nodes,gpus_per_node,iter_time_s)" ;;
    missing|"") echo "emulated-train: error: no measured iteration time for $POINT in $TRUTH; refusing to invent a speed" >&2; exit 4 ;;
esac
[[ $LOOKUP =~ ^-?[0-9.]+([eE][-+]?[0-9]+)?$ ]] || die "truth table '$TRUTH': iter_time_s '$LOOKUP' for $POINT is not a number"
if ! is_pos_num "$LOOKUP"; then
    echo "emulated-train: error: $POINT does not fit in memory (measured, $TRUTH); failing like an out-of-memory run" >&2
    exit 3
fi
ITER_S=$LOOKUP

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
echo "  iter_time_s=$ITER_S (measured: $POINT, $TRUTH) predicted=${CELLSCHED_ITER_TIME_S:--} (injected, not used)"
echo "  iterations=$TOTAL (real $ITERS) scale=$SCALE"

now() { date +%s.%N; }
START=$(now)
PROC_START=$START
RESUMED=0
DONE=0
# Elastic jobs: resume from the checkpoint on a restart; checkpoint and
# exit with the reconfiguration code on the signal.
CKPT=
if [[ -n ${CELLSCHED_CKPT_DIR:-} ]]; then
    CKPT=$CELLSCHED_CKPT_DIR/emulated-train.iter
    if [[ ${CELLSCHED_RESTART:-0} =~ ^[0-9]+$ && ${CELLSCHED_RESTART:-0} -gt 0 && -r $CKPT ]]; then
        SAVED=$(head -c 32 "$CKPT" | tr -dc 0-9)
        if [[ -n $SAVED ]] && (( SAVED <= TOTAL )); then
            DONE=$SAVED
            sleep "$(awk -v r="$RESTART_S" -v s="$SCALE" 'BEGIN{printf "%.3f", r*s}')"
            START=$(now) # the restart's time is lost, not made up by later iterations
            RESUMED=1
            echo "resumed: restart ${CELLSCHED_RESTART} from iteration $DONE/$TOTAL ($CKPT), restart cost ${RESTART_S} s"
        fi
    fi
    checkpoint() {
        echo "$DONE" > "$CKPT.tmp" && mv -f "$CKPT.tmp" "$CKPT"
        echo "checkpoint: iteration $DONE/$TOTAL written to $CKPT on the reconfiguration signal; exiting ${CELLSCHED_RECONF_EXIT:-75}"
        exit "${CELLSCHED_RECONF_EXIT:-75}"
    }
    SIGS="USR1 USR2"
    SIG=${CELLSCHED_DL_ELASTIC:-}
    SIG=${SIG#SIG}
    [[ $SIG =~ ^[A-Z0-9]+$ && $SIG != KILL && $SIG != STOP ]] && SIGS="$SIGS $SIG"
    # shellcheck disable=SC2086
    trap checkpoint $SIGS
fi
# Iterations per sleep: at least 0.5 s of real sleep, at most ~200 chunks.
CHUNK=$(awk -v t="$ITER_S" -v s="$SCALE" -v n="$TOTAL" 'BEGIN{
    c=int(0.5/(t*s)); if (c*t*s<0.5) c++; m=int((n+199)/200); if (m>c) c=m; if (c<1) c=1; print c}')
TARGET=0 # measured (unscaled) seconds of training done so far
while (( DONE < TOTAL )); do
    N=$(( TOTAL - DONE < CHUNK ? TOTAL - DONE : CHUNK ))
    # Iteration-time factor at this progress: 1 - 2/3 * frozen fraction.
    read -r STEP_S TARGET SLEEP < <(awk -v sched="$SCHEDULE" -v done="$DONE" -v n="$N" -v total="$TOTAL" \
        -v t="$ITER_S" -v target="$TARGET" -v s="$SCALE" -v start="$START" -v now="$(now)" 'BEGIN{
        p=done/total; f=0; k=split(sched, steps, ",");
        for (i=1; i<=k; i++) { split(steps[i], pf, ":"); if (p+1e-12 >= pf[1]+0) f=pf[2]+0 }
        it=t*(1-2/3*f); target+=n*it; sl=start+target*s-now; if (sl<0) sl=0;
        printf "%.6f %.6f %.3f\n", it, target, sl}')
    sleep "$SLEEP" &
    wait $! || true
    DONE=$(( DONE + N ))
    if (( ! QUIET )); then
        echo "cellsched-iter $STEP_S"
        if (( RESUMED )); then
            # From the process start to the end of the first iteration after the resume, on the job's clock.
            awk -v e="$(now)" -v st="$PROC_START" -v s="$SCALE" 'BEGIN{printf "cellsched-restart %.3f\n", (e-st)/s}'
            RESUMED=0
        fi
        awk -v d="$DONE" -v n="$TOTAL" -v e="$(now)" -v st="$START" \
            'BEGIN{printf "progress: %d/%d iterations (%.0f%%), %.1f s elapsed\n", d, n, 100*d/n, e-st}'
    fi
done
awk -v e="$(now)" -v st="$START" -v tg="$TARGET" -v n="$TOTAL" \
    'BEGIN{printf "done: %d iterations, %.1f measured s, %.1f s elapsed\n", n, tg, e-st}'

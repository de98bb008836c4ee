#!/usr/bin/env bash
# cellsched demo, from a fresh Debian 12 machine (as root):
#   install deps -> build -> local heterogeneous Slurm cluster up with the
#   cellsched plugins -> a small mixed DL workload (emulated trainers that
#   consume the injected plan, plus one plain job) -> wait -> report.
#
# Truth and knowledge: the emulated trainers run at the iteration times
# Gavel measured (etc/examples/truth-gavel.csv) for the GPUs they were
# granted; the plugins decide with their estimator calibrated on the
# single-GPU points only (bench/truth/gavel-knowledge-1gpu.csv). The demo
# cluster's GPU types are the ones the truth table covers (v100, p100, k80:
# CELLSCHED_CLUSTER_GROUPS), so every Cell has a measured speed. The report compares
# each job's predicted seconds per iteration with its measured ones.
# Takes a few minutes after the first build. Leaves the cluster up to explore.
#
# Usage: scripts/demo.sh [--replay] [--down] [--skip-install] [--skip-build]
#   --replay        also run the live replay benchmark (stock Slurm vs cellsched,
#                   `cellsched bench replay --trace bench/replay/gavel-small.csv`, ~10 min,
#                   on its own v100/p100/k80 cluster in the same directory)
#   --down          bring the cluster down at the end
#   --skip-install  do not run scripts/install-deps.sh
#   --skip-build    use the binaries already in target/release
# Env: CELLSCHED_CLUSTER_DIR, CELLSCHED_PORT_BASE  cluster directory and ports
#      (defaults: ~/.local/state/cellsched/cluster, 17800)
#      CELLSCHED_DEMO_SPEEDUP  predicted seconds per real second (default 30)
#      CELLSCHED_BIN  the cellsched binary (default target/release/cellsched)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
REPLAY=0 DOWN=0 INSTALL=1 BUILD=1
for a in "$@"; do
  case $a in
    --replay) REPLAY=1 ;;
    --down) DOWN=1 ;;
    --skip-install) INSTALL=0 ;;
    --skip-build) BUILD=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep -v '^set' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done
SPEEDUP=${CELLSCHED_DEMO_SPEEDUP:-30}
SCALE=$(awk -v s="$SPEEDUP" 'BEGIN{ if (s+0 <= 0) exit 1; printf "%.6f", 1/s }') ||
  { echo "demo: CELLSCHED_DEMO_SPEEDUP must be a positive number, got '$SPEEDUP'" >&2; exit 2; }
step() { printf '\n=== [%(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { echo "demo: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (the local cluster's daemons and apt need it)"

if [ "$INSTALL" = 1 ]; then
  step "installing dependencies (scripts/install-deps.sh)"
  # Only the packaged release's source tree: the demo builds against it alone.
  CELLSCHED_SLURM_RELEASES=${CELLSCHED_SLURM_RELEASES:-$(scripts/slurm.sh releases --system)} scripts/install-deps.sh
fi
if ! command -v cargo >/dev/null; then
  # shellcheck disable=SC1091
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
if [ "$BUILD" = 1 ]; then
  command -v cargo >/dev/null || die "cargo not found: install Rust >= 1.75 (https://rustup.rs), then rerun"
  step "building (cargo build --release --workspace)"
  cargo build --release --workspace
fi
CS=${CELLSCHED_BIN:-$ROOT/target/release/cellsched}
[ -x "$CS" ] || die "$CS missing: run without --skip-build"

# Knowledge for the plugins: the estimator calibrated with single-GPU measurements.
CONF_DIR=${CELLSCHED_CLUSTER_DIR:-$HOME/.local/state/cellsched/cluster}-demo-etc
mkdir -p "$CONF_DIR"
printf '%s\n' "# Written by scripts/demo.sh." "[placement]" "replan_interval_s = 5" "max_gpus = 8" \
  "[estimator]" "profile_db = \"$ROOT/bench/truth/gavel-knowledge-1gpu.csv\"" \
  > "$CONF_DIR/cellsched.toml"
export CELLSCHED_CLUSTER_TOML=$CONF_DIR/cellsched.toml
# GPU types the truth table covers.
export CELLSCHED_CLUSTER_GROUPS=${CELLSCHED_CLUSTER_GROUPS:-v100:2x8,p100:1x8,k80:1x8}
TRUTH=$ROOT/etc/examples/truth-gavel.csv

step "bringing the local cluster up with the cellsched plugins"
"$CS" cluster up
eval "$("$CS" cluster env)"
"$CS" cluster status | sed -n '/cellsched plugins/,$p'

step "submitting a small mixed DL workload (time scale: 1 real s = $SPEEDUP predicted s)"
TRAIN=$ROOT/etc/examples/emulated-train.sh
OUT=${CELLSCHED_CLUSTER_DIR:-$HOME/.local/state/cellsched/cluster}/demo/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
IDS=()
submit() { # label, sbatch options...
  local label=$1; shift
  local id
  id=$(sbatch --parsable --job-name="demo-$label" --output="$OUT/%j.out" --chdir="$OUT" \
        --time=10 --export=ALL,CELLSCHED_EMU_SCALE="$SCALE",CELLSCHED_EMU_TRUTH="$TRUTH" "$@") || die "sbatch for $label failed"
  id=${id%%;*}
  IDS+=("$id")
  printf '  %-14s job %-5s sbatch %s\n' "$label" "$id" "$*" | sed "s|$TRAIN|emulated-train.sh|"
}
# Each trainer gets its real model, batch and iteration count; its speed
# comes from the truth table for the GPUs it is granted.
# The plugins choose the Cell (GPU type, count, stages) and the plan.
submit resnet50   --dl-model=resnet50 --dl-batch=128 --dl-iters=3000 --dl-cell=auto "$TRAIN" --model resnet50 --batch 128 --iters 3000
submit xformer    --dl-model=transformer_multi30k --dl-batch=128 --dl-iters=6000 "$TRAIN" --model transformer_multi30k --batch 128 --iters 6000
submit lstm       --dl-model=lstm_wikitext2 --dl-batch=80 --dl-iters=40000 "$TRAIN" --model lstm_wikitext2 --batch 80 --iters 40000
submit resnet18   --dl-model=resnet18_cifar --dl-batch=128 --dl-iters=20000 "$TRAIN" --model resnet18_cifar --batch 128 --iters 20000
submit resnet50-frz --dl-model=resnet50 --dl-batch=128 --dl-iters=2000 --dl-freeze=auto "$TRAIN" --model resnet50 --batch 128 --iters 2000
# The user pins the Cell: cellsched only orders the job and picks its plan.
submit xformer-pin --dl-model=transformer_multi30k --dl-batch=128 --dl-iters=4000 --dl-cell=v100x4 "$TRAIN" --model transformer_multi30k --batch 128 --iters 4000
# A plain job: no DL options, stock Slurm behaviour, no cellsched variables.
submit plain-gpu  --gres=gpu:k80:1 --wrap='env | grep -c ^CELLSCHED_ || true; sleep 5'

step "waiting for the ${#IDS[@]} jobs"
LIST=$(IFS=,; echo "${IDS[*]}")
START=$(date +%s)
while :; do
  STATES=$(squeue -h -j "$LIST" -o %T 2>/dev/null | sort | uniq -c | awk '{printf "%s %s  ", $1, tolower($2)}')
  [ -z "$STATES" ] && break
  ELAPSED=$(( $(date +%s) - START ))
  printf '  %4ds  %s\n' "$ELAPSED" "$STATES"
  [ "$ELAPSED" -lt 900 ] || { echo "  still running after 15 min; cancelling"; scancel "${IDS[@]}" || true; break; }
  sleep 5
done
# slurmctld reports job ends to slurmdbd asynchronously.
for _ in $(seq 15); do
  [ "$(sacct -n -X -j "$LIST" -o End 2>/dev/null | grep -c Unknown)" = 0 ] && break
  sleep 2
done

step "report (cellsched report --jobs $LIST --time-scale $SCALE --iter-log '$OUT/%j.out')"
echo "truth: $TRUTH (Gavel's measured iteration times); knowledge: the plugins' estimator calibrated with bench/truth/gavel-knowledge-1gpu.csv"
"$CS" report --jobs "$LIST" --time-scale "$SCALE" --iter-log "$OUT/%j.out"
echo
echo "Plan seen by the first job (its output, $OUT):"
sed -n '1,6p' "$OUT/${IDS[0]}.out" 2>/dev/null || true

if [ "$REPLAY" = 1 ]; then
  step "live replay benchmark: stock Slurm vs cellsched (cellsched bench replay)"
  "$CS" cluster down
  "$CS" bench replay --trace bench/replay/gavel-small.csv --keep-up
fi

if [ "$DOWN" = 1 ]; then
  step "bringing the cluster down"
  "$CS" cluster down --cancel-jobs
else
  cat <<EOF

The cluster is still up. Explore it:
  eval "\$(target/release/cellsched cluster env)"
  squeue; sinfo; sacct -o JobID,JobName,AllocTRES,AdminComment%90
  target/release/cellsched report            # every job so far
  sbatch --help | grep -A1 dl-               # the [cellsched] options
Bring it down with:
  target/release/cellsched cluster down
EOF
fi

#!/usr/bin/env bash
# cellsched demo, from a fresh Debian 12 machine (as root):
#   install deps -> build -> local heterogeneous Slurm cluster up with the
#   cellsched plugins -> a small mixed DL workload (emulated trainers that
#   consume the injected plan, plus one plain job) -> wait -> report.
# Takes a few minutes after the first build. Leaves the cluster up to explore.
#
# Usage: scripts/demo.sh [--replay] [--down] [--skip-install] [--skip-build]
#   --replay        also run the live replay benchmark (stock Slurm vs cellsched,
#                   `cellsched bench replay --trace bench/replay/small.csv`, ~8 min)
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
  CELLSCHED_SKIP_2411=${CELLSCHED_SKIP_2411:-1} scripts/install-deps.sh
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
  local id tags="" a
  # Model/batch tags for `cellsched report`; time_scale= tells it the emulated
  # clock runs $SPEEDUP times faster, so predicted and actual run times compare.
  for a in "$@"; do
    case $a in --dl-model=*) tags+="model=${a#*=} " ;; --dl-batch=*) tags+="batch=${a#*=} " ;; esac
  done
  id=$(sbatch --parsable --job-name="demo-$label" --output="$OUT/$label-%j.out" --chdir="$OUT" \
        --time=10 --comment="demo ${tags}time_scale=$SCALE" --export=ALL,CELLSCHED_EMU_SCALE="$SCALE" "$@") || die "sbatch for $label failed"
  id=${id%%;*}
  IDS+=("$id")
  printf '  %-14s job %-5s sbatch %s\n' "$label" "$id" "$*" | sed "s|$TRAIN|emulated-train.sh|"
}
# The plugins choose the Cell (GPU type, count, stages) and the plan.
submit gpt-350m   --dl-model=gpt__350M --dl-batch=64 --dl-iters=1500 --dl-cell=auto "$TRAIN"
submit bert-760m  --dl-model=bert__760M --dl-batch=64 --dl-iters=1200 "$TRAIN"
submit resnet50   --dl-model=resnet50 --dl-batch=256 --dl-iters=8000 "$TRAIN"
submit moe-690m   --dl-model=moe__690M --dl-batch=64 --dl-iters=3000 --dl-freeze=auto "$TRAIN"
submit wrn-500m   --dl-model=wide_resnet__500M --dl-batch=128 --dl-iters=4000 "$TRAIN"
submit gpt-1.3b   --dl-model=gpt__1.3B --dl-batch=32 --dl-iters=400 --dl-freeze=conservative "$TRAIN"
submit xformer    --dl-model=transformer_multi30k --dl-batch=128 --dl-iters=10000 "$TRAIN"
# The user pins the Cell: cellsched only orders the job and picks its plan.
submit bert-pinned --dl-model=bert__760M --dl-batch=64 --dl-iters=800 --dl-cell=v100x8 "$TRAIN"
# A plain job: no DL options, stock Slurm behaviour, no cellsched variables.
submit plain-gpu  --gres=gpu:a10:1 --wrap='env | grep -c ^CELLSCHED_ || true; sleep 5'

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

step "report (cellsched report --jobs $LIST)"
"$CS" report --jobs "$LIST"
echo
echo "Plan seen by the first job (its output, $OUT):"
sed -n '1,5p' "$OUT"/gpt-350m-*.out 2>/dev/null || true

if [ "$REPLAY" = 1 ]; then
  step "live replay benchmark: stock Slurm vs cellsched (cellsched bench replay)"
  "$CS" bench replay --trace bench/replay/small.csv --keep-up
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

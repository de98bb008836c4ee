#!/bin/bash
# cellsched: profile every GPU type of the cluster and merge the results into
# the estimator's profile database.
#
#   etc/profile/submit-all.sh OUT_DIR PROFILE_DB [TYPE...]
#
# Submits etc/profile-gpus.sbatch once per GPU type (default: every type in
# the nodes' gres, from `scontrol show nodes`), each on `--constraint=TYPE`
# with all GPUs of one node, then a dependent job that runs
#   cellsched profile import OUT_DIR/profile-*.csv --db PROFILE_DB
# PROFILE_DB is replaced atomically; point the plugins' cellsched.toml at it.
# Environment passed through to the jobs: CELLSCHED_PROFILE_WORKLOADS,
# CELLSCHED_PROFILE_DURATION, CELLSCHED_PROFILE_ITERS, CELLSCHED_PROFILE_NO_NVML.
set -euo pipefail
OUT=${1:?usage: submit-all.sh OUT_DIR PROFILE_DB [TYPE...]}
DB=${2:?usage: submit-all.sh OUT_DIR PROFILE_DB [TYPE...]}
shift 2
HERE=$(cd "$(dirname "$0")/../.." && pwd)
CELLSCHED=${CELLSCHED:-$(command -v cellsched || echo "$HERE/target/release/cellsched")}
mkdir -p "$OUT"

# GPU type -> GPUs per node (largest seen), from the nodes' Gres=gpu:TYPE:N.
declare -A PER_NODE
while read -r t n; do
    [[ -z "$t" ]] && continue
    if [[ -z "${PER_NODE[$t]:-}" || "$n" -gt "${PER_NODE[$t]}" ]]; then PER_NODE[$t]=$n; fi
done < <(scontrol show nodes --oneliner | grep -o 'Gres=[^ ]*' | tr ',' '\n' |
         sed -n 's/^\(Gres=\)\{0,1\}gpu:\([A-Za-z0-9_-]*\):\([0-9]*\).*/\2 \3/p')
TYPES=("$@")
[[ ${#TYPES[@]} -eq 0 ]] && TYPES=("${!PER_NODE[@]}")
[[ ${#TYPES[@]} -eq 0 ]] && { echo "no typed GPUs found in scontrol show nodes" >&2; exit 1; }

ids=()
for t in "${TYPES[@]}"; do
    n=${PER_NODE[$t]:-1}
    id=$(cd "$HERE" && sbatch --parsable --constraint="$t" --gres="gpu:$t:$n" --output="$OUT/profile-$t-%j.out" \
        --export="ALL,CELLSCHED=$CELLSCHED,CELLSCHED_PROFILE_OUT=$OUT,CELLSCHED_PROFILE_TYPE=$t" etc/profile-gpus.sbatch)
    echo "profiling $t ($n GPUs per node): job $id"
    ids+=("$id")
done
dep=$(IFS=:; echo "${ids[*]}")
mid=$(sbatch --parsable --job-name=cellsched-profile-merge --dependency="afterany:$dep" --time=00:10:00 \
    --output="$OUT/merge-%j.out" \
    --wrap="$CELLSCHED profile import $OUT/profile-*.csv --db $DB")
echo "merge into $DB: job $mid (after ${ids[*]})"

#!/usr/bin/env bash
# Load sweep (issue 33): cellsched with the product defaults against gavel,
# srtf, tiresias and its own ablations, on clusters from 4x larger than
# bench/gavel-cluster.toml (light load) to 8x smaller (overload).
#   Philly traces: truth = Gavel-measured iteration times, knowledge = the
#   estimator calibrated with the single-GPU points.
#   Synthetic traces (`cellsched sim generate`, seeds in SEEDS): truth =
#   Gavel-measured times, knowledge = the datasheet estimator.
#   Reconfigurations of elastic jobs: truth = the measured save and restart
#   times of bench/truth/h200-restart.csv by checkpoint size, knowledge = the
#   [elastic] cost model.
# Prints `bench table` per trace (avg, p99 JCT, makespan, GPU-hours,
# reconfigurations per job and restart hours per policy) and, per cell,
# cellsched's average JCT over the best other run.
# Elastic jobs (--dl-elastic, reconfigured by core::elastic): ELASTIC_JOBS=all
# makes every job elastic, =none none, =trace (default) follows the traces
# (the Philly traces have none; synthetic ones get ELASTIC_SHARE, default 0).
# TRUTH=bench/truth/gavel-truth-consistent.csv runs the same sweep on the truth without Gavel's
# self-contradicting multi-GPU points (`cellsched sim gavel-truth --consistent-output`; those Cells are
# then estimated, counted as "missing"): how much a result rests on them.
# LEARN_AFTER=SECONDS: the knowledge learns each run's measured iteration time
# that long after it starts (`cellsched sim --learn-after`: a site importing
# its jobs' measurements, `cellsched report --profile-rows`); default: it does not.
# REPLICAS=N: each cell runs the trace and N-1 replicas with every submission
# moved by up to JITTER_S seconds (default 60); tables and verdicts use the
# geometric mean over the runs (`bench table --replicas`), the summary lines
# the spread of cellsched / best other over them. Default 1 (one run).
# Usage: bench/load-sweep.sh [OUTDIR]
#   (env: CELLSCHED=binary, SEEDS="1 2 3", ELASTIC_JOBS=trace|all|none, ELASTIC_SHARE=0,
#    TRUTH=bench/truth/gavel-truth.csv, LEARN_AFTER=, REPLICAS=1, JITTER_S=60)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CELLSCHED:-target/release/cellsched}
OUT=${1:-$(mktemp -d /tmp/cellsched-load-sweep.XXXXXX)}
SEEDS=${SEEDS:-"1 2 3"}
SIZES="--grow 4,2 --shrink 1,2,4,8"
ELASTIC="--elastic-jobs ${ELASTIC_JOBS:-trace}${LEARN_AFTER:+ --learn-after $LEARN_AFTER} --replicas ${REPLICAS:-1} --jitter-s ${JITTER_S:-60}"
mkdir -p "$OUT"
RT="--restart-truth bench/truth/h200-restart.csv"
TRUTH=${TRUTH:-bench/truth/gavel-truth.csv}
T="--truth $TRUTH --db bench/truth/gavel-knowledge-1gpu.csv $RT"
"$BIN" bench table --cluster bench/gavel-cluster.toml $SIZES $T $ELASTIC \
  --trace bench/truth/philly-0e4a51.csv --trace bench/truth/philly-103959.csv --trace bench/truth/philly-2869ce.csv \
  | tee "$OUT/philly.txt"
for s in $SEEDS; do
  "$BIN" sim generate --cluster bench/gavel-cluster.toml --jobs 1000 --load 0.9 --seed "$s" --due-share 0.3 \
    --elastic-share "${ELASTIC_SHARE:-0}" --output "$OUT/synth-$s.csv" 2>/dev/null
  "$BIN" bench table --cluster bench/gavel-cluster.toml $SIZES --truth "$TRUTH" $RT $ELASTIC \
    --trace "$OUT/synth-$s.csv" | tee "$OUT/synth-$s.txt"
done
echo
echo "== summary ($OUT)"
grep -h "avg JCT / best other" "$OUT"/*.txt
grep -h "within" "$OUT"/*.txt

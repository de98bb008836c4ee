#!/usr/bin/env bash
# Benchmark (not a test): soak of a live slurmctld with cellsched's plugins.
# N jobs go through submit and end (default 100,000): half DL jobs (the
# CELLSCHED_DL_* option variables, placed by job_submit, ranked by
# site_factor, re-planned), half plain `--gres=gpu:1` jobs, all
# `-t 1 --wrap true`. Jobs that find free GPUs run and complete; while more
# than QUEUE jobs are pending, a reaper cancels the oldest pending ones, so
# the queue stays near QUEUE and every job ends (a fast clock: each job's
# whole life takes seconds, not hours). slurmctld's RSS is sampled with
# sdiag's submitted/completed/cancelled counts; after the warm-up (the first
# WARMUP% of the jobs submitted) RSS must stay within +-5% of its mean.
#
# Usage: bench/soak.sh [N_JOBS]                  (default 100000)
# Env:   CELLSCHED_SOAK_DIR        cluster dir (default /tmp/cs-soak)
#        CELLSCHED_SOAK_PORT_BASE  port base (default 18400)
#        CELLSCHED_SOAK_PARALLEL   parallel submitters (default 4)
#        CELLSCHED_SOAK_QUEUE      pending jobs kept at most (default 500)
#        CELLSCHED_SOAK_SAMPLE_S   seconds between RSS samples (default 10)
#        CELLSCHED_SOAK_WARMUP     warm-up, % of N_JOBS submitted (default 20)
#        CELLSCHED_SOAK_MAX_S      stop submitting after this many seconds (default 0: no
#                                  limit); the summary counts the jobs actually submitted
#        CELLSCHED_SOAK_PLUGINS=0  stock Slurm (`cluster up --no-plugins`), for comparison
#        CELLSCHED_SOAK_RATE       fixed submit rate in jobs/s (e.g. 22 or 12.5; default 0: free-running
#                                  submitters, as fast as sbatch goes). Paced: job i is due at
#                                  t0 + (i-1)/RATE and the PARALLEL submitters take every PARALLEL-th
#                                  job; a submitter that falls behind submits at once (no burst to
#                                  catch up beyond its own backlog) and the summary counts late jobs.
#                                  At a fixed rate the ended job records slurmctld keeps (MinJobAge)
#                                  stay constant, so RSS growth is not mistaken for record growth.
# The daemons inherit this script's environment (through `cellsched cluster up`): e.g.
# MALLOC_ARENA_MAX=2 bounds glibc's per-thread malloc arenas in slurmctld, whose RSS
# otherwise climbs for tens of thousands of jobs as each arena reaches its own
# high-water mark (stock Slurm and the plugins alike; README, "Live soak").
# Output: one line per sample (time, submitted, completed, cancelled,
# pending, RSS KiB, job records slurmctld holds) in $DIR.samples, the
# summary on stdout and in $DIR.results.
# Needs: cargo build --release -p cellsched -p site_factor_cellsched -p job_submit_cellsched -p spank_cellsched
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLI=$ROOT/target/release/cellsched
N=${1:-100000}
DIR=${CELLSCHED_SOAK_DIR:-/tmp/cs-soak}
PB=${CELLSCHED_SOAK_PORT_BASE:-18400}
PAR=${CELLSCHED_SOAK_PARALLEL:-4}
QUEUE=${CELLSCHED_SOAK_QUEUE:-500}
SAMPLE_S=${CELLSCHED_SOAK_SAMPLE_S:-10}
WARMUP=${CELLSCHED_SOAK_WARMUP:-20}
PLUGINS=${CELLSCHED_SOAK_PLUGINS:-1}
MAX_S=${CELLSCHED_SOAK_MAX_S:-0}
RATE=${CELLSCHED_SOAK_RATE:-0}
case $RATE in '' | *[!0-9.]* | *.*.* | .) echo "soak.sh: CELLSCHED_SOAK_RATE must be a number of jobs/s, got '$RATE'" >&2; exit 2 ;; esac
# Microseconds between two due times (0: free-running).
INTERVAL_US=$(awk -v r="$RATE" 'BEGIN { printf "%d", (r > 0) ? 1e6 / r : 0 }')
for v in N PAR QUEUE SAMPLE_S WARMUP PLUGINS MAX_S; do
  case ${!v} in '' | *[!0-9]*) echo "soak.sh: $v must be a number, got '${!v}'" >&2; exit 2 ;; esac
done
[ "$N" -ge "$PAR" ] && [ "$PAR" -ge 1 ] && [ "$WARMUP" -lt 100 ] || { echo "soak.sh: need N_JOBS >= PARALLEL >= 1 and WARMUP < 100" >&2; exit 2; }
[ -x "$CLI" ] || { echo "soak.sh: $CLI missing; run cargo build --release -p cellsched first" >&2; exit 2; }

args=(--dir "$DIR" --port-base "$PB")
[ "$PLUGINS" = 1 ] || args+=(--no-plugins)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  "$CLI" cluster down --cancel-jobs "${args[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$CLI" cluster down --cancel-jobs "${args[@]}" >/dev/null 2>&1 || true
rm -rf "$DIR/state"
"$CLI" cluster up "${args[@]}" >&2
eval "$("$CLI" cluster env "${args[@]}")"
mkdir -p "$DIR/jobs"
cd "$DIR/jobs"
CTLD_PID=$(cat "$DIR/run/slurmctld.pid")

# sdiag counter "Jobs <what>:" (the first, cumulative section).
counter() { awk -v k="Jobs $2:" 'index($0, k) == 1 { print $3 + 0; exit }' "$1"; }

sample() { # -> "t submitted completed cancelled pending rss_kb records"
  local f="$DIR/sdiag.txt" q="$DIR/squeue.txt"
  sdiag >"$f" 2>/dev/null || return 1
  squeue -h -t all -o '%i %t' >"$q" 2>/dev/null || return 1
  printf '%s %s %s %s %s %s %s\n' "$(date +%s)" "$(counter "$f" submitted)" "$(counter "$f" completed)" \
    "$(counter "$f" canceled)" "$(awk '$2 == "PD"' "$q" | wc -l)" "$(ps -o rss= -p "$CTLD_PID" | tr -d ' ')" \
    "$(wc -l <"$q")"
}

submit_one() { # i
  local i=$1
  if ((i % 2)); then
    CELLSCHED_DL_MODEL=$([ $((i % 4)) = 1 ] && echo gpt2 || echo bert_large) CELLSCHED_DL_BATCH=32 \
      CELLSCHED_DL_ITERS=$((1000 + i % 5000)) sbatch -Q -J "soak-dl" -t 1 --gres=gpu:1 -o /dev/null --wrap true >/dev/null || true
  else
    sbatch -Q -J "soak-plain" -t 1 --gres=gpu:1 -o /dev/null --wrap true >/dev/null || true
  fi
}

submit_range() { # from to: free-running
  local i
  for ((i = $1; i <= $2; i++)); do
    if ((MAX_S > 0 && i % 16 == 0)) && (($(date +%s) >= DEADLINE)); then return 0; fi
    submit_one "$i"
  done
}

submit_paced() { # k: this submitter takes jobs k, k+PAR, k+2*PAR, ... each at its due time
  local i due now wait late=0 max_lag=0 lag
  for ((i = $1; i <= N; i += PAR)); do
    if ((MAX_S > 0)) && ((${EPOCHREALTIME%.*} >= DEADLINE)); then break; fi
    due=$((T0_US + (i - 1) * INTERVAL_US))
    now=${EPOCHREALTIME/./}
    wait=$((due - now))
    if ((wait > 0)); then
      sleep "$((wait / 1000000)).$(printf '%06d' $((wait % 1000000)))"
    else
      lag=$((-wait)); late=$((late + 1)); ((lag <= max_lag)) || max_lag=$lag
    fi
    submit_one "$i"
  done
  echo "$late $max_lag" >"$DIR/paced.$1"
}

reap() { # cancels the oldest pending jobs past QUEUE, forever
  local n
  while sleep 2; do
    n=$(squeue -h -t PD -o %i 2>/dev/null | wc -l) || continue
    ((n > QUEUE)) || continue
    squeue -h -t PD -o %i --sort=i | head -n $((n - QUEUE)) | xargs -r scancel 2>/dev/null || true
  done
}

: >"$DIR.samples"
( while sample >>"$DIR.samples"; do sleep "$SAMPLE_S"; done ) &
PIDS+=($!)
reap &
PIDS+=($!)
echo "== soak: $N jobs ($PAR submitters, rate $( ((INTERVAL_US > 0)) && echo "$RATE jobs/s" || echo free-running), queue kept at $QUEUE, plugins=$PLUGINS); samples in $DIR.samples" >&2
t0=$(date +%s)
T0_US=${EPOCHREALTIME/./}
DEADLINE=$((t0 + MAX_S))
subs=()
rm -f "$DIR"/paced.*
if ((INTERVAL_US > 0)); then
  for ((k = 1; k <= PAR; k++)); do
    submit_paced "$k" &
    subs+=($!)
  done
else
  per=$(((N + PAR - 1) / PAR))
  for ((from = 1; from <= N; from += per)); do
    to=$((from + per - 1)); ((to <= N)) || to=$N
    submit_range "$from" "$to" &
    subs+=($!)
  done
fi
for p in "${subs[@]}"; do wait "$p"; done
submit_s=$(($(date +%s) - t0))
echo "== soak: submitted in $submit_s s; letting the queue drain" >&2
late=0; max_lag_us=0
if ((INTERVAL_US > 0)); then
  for f in "$DIR"/paced.*; do
    read -r l m <"$f"; late=$((late + l)); ((m <= max_lag_us)) || max_lag_us=$m
  done
fi
# Every job ends: running ones complete, pending ones are cancelled.
t=0
while [ -n "$(squeue -h -o %i | head -n 1)" ]; do
  scancel --state=PENDING --user="$(id -un)" 2>/dev/null || true
  sleep 2; t=$((t + 2))
  [ $t -lt 300 ] || { echo "soak.sh: jobs still queued after 300 s" >&2; squeue >&2; exit 1; }
done
sleep "$SAMPLE_S"
sample >>"$DIR.samples"
elapsed=$(($(date +%s) - t0))

# Summary: samples taken once WARMUP% of the jobs were submitted.
awk -v w="$WARMUP" -v el="$elapsed" -v rate="$RATE" -v sub_s="$submit_s" -v late="$late" -v lag="$max_lag_us" '
  { t[NR] = $1; sub_[NR] = $2; done_[NR] = $3 + $4; rss[NR] = $6; rec[NR] = $7 }
  END {
    last = NR; n = sub_[last]
    for (i = 1; i <= NR; i++) if (sub_[i] >= n * w / 100) { first = i; break }
    if (!first || last - first < 2) { print "too few samples after the warm-up"; exit 1 }
    min = max = rss[first]; s = 0; k = 0
    for (i = first; i <= last; i++) { s += rss[i]; k++; if (rss[i] < min) min = rss[i]; if (rss[i] > max) max = rss[i] }
    mean = s / k
    printf "jobs_submitted %d\njobs_ended %d\nelapsed_s %d\nrss_start_kb %d\nrss_after_warmup_kb %d\nrss_end_kb %d\n", sub_[last], done_[last], el, rss[1], rss[first], rss[last]
    printf "rss_samples_after_warmup %d\nrss_mean_kb %.0f\nrss_min_kb %d\nrss_max_kb %d\nrss_min_pct %+.1f\nrss_max_pct %+.1f\n", k, mean, min, max, (min / mean - 1) * 100, (max / mean - 1) * 100
    rmin = rmax = rec[first]; rs = 0
    for (i = first; i <= last - 1; i++) { rs += rec[i]; if (rec[i] < rmin) rmin = rec[i]; if (rec[i] > rmax) rmax = rec[i] }
    if (last - first >= 1) printf "records_after_warmup_mean %.0f\nrecords_after_warmup_min %d\nrecords_after_warmup_max %d\n", rs / (last - first), rmin, rmax
    printf "rate_target %s\nrate_achieved %.1f\nsubmit_s %d\n", (rate > 0) ? rate : "free-running", (sub_s > 0) ? sub_[last] / sub_s : 0, sub_s
    if (rate > 0) printf("late_submits %d\nmax_lag_ms %.0f\n", late, lag / 1000)
    printf "flat_within_5pct %s\n", (min >= mean * 0.95 && max <= mean * 1.05) ? "yes" : "no"
  }' "$DIR.samples" | tee "$DIR.results"

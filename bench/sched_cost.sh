#!/usr/bin/env bash
# Benchmark (not a test): slurmctld's scheduling cost with and without
# cellsched's plugins at thousands of pending jobs.
#
# For each mode (stock = `cluster up --no-plugins`, plugins = site_factor +
# job_submit + SPANK) on its own local cluster: fill every GPU with blocker
# jobs, submit N jobs that stay pending (half "DL" jobs carrying the
# CELLSCHED_DL_* option variables — ignored by stock Slurm, placed and
# ordered by cellsched —, half plain `--gres=gpu:1` jobs), reset sdiag, let
# the schedulers run for a window covering at least one PriorityCalcPeriod,
# then read sdiag (main scheduler and backfill cycle mean/max, submit RPC
# mean) and, in plugin mode, the plugins' own debug timings from the log
# (site_factor update under the job write lock, re-planning snapshot under
# the read locks). Prints both modes and the plugin/stock ratios.
#
# Usage: bench/sched_cost.sh [N_JOBS]         (default 3000)
# Env:   CELLSCHED_BENCH_NODES      nodes (default 5: the standard local cluster,
#                                   one slurmd per node); more gives an emulated
#                                   cluster (`cellsched cluster up --nodes N`: 40%
#                                   a100x8, 40% v100x8, 20% a10x4, one front-end
#                                   slurmd; needs scripts/slurm.sh build 22.05.8 front-end)
#        CELLSCHED_BENCH_DIR        cluster dir prefix (default /tmp/cs-bench-sched)
#        CELLSCHED_BENCH_PORT_BASE  port base (default 18300)
#        CELLSCHED_BENCH_WINDOW_S   measuring window in seconds (default 75)
#        CELLSCHED_BENCH_PARALLEL   parallel submitters (default 4)
#        CELLSCHED_BENCH_SCHED_PARAMS  slurm.conf SchedulerParameters for both modes (default: the
#                                   test cluster's fast cycles, sched_interval=2,bf_interval=1,
#                                   bf_resolution=1,sched_min_interval=100000: backfill every
#                                   second, as deep as 1 s allows). "sched_interval=2,sched_min_interval=100000" keeps the
#                                   main scheduler's 2 s and Slurm's default backfill (every 30 s,
#                                   up to 500 jobs, bf_resolution 60), as a production cluster runs it
#        CELLSCHED_BENCH_MODES      modes to run (default "stock plugins"; the ratio
#                                   column needs both). DIAGNOSTIC mode "stock-rewritten"
#                                   (never a baseline): stock Slurm (no plugins) given each
#                                   DL job already in the form job_submit/cellsched writes
#                                   on this bench (-C a100 -N 1 --gres=gpu:1, the time limit
#                                   from declared work, then the AdminComment set by
#                                   `scontrol update`; only the plugins' spank_job_env
#                                   entries are missing): slurmctld's own cost of the
#                                   rewritten requests, without the plugins' code or memory.
#                                   DIAGNOSTIC mode "plugins-submit-only": the plugins with
#                                   re-planning ([placement] replan = false) and ordering
#                                   ([ordering] enabled = false) off before the submissions:
#                                   submit-time placement and the SPANK entries without the
#                                   two background threads' caches
#        CELLSCHED_BENCH_TRIM=1     after the window, also make slurmctld return its free heap
#                                   pages (gdb: malloc_trim(0)) and report that RSS
#                                   (ctld_rss_trimmed_kb): memory in use, without what the
#                                   allocator keeps; and, before the trim, glibc's own count
#                                   of bytes in use and bytes taken from the system over all
#                                   arenas (gdb: malloc_stats(); malloc_in_use_kb,
#                                   malloc_system_kb); needs gdb. On an emulated cluster also
#                                   gres_select_jobs/gres_select_kb: pending jobs holding
#                                   cons_tres's per-job GRES selection arrays, and their bytes
#                                   (bench/diag/gres_select.c, loaded by gdb; needs gcc), and
#                                   how scattered the pending jobs' records are, which the
#                                   main scheduler walks every cycle (bench/diag/job_locality.c):
#                                   job_pages, distinct 4 KiB pages holding the pending jobs'
#                                   records, details, step lists and select jobinfo;
#                                   jobs_details_near / jobs_steps_near, jobs whose details /
#                                   step list lie within 4 KiB of their record; jobs_next_near,
#                                   jobs within 64 KiB of the previous pending job's record
#        CELLSCHED_BENCH_SIDE_BY_SIDE=1  run the modes at the same time, each on its own cluster
#                                   (port bases PORT_BASE, +20, ...), submitting together and
#                                   measuring in one common window: the ratio then compares
#                                   the modes under the same machine load. On this 2-core VM the
#                                   load of the machine moves between runs minutes apart by more
#                                   than the 5-20% the goals are about
#        CELLSCHED_BENCH_PERF=1     also sample slurmctld with `perf record -g` (199 Hz)
#                                   during the window; `perf report` goes to
#                                   $CELLSCHED_BENCH_DIR-<mode>.perf.txt
#        CELLSCHED_BENCH_ELASTIC_SHARE  percent of the DL jobs that opt in to
#                                   reconfiguration (CELLSCHED_DL_ELASTIC=USR1; default 0):
#                                   the elastic thread's snapshot then copies them and its
#                                   pass builds and weighs them (log line "elastic pass over")
#        CELLSCHED_BENCH_ELASTIC_INTERVAL_S  plugins: `[elastic] interval_s` for the run
#                                   (appended to the cluster's cellsched.toml before the
#                                   submissions; default: the file's, 60 s)
# Needs: cargo build --release -p cellsched -p site_factor_cellsched -p job_submit_cellsched -p spank_cellsched
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLI=$ROOT/target/release/cellsched
N=${1:-3000}
NODES=${CELLSCHED_BENCH_NODES:-5}
DIR=${CELLSCHED_BENCH_DIR:-/tmp/cs-bench-sched}
PB=${CELLSCHED_BENCH_PORT_BASE:-18300}
WINDOW=${CELLSCHED_BENCH_WINDOW_S:-75}
SCHED_PARAMS=${CELLSCHED_BENCH_SCHED_PARAMS:-}
PAR=${CELLSCHED_BENCH_PARALLEL:-4}
ELASTIC_SHARE=${CELLSCHED_BENCH_ELASTIC_SHARE:-0}
ELASTIC_INTERVAL=${CELLSCHED_BENCH_ELASTIC_INTERVAL_S:-}

case $N in '' | *[!0-9]*) echo "sched_cost.sh: N_JOBS must be a number, got '$N'" >&2; exit 2 ;; esac
case $NODES in '' | *[!0-9]*) echo "sched_cost.sh: CELLSCHED_BENCH_NODES must be a number, got '$NODES'" >&2; exit 2 ;; esac
case $ELASTIC_SHARE in '' | *[!0-9]*) echo "sched_cost.sh: CELLSCHED_BENCH_ELASTIC_SHARE must be a percent 0-100, got '$ELASTIC_SHARE'" >&2; exit 2 ;; esac
[ "$ELASTIC_SHARE" -le 100 ] || { echo "sched_cost.sh: CELLSCHED_BENCH_ELASTIC_SHARE must be a percent 0-100, got '$ELASTIC_SHARE'" >&2; exit 2; }
case $ELASTIC_INTERVAL in '' | [1-9] | [1-9][0-9]*) ;; *) echo "sched_cost.sh: CELLSCHED_BENCH_ELASTIC_INTERVAL_S must be a number of seconds >= 1, got '$ELASTIC_INTERVAL'" >&2; exit 2 ;; esac
[ -x "$CLI" ] || { echo "sched_cost.sh: $CLI missing; run cargo build --release -p cellsched first" >&2; exit 2; }
for so in site_factor job_submit spank; do
  [ -f "$ROOT/target/release/lib${so}_cellsched.so" ] || {
    echo "sched_cost.sh: target/release/lib${so}_cellsched.so missing; cargo build --release -p ${so}_cellsched" >&2
    exit 2
  }
done

SIDE=${CELLSCHED_BENCH_SIDE_BY_SIDE:-0}
case $SIDE in 0 | 1) ;; *) echo "sched_cost.sh: CELLSCHED_BENCH_SIDE_BY_SIDE must be 0 or 1, got '$SIDE'" >&2; exit 2 ;; esac

UP_DIR=""
MODE_PB=$PB
cleanup() { [ -n "$UP_DIR" ] && "$CLI" cluster down --cancel-jobs --dir "$UP_DIR" --port-base "$MODE_PB" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# Value of "KEY:" inside the sdiag section starting with SECTION (first match).
sdiag_field() { # file section key
  awk -v sec="$2" -v key="$3" '
    index($0, sec) == 1 { on = 1; next }
    on && /^[^\t ]/ { on = 0 }
    on { line = $0; sub(/^[\t ]+/, "", line)
         if (index(line, key ":") == 1) { sub(/^[^:]*:[ \t]*/, "", line); print line + 0; exit } }' "$1"
}

# Builds bench/diag/NAME.c, has gdb load it into slurmctld PID (stopped while
# gdb holds it) and call cellsched_diag_NAME("DIR/NAME.txt"), the file its one
# line goes to; fails when nothing was written. Built against the front-end
# tree, whose config.h matches only the emulated clusters' slurmctld. Each
# mode builds into its own cluster DIR (side by side, two modes build at once).
FE_BUILD=/opt/cellsched/build/slurm-22.05.8-fe
ctld_diag() { # name pid dir
  local so="$3/$1.so" out="$3/$1.txt"
  rm -f "$out"
  [ -f "$FE_BUILD/config.h" ] && gcc -shared -fPIC -O2 -I"$FE_BUILD" -o "$so" "$ROOT/bench/diag/$1.c" 2>/dev/null || return 1
  timeout 60 gdb -p "$2" -batch -ex "call (void *) dlopen(\"$so\", 2)" -ex "call (long) cellsched_diag_$1(\"$out\")" >/dev/null 2>&1 || true
  [ -s "$out" ]
}

# Submits jobs FROM..TO of this mode (odd = DL, even = plain).
submit_range() { # mode from to
  local i mode=$1
  shift
  for ((i = $1; i <= $2; i++)); do
    if ((i % 2)) && [ "$mode" = stock-rewritten ]; then
      # Diagnostic: the DL job as job_submit/cellsched rewrites it on this bench
      # (every DL job is placed on a100x1x1 there; limit = iters x iter_s x 3 + 1800 s).
      local model iter_s mb limit id
      if [ $((i % 4)) = 1 ]; then model=gpt2_xl iter_s=2.294467 mb=4; else model=bert_large iter_s=0.288089 mb=1; fi
      limit=$(awk -v n=$((1000 + i)) -v s=$iter_s 'BEGIN { m = (n * s * 3 + 1800) / 60; printf "%d", (m == int(m)) ? m : int(m) + 1 }')
      id=$(CELLSCHED_DL_MODEL=$([ $((i % 4)) = 1 ] && echo gpt2 || echo bert_large) CELLSCHED_DL_BATCH=32 \
        CELLSCHED_DL_ITERS=$((1000 + i)) sbatch --parsable -J "bench-dl-$i" -C a100 -N 1 -t "$limit" --gres=gpu:1 --wrap true)
      scontrol update jobid="${id%%;*}" admincomment="cellsched: cell=a100x1x1 nodes=1 dp=1 tp=1 pp=1 mb=$mb zero=0 ckpt=0 iter_s=$iter_s src=datasheet model=$model batch=32 iters=$((1000 + i)) gpus=1 limit_min=$limit"
    elif ((i % 2)); then
      # The first ELASTIC_SHARE of every 100 DL jobs opt in to reconfiguration.
      local elastic=
      (((i / 2) % 100 < ELASTIC_SHARE)) && elastic=USR1
      CELLSCHED_DL_MODEL=$([ $((i % 4)) = 1 ] && echo gpt2 || echo bert_large) CELLSCHED_DL_BATCH=32 \
        CELLSCHED_DL_ITERS=$((1000 + i)) env ${elastic:+CELLSCHED_DL_ELASTIC=$elastic} sbatch --parsable -J "bench-dl-$i" --gres=gpu:1 --wrap true >/dev/null
    else
      sbatch --parsable -J "bench-plain-$i" --gres=gpu:1 --wrap true >/dev/null
    fi
  done
}

run_mode() { # mode [port base] -> prints "key value" lines into $DIR-$mode.results
  local mode=$1 dir="$DIR-$1" args
  MODE_PB=${2:-$PB}
  args=(--dir "$dir" --port-base "$MODE_PB")
  case $mode in plugins | plugins-submit-only) ;; *) args+=(--no-plugins) ;; esac
  if [ "$NODES" = 5 ]; then args+=(--groups a100:2x4,v100:2x8,a10:1x4); else args+=(--nodes "$NODES"); fi
  echo "== $mode: cluster up at $dir (port base $MODE_PB)" >&2
  # A fresh slurmctld: no job records saved by an earlier run (they would count in its RSS).
  "$CLI" cluster down --cancel-jobs "${args[@]}" >/dev/null 2>&1 || true
  rm -rf "$dir/state"
  "$CLI" cluster up "${args[@]}" ${SCHED_PARAMS:+--scheduler-parameters "$SCHED_PARAMS"} >&2
  UP_DIR=$dir
  eval "$("$CLI" cluster env "${args[@]}")"
  mkdir -p "$dir/jobs"
  cd "$dir/jobs"
  if [ -n "$ELASTIC_INTERVAL" ] && [ "$mode" = plugins ]; then
    # job_submit reads the file again at its threads' next pass (it watches it).
    local etoml="$dir/etc/cellsched.toml"
    if grep -q '^\[elastic\]' "$etoml"; then echo "sched_cost.sh: $etoml has its own [elastic]; edit by hand" >&2; exit 2; fi
    printf '\n[elastic]\ninterval_s = %s\n' "$ELASTIC_INTERVAL" >>"$etoml"
  fi
  if [ "$mode" = plugins-submit-only ]; then
    # Diagnostic: no re-planning thread work, no ranking; site_factor reads the file on
    # reconfigure, job_submit's thread at its next pass (replan_interval_s = 30).
    local toml="$dir/etc/cellsched.toml" log0
    if grep -q '^\[placement\]\|^\[ordering\]' "$toml"; then echo "sched_cost.sh: $toml has its own [placement]/[ordering]; edit by hand" >&2; exit 2; fi
    printf '\n[placement]\nreplan = false\n\n[ordering]\nenabled = false\n' >>"$toml"
    log0=$(wc -c <"$dir/log/slurmctld.log")
    scontrol reconfigure
    sleep 35
    tail -c +"$((log0 + 1))" "$dir/log/slurmctld.log" | grep -q "re-planning off" || { echo "job_submit did not reload the config" >&2; exit 1; }
  fi
  # Fill every GPU so every submitted job stays pending on Resources: one
  # blocker job per node group (same feature and GRES), holding all its nodes
  # (one batch step each, so an emulated cluster runs three, not one per node).
  local groups=0 nodes
  nodes=$(sinfo -h -N -o %N | sort -u | wc -l)
  while read -r count feature gres; do
    sbatch --parsable -J bench-blocker -N "$count" -C "$feature" --gres="${gres%%(*}" --wrap "sleep 3600" >/dev/null
    groups=$((groups + 1))
  done < <(sinfo -h -N -o '%N %f %G' | sort -u | awk '{ n[$2 " " $3]++ } END { for (k in n) print n[k], k }')
  local t=0
  while [ "$(squeue -h -t R -n bench-blocker | wc -l)" -lt "$groups" ]; do
    sleep 1; t=$((t + 1)); [ $t -lt 90 ] || { echo "blockers did not start" >&2; squeue >&2; exit 1; }
  done
  local ctld_pid rss_before
  ctld_pid=$(cat "$dir/run/slurmctld.pid")
  rss_before=$(ps -o rss= -p "$ctld_pid" | tr -d ' ')
  echo "== $mode: submitting $N jobs ($PAR in parallel)" >&2
  local t0 per from to pids=()
  t0=$(date +%s.%N)
  per=$(((N + PAR - 1) / PAR))
  for ((from = 1; from <= N; from += per)); do
    to=$((from + per - 1)); ((to <= N)) || to=$N
    submit_range "$mode" "$from" "$to" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local submit_s pending
  submit_s=$(echo "$(date +%s.%N) - $t0" | bc)
  pending=$(squeue -h -t PD | wc -l)
  echo "== $mode: $pending pending after ${submit_s}s; measuring for ${WINDOW}s" >&2
  local sd="$dir/sdiag-submit.txt"
  sdiag >"$sd"
  local submit_rpc_us
  submit_rpc_us=$(awk '/REQUEST_SUBMIT_BATCH_JOB/ { for (i = 1; i <= NF; i++) if ($i ~ /^ave_time:/) { sub("ave_time:", "", $i); print $i } }' "$sd")
  if [ "$SIDE" = 1 ]; then
    # Side by side: every mode's window starts when the last one has submitted.
    touch "$DIR-$mode.at-window"
    local m w=0
    for m in $MODES; do
      while [ ! -e "$DIR-$m.at-window" ]; do
        [ ! -e "$DIR-$m.failed" ] || { echo "== $mode: $m failed; no window" >&2; exit 1; }
        sleep 1; w=$((w + 1))
        [ $w -lt 1800 ] || { echo "== $mode: $m never reached its window" >&2; exit 1; }
      done
    done
    echo "== $mode: every mode has submitted; window starts" >&2
  fi
  local log="$dir/log/slurmctld.log" log_start
  log_start=$(($(wc -c <"$log") + 1))
  scontrol setdebug debug
  sdiag -r >/dev/null
  if [ "${CELLSCHED_BENCH_PERF:-0}" = 1 ]; then
    perf record -q -F 199 -g -p "$ctld_pid" -o "$dir/perf.data" -- sleep "$WINDOW" >/dev/null 2>&1 || echo "perf record failed" >&2
    { echo "# perf report of slurmctld ($mode, $N jobs submitted, $nodes nodes), ${WINDOW}s window, 199 Hz; by shared object:"
      perf report -i "$dir/perf.data" --stdio --no-children --sort dso 2>/dev/null | grep -v '^$'
      echo "# by symbol (>= 0.5%), call graphs folded:"
      perf report -i "$dir/perf.data" --stdio --no-children --sort dso,sym --percent-limit 0.5 -g folded,0.5,caller,count 2>/dev/null | grep -v '^$'
    } >"$DIR-$mode.perf.txt"
  else
    sleep "$WINDOW"
  fi
  sd="$dir/sdiag-window.txt"
  sdiag >"$sd"
  scontrol setdebug info
  local tail_log="$dir/window.log"
  tail -c +"$log_start" "$log" >"$tail_log"
  local rss_after
  rss_after=$(ps -o rss= -p "$ctld_pid" | tr -d ' ')
  # Where slurmctld's resident memory is: its mappings with the most RSS
  # ([heap] is the main malloc arena; large anonymous ones are the arenas of
  # other threads, such as the plugins' background threads).
  awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "" ? "[anon " $1 "]" : $6) } /^Size:/ { size = $2 } /^Rss:/ { if ($2 > 0) print $2, size, name }' \
    "/proc/$ctld_pid/smaps" 2>/dev/null | sort -rn | head -15 >"$DIR-$mode.smaps.txt" || true
  local rss_trimmed=NA in_use=NA system=NA gres_select_jobs=NA gres_select_bytes=NA job_pages=NA near_details=NA near_steps=NA near_next=NA
  if [ "${CELLSCHED_BENCH_TRIM:-0}" = 1 ]; then
    # malloc_stats() writes to slurmctld's stderr (log/slurmctld.out); its last "Total" block is ours.
    local out="$dir/log/slurmctld.out"
    # Diagnostics gdb loads into slurmctld, emulated clusters only (see ctld_diag).
    if [ "$NODES" != 5 ]; then
      # What pending jobs keep of cons_tres's GRES selection.
      if ctld_diag gres_select "$ctld_pid" "$dir"; then
        read -r _ _ _ gres_select_jobs _ gres_select_bytes <"$dir/gres_select.txt" || true
      fi
      # How scattered the pending jobs' records are.
      if ctld_diag job_locality "$ctld_pid" "$dir"; then
        read -r _ _ _ job_pages _ near_details _ near_steps _ near_next <"$dir/job_locality.txt" || true
      fi
    fi
    if gdb -p "$ctld_pid" -batch -ex 'call (void) malloc_stats()' >/dev/null 2>&1; then
      system=$(awk '/^Total/ { t = 1; next } t && /^system bytes/ { s = $4 } t && /^in use bytes/ { u = $5; t = 0 } END { print int(s / 1024) }' "$out")
      in_use=$(awk '/^Total/ { t = 1; next } t && /^system bytes/ { s = $4 } t && /^in use bytes/ { u = $5; t = 0 } END { print int(u / 1024) }' "$out")
    fi
    if gdb -p "$ctld_pid" -batch -ex 'call (int) malloc_trim(0)' >/dev/null 2>&1; then
      rss_trimmed=$(ps -o rss= -p "$ctld_pid" | tr -d ' ')
    else echo "gdb could not call malloc_trim in slurmctld" >&2; fi
  fi
  {
    echo "nodes $nodes"
    echo "pending $pending"
    echo "ctld_rss_before_kb ${rss_before:-NA}"
    echo "ctld_rss_after_kb ${rss_after:-NA}"
    echo "ctld_rss_trimmed_kb $rss_trimmed"
    echo "malloc_in_use_kb $in_use"
    echo "malloc_system_kb $system"
    echo "gres_select_jobs $gres_select_jobs"
    echo "gres_select_kb $([ "$gres_select_bytes" = NA ] && echo NA || echo $((gres_select_bytes / 1024)))"
    echo "job_pages $job_pages"
    echo "jobs_details_near $near_details"
    echo "jobs_steps_near $near_steps"
    echo "jobs_next_near $near_next"
    echo "submit_s $submit_s"
    echo "submit_rpc_mean_us ${submit_rpc_us:-NA}"
    echo "main_cycles $(sdiag_field "$sd" 'Main schedule statistics' 'Total cycles')"
    echo "main_mean_us $(sdiag_field "$sd" 'Main schedule statistics' 'Mean cycle')"
    echo "main_max_us $(sdiag_field "$sd" 'Main schedule statistics' 'Max cycle')"
    echo "main_mean_depth $(sdiag_field "$sd" 'Main schedule statistics' 'Mean depth cycle')"
    echo "bf_cycles $(sdiag_field "$sd" 'Backfilling stats' 'Total cycles')"
    echo "bf_mean_us $(sdiag_field "$sd" 'Backfilling stats' 'Mean cycle')"
    echo "bf_max_us $(sdiag_field "$sd" 'Backfilling stats' 'Max cycle')"
    echo "bf_mean_depth $(sdiag_field "$sd" 'Backfilling stats' 'Depth Mean')"
    # Plugin timings (debug lines; none in stock mode).
    # site_factor_p_update (job write lock) only copies factors; the ranking
    # thread snapshots under the read locks and ranks with none.
    awk '/site_factor\/cellsched: update copied/ { v = -1; for (i = 1; i <= NF; i++) { if ($i == "us") v = $(i-1); if ($i == "total") v = $(i+1) } if (v >= 0) { n++; s += v; if (v > m) m = v } }
         END { printf "site_factor_updates %d\nsite_factor_mean_us %s\nsite_factor_max_us %s\n", n, n ? s / n : "NA", n ? m : "NA" }' "$tail_log"
    # "snapshot N us": the longest single hold of the read locks in the pass
    # (the walk releases them between pieces); "N us held in all": the pass's holds together.
    awk '/site_factor\/cellsched: ranking pass over/ { for (i = 1; i <= NF; i++) { if ($i == "snapshot") { n++; v = $(i+1); s += v; if (v > m) m = v } if ($i == "held" && $(i+1) == "in" && $(i+2) == "all,") { a += $(i-2) } if ($i == "ranking" && $(i+1) ~ /^[0-9]+$/) { r += $(i+1) } } }
         END { printf "rank_passes %d\nrank_snapshot_mean_us %s\nrank_snapshot_max_us %s\nrank_held_in_all_mean_us %s\nrank_compute_mean_us %s\n", n, n ? s / n : "NA", n ? m : "NA", n ? a / n : "NA", n ? r / n : "NA" }' "$tail_log"
    awk '/re-planning pass over/ { for (i = 1; i <= NF; i++) { if ($i == "snapshot") { n++; v = $(i+1); s += v; if (v > m) m = v } if ($i == "held" && $(i+1) == "in" && $(i+2) == "all,") { a += $(i-2) } } }
         END { printf "replan_passes %d\nreplan_snapshot_mean_us %s\nreplan_snapshot_max_us %s\nreplan_held_in_all_mean_us %s\n", n, n ? s / n : "NA", n ? m : "NA", n ? a / n : "NA" }' "$tail_log"
    # The elastic thread's decision passes: its snapshot's longest read-lock hold,
    # all its holds together, the node table copy (read lock) and the decision
    # (no locks), from its "elastic pass over" lines.
    awk '/job_submit\/cellsched: elastic pass over/ { n++; for (i = 1; i <= NF; i++) { if ($i == "over") { run += $(i+1); wait += $(i+5) } if ($i == "snapshot") { v = $(i+1); s += v; if (v > m) m = v } if ($i == "held" && $(i+1) == "in" && $(i+2) == "all,") a += $(i-2); if ($i == "table") nt += $(i+1); if ($i == "deciding") { d += $(i+1); if ($(i+1) > dm) dm = $(i+1) } if ($i == "actions") act += $(i-1) } }
         END { printf "elastic_passes %d\nelastic_running_mean %s\nelastic_waiting_mean %s\nelastic_snapshot_mean_us %s\nelastic_snapshot_max_us %s\nelastic_held_in_all_mean_us %s\nelastic_node_table_mean_us %s\nelastic_decide_mean_us %s\nelastic_decide_max_us %s\nelastic_actions %d\n", n, n ? run / n : "NA", n ? wait / n : "NA", n ? s / n : "NA", n ? m : "NA", n ? a / n : "NA", n ? nt / n : "NA", n ? d / n : "NA", n ? dm : "NA", act }' "$tail_log"
    # The plugins' own Rust heap (counting allocator), from each thread's last pass line.
    awk '/site_factor\/cellsched: ranking pass over/ { for (i = 1; i <= NF; i++) if ($i == "heap") sf = $(i+1) }
         /re-planning pass over/ { for (i = 1; i <= NF; i++) if ($i == "heap") js = $(i+1) }
         END { printf "site_factor_heap_kb %s\njob_submit_heap_kb %s\n", sf == "" ? "NA" : sf, js == "" ? "NA" : js }' "$tail_log"
  } >"$DIR-$mode.results"
  cd "$ROOT"
  scancel --user="$(id -un)" || true
  "$CLI" cluster down --cancel-jobs "${args[@]}" >&2
  UP_DIR=""
}

get() { awk -v k="$2" '$1 == k { print $2 }' "$DIR-$1.results"; }
ratio() { # a b
  if [[ "$1" =~ ^[0-9.]+$ && "$2" =~ ^[0-9.]+$ ]] && [ "$(echo "$2 > 0" | bc)" = 1 ]; then
    printf '%.2f' "$(echo "scale=4; $1 / $2" | bc)"
  else echo NA; fi
}

MODES=${CELLSCHED_BENCH_MODES:-stock plugins}
rm -f "$DIR-stock.results" "$DIR-plugins.results" "$DIR-stock-rewritten.results" "$DIR-plugins-submit-only.results" # no column from an earlier run
for mode in $MODES; do
  case $mode in stock | plugins | stock-rewritten | plugins-submit-only) ;;
    *) echo "sched_cost.sh: unknown mode '$mode' (stock, plugins; diagnostics: stock-rewritten, plugins-submit-only)" >&2; exit 2 ;; esac
done
if [ "$SIDE" = 1 ]; then
  # All modes at once, each on its own cluster (port bases PB, PB+20, ...), with
  # one common window: both see the same machine, its load and its noise.
  rm -f "$DIR"-*.at-window "$DIR"-*.failed
  pids=()
  i=0
  for mode in $MODES; do
    (
      trap 'cleanup; [ -e "$DIR-$mode.results" ] || touch "$DIR-$mode.failed"' EXIT
      run_mode "$mode" $((PB + 20 * i))
    ) &
    pids+=($!)
    i=$((i + 1))
  done
  failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  rm -f "$DIR"-*.at-window "$DIR"-*.failed
  [ $failed = 0 ] || { echo "sched_cost.sh: a side-by-side mode failed" >&2; exit 1; }
else
  for mode in $MODES; do run_mode "$mode"; done
fi
# Diagnostic columns (never a baseline), each with its ratio plugins / that column.
DIAGS=()
for d in stock-rewritten plugins-submit-only; do [ -f "$DIR-$d.results" ] && DIAGS+=("$d"); done

echo
echo "slurmctld scheduling cost at $N pending jobs (half DL, ${ELASTIC_SHARE}% of those elastic) on $NODES nodes, window ${WINDOW}s; times in microseconds, RSS in KiB"
[ "$SIDE" = 0 ] || echo "side by side: the modes ran at the same time, one cluster each, with one common window"
echo "SchedulerParameters: $(grep -h '^SchedulerParameters=' "$DIR-stock/etc/slurm.conf" "$DIR-plugins/etc/slurm.conf" 2>/dev/null | sort -u | cut -d= -f2- | paste -sd' ' -)"
head=$(printf '%-26s %14s %14s %8s' metric stock plugins ratio)
for d in "${DIAGS[@]}"; do head+=$(printf ' %20s %8s' "$d" "p/diag"); done
((${#DIAGS[@]})) && echo "(diagnostic columns: ${DIAGS[*]}; p/diag = plugins / that column)"
echo "$head"
for k in nodes pending ctld_rss_before_kb ctld_rss_after_kb ctld_rss_trimmed_kb malloc_in_use_kb malloc_system_kb gres_select_jobs gres_select_kb job_pages jobs_details_near jobs_steps_near jobs_next_near submit_s submit_rpc_mean_us main_cycles main_mean_us main_max_us main_mean_depth \
  bf_cycles bf_mean_us bf_max_us bf_mean_depth site_factor_updates site_factor_mean_us site_factor_max_us \
  rank_passes rank_snapshot_mean_us rank_snapshot_max_us rank_held_in_all_mean_us rank_compute_mean_us \
  replan_passes replan_snapshot_mean_us replan_snapshot_max_us replan_held_in_all_mean_us \
  elastic_passes elastic_running_mean elastic_waiting_mean elastic_snapshot_mean_us elastic_snapshot_max_us elastic_held_in_all_mean_us \
  elastic_node_table_mean_us elastic_decide_mean_us elastic_decide_max_us elastic_actions site_factor_heap_kb job_submit_heap_kb; do
  a=$(get stock "$k" 2>/dev/null || true); b=$(get plugins "$k" 2>/dev/null || true)
  case $k in *_us | *_kb | submit_s) r=$(ratio "$b" "$a") ;; *) r="" ;; esac
  line=$(printf '%-26s %14s %14s %8s' "$k" "${a:-NA}" "${b:-NA}" "$r")
  for d in "${DIAGS[@]}"; do
    c=$(get "$d" "$k" 2>/dev/null || true)
    case $k in *_us | *_kb | submit_s) r2=$(ratio "$b" "$c") ;; *) r2="" ;; esac
    line+=$(printf ' %20s %8s' "${c:-NA}" "$r2")
  done
  echo "$line"
done

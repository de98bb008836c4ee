#!/usr/bin/env bash
# Optional live check (not part of CI): cellsched's three plugins on a local
# cluster running Slurm 24.11.5 daemons and client commands.
#
# Usage: scripts/live-2411.sh                  (or: make live-2411)
# Needs: Slurm 24.11.5 installed by scripts/build-2411.sh, root, MariaDB.
# Env:   SLURM_2411_PREFIX     24.11.5 install prefix (default /opt/cellsched/slurm-24.11.5)
#        SLURM_2411_BUILD_DIR  its build tree, used only to rebuild what is missing (step 1)
#                              (default /opt/cellsched/build/slurm-24.11.5)
#        LIVE_2411_DIR         cluster directory (default /tmp/cs-2411)
#        LIVE_2411_PORT_BASE   first port (default 18800: 18800..18808)
#        LIVE_2411_PLUGIN_BUILD_DIR  where the 24.11.5 plugin .so files are (default target-2411/release,
#                              built here; when set, used as is and nothing is built)
#        LIVE_2411_KEEP=1      leave the cluster up at the end (default: always brought down)
#
# Steps: (1) the 24.11.5 build must have --enable-multiple-slurmd (5 slurmd on
# one host) and accounting_storage_mysql.so (slurmdbd; needs libmariadb-dev +
# libmariadb-dev-compat at configure time); if not, it is rebuilt. (2) plugins built
# against 24.11.5 into target-2411/ by scripts/check-2411.sh (incremental).
# (3) `cellsched cluster up` with the 24.11.5 sbin/bin/lib and those plugins.
# (4) checks: both slurmctld plugins logged as loaded, `sbatch --help` lists
# the [cellsched] options, a DL job gets a decision in AdminComment, runs and
# sees the injected plan, a plain job is untouched. (5) cluster down (trap).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PREFIX=${SLURM_2411_PREFIX:-/opt/cellsched/slurm-24.11.5}
BUILD=${SLURM_2411_BUILD_DIR:-/opt/cellsched/build/slurm-24.11.5}
DIR=${LIVE_2411_DIR:-/tmp/cs-2411}
PORT_BASE=${LIVE_2411_PORT_BASE:-18800}
T0=$SECONDS
FAILS=0

log() { printf '[live-2411 %(%H:%M:%S)T +%3ds] %s\n' -1 $((SECONDS - T0)) "$*"; }
die() { printf 'live-2411: error: %s\n' "$*" >&2; exit 1; }
pass() { log "PASS $*"; }
fail() { log "FAIL $*"; FAILS=$((FAILS + 1)); }

[ "$(id -u)" = 0 ] || die "must run as root (the cluster's daemons run as root)"
[ -x "$PREFIX/sbin/slurmctld" ] || die "no Slurm 24.11.5 at $PREFIX (run scripts/build-2411.sh or set SLURM_2411_PREFIX)"
ver=$("$PREFIX/sbin/slurmctld" -V 2>&1 || true)
[ "$ver" = "slurm 24.11.5" ] || die "$PREFIX/sbin/slurmctld -V says '$ver', expected 'slurm 24.11.5'"

# --- 1. what the 24.11.5 build needs for this cluster ------------------------
# Several slurmd on one host need --enable-multiple-slurmd (else slurmctld
# logs "Duplicated NodeHostName localhost" and cannot reach nodes 2..N);
# slurmdbd needs accounting_storage_mysql.so (configure must find mysql_config).
# Either missing: reconfigure the build tree and rebuild (full make for the
# former, ~7 min on 2 cores; only the plugin for the latter, ~1.5 min).
MYSQL_SO=$PREFIX/lib/slurm/accounting_storage_mysql.so
need_multi=0; need_mysql=0
if [ -f "$BUILD/config.h" ]; then
  grep -q '^#define MULTIPLE_SLURMD 1' "$BUILD/config.h" || need_multi=1
else
  log "warning: no $BUILD/config.h; cannot tell whether $PREFIX has multiple-slurmd support"
fi
[ -f "$MYSQL_SO" ] || need_mysql=1
if [ $need_multi = 1 ] || [ $need_mysql = 1 ]; then
  [ -f "$BUILD/configure" ] || die "no 24.11.5 build tree at $BUILD to rebuild from (rerun scripts/build-2411.sh)"
  command -v mysql_config >/dev/null || die "slurmdbd needs $MYSQL_SO: apt-get install libmariadb-dev libmariadb-dev-compat, then rerun"
  log "rebuilding Slurm 24.11.5 in $BUILD (multiple-slurmd missing: $need_multi, mysql plugin missing: $need_mysql)"
  (
    cd "$BUILD"
    ./configure --prefix="$PREFIX" --sysconfdir="$PREFIX/etc" --enable-silent-rules --disable-debug \
      --enable-multiple-slurmd >configure-live.log 2>&1 || die "configure failed; see $BUILD/configure-live.log"
    grep -q '^#define HAVE_MYSQL 1' config.h || die "configure in $BUILD found no MySQL; see $BUILD/configure-live.log"
    if [ $need_multi = 1 ]; then
      { make -j"$(nproc)" && make install; } >make-live.log 2>&1 || die "make failed; see $BUILD/make-live.log"
    else
      { make -C src/database -j"$(nproc)" && make -C src/plugins/accounting_storage/mysql -j"$(nproc)" \
          && make -C src/plugins/accounting_storage/mysql install; } >make-live.log 2>&1 \
        || die "building accounting_storage_mysql failed; see $BUILD/make-live.log"
    fi
  )
  [ -f "$MYSQL_SO" ] || die "$MYSQL_SO still missing after the rebuild"
  log "rebuilt Slurm 24.11.5 (log: $BUILD/make-live.log)"
fi

# --- 2. plugins against 24.11.5, and the cluster CLI ---------------------------
PLUGIN_DIR=${LIVE_2411_PLUGIN_BUILD_DIR:-}
if [ -z "$PLUGIN_DIR" ]; then
  PLUGIN_DIR=$ROOT/target-2411/release
  log "building the plugins against 24.11.5 (scripts/check-2411.sh, incremental)"
  mkdir -p "$ROOT/target-2411"
  CHECK_2411_TESTS=0 CARGO_TARGET_DIR="$ROOT/target-2411" scripts/check-2411.sh >"$ROOT/target-2411/live-2411-build.log" 2>&1 \
    || { tail -20 "$ROOT/target-2411/live-2411-build.log" >&2; die "scripts/check-2411.sh failed; see target-2411/live-2411-build.log"; }
  grep '\] ok ' "$ROOT/target-2411/live-2411-build.log" | sed 's/^/  /' | cut -c1-120
fi
for c in site_factor job_submit spank; do
  [ -f "$PLUGIN_DIR/lib${c}_cellsched.so" ] || die "$PLUGIN_DIR/lib${c}_cellsched.so missing (LIVE_2411_PLUGIN_BUILD_DIR?)"
done
log "building the cellsched CLI (cargo build --release --bin cellsched)"
cargo build -q --release --bin cellsched || die "cargo build --release --bin cellsched failed"
CLI=$ROOT/target/release/cellsched

# --- 3. the cluster -----------------------------------------------------------
cluster() {
  env CELLSCHED_SLURM_SBIN="$PREFIX/sbin" CELLSCHED_PLUGIN_BUILD_DIR="$PLUGIN_DIR" \
    "$CLI" cluster --dir "$DIR" --port-base "$PORT_BASE" "$@"
}
teardown() {
  local rc=$?
  if [ "${LIVE_2411_KEEP:-0}" = 1 ]; then
    log "LIVE_2411_KEEP=1: cluster left up; stop it with: $CLI cluster down --dir $DIR --port-base $PORT_BASE"
  else
    log "bringing the cluster down"; cluster down --cancel-jobs || rc=1
  fi
  log "done in $((SECONDS - T0)) s, $FAILS failed check(s)"
  [ "$FAILS" = 0 ] || rc=1
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM

CTLD_LOG=$DIR/log/slurmctld.log
LOG_FROM=$(( $(wc -l <"$CTLD_LOG" 2>/dev/null || echo 0) + 1 )) # this run's lines only
log "cluster up: $DIR, ports $PORT_BASE.., Slurm $PREFIX, plugins $PLUGIN_DIR"
cluster up || die "cluster up failed (logs in $DIR/log)"
eval "$(cluster env)"
export PATH="$PREFIX/bin:$PATH"
unset CELLSCHED_CLUSTER_DIR CELLSCHED_PORT_BASE # keep the jobs' environment free of CELLSCHED_*
[ "$(command -v sbatch)" = "$PREFIX/bin/sbatch" ] || die "sbatch resolves to $(command -v sbatch), not $PREFIX/bin/sbatch"
log "client: $(sbatch --version), SLURM_CONF=$SLURM_CONF"

# --- 4. checks ----------------------------------------------------------------
ctld_log() { tail -n +"$LOG_FROM" "$CTLD_LOG"; }
ctld_log | grep -m1 'slurmctld version' | sed 's/^/  /' || true
if ctld_log | grep -q 'Duplicated NodeHostName'; then
  fail "slurmctld: 'Duplicated NodeHostName': $PREFIX lacks --enable-multiple-slurmd; only the first node is reachable"
fi
for p in site_factor/cellsched job_submit/cellsched; do
  if ctld_log | grep -q "$p: loaded"; then
    pass "slurmctld log shows $p loaded:"; ctld_log | grep "$p: loaded" | head -3 | sed 's/^/  /'
  else
    fail "slurmctld log ($CTLD_LOG) has no line from $p"
  fi
done
if ctld_log | grep -iE 'error.*(cellsched|plugin)' | grep -q .; then
  fail "slurmctld log has plugin errors:"; ctld_log | grep -iE 'error.*(cellsched|plugin)' | head -5 | sed 's/^/  /'
fi

help=$(sbatch --help 2>&1 || true)
if grep -q '\[cellsched\]' <<<"$help"; then
  pass "sbatch --help lists the [cellsched] options:"; grep '\[cellsched\]' <<<"$help" | sed 's/^/  /'
else
  fail "sbatch --help shows no [cellsched] option (plugstack.conf: $DIR/etc/plugstack.conf)"
fi

# Waits for job $1 to end; prints its final JobState.
wait_job() {
  local id=$1 state="" i
  for i in $(seq 1 120); do
    state=$(scontrol show job "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL) break ;; esac
    sleep 0.5
  done
  echo "${state:-UNKNOWN}"
}
field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# AdminComment is the rest of its line (it holds spaces).
admin_comment() { scontrol show job "$1" | sed -n 's/^ *AdminComment=//p'; }

JOBS=$DIR/jobs; mkdir -p "$JOBS"

check_dl_job() {
  local dl ac st out acct i
  if ! dl=$(sbatch --parsable --chdir "$JOBS" -o "$JOBS/dl-%j.out" --dl-model=gpt2 --dl-batch=32 --dl-iters=10 \
    --wrap 'env | grep CELLSCHED_ | sort' 2>&1); then
    fail "sbatch of the DL job failed: $dl"; ctld_log | grep 'cellsched' | tail -2 | sed 's/^/  /'; return
  fi
  log "DL job $dl submitted"
  ac=$(admin_comment "$dl")
  if [[ $ac == cellsched:* ]]; then pass "DL job $dl placed: AdminComment=$ac"; else fail "DL job $dl AdminComment is '$ac', no cellsched decision"; fi
  st=$(wait_job "$dl")
  log "DL job $dl: JobState=$st NodeList=$(field "$dl" NodeList) Features=$(field "$dl" Features) AllocTRES=$(field "$dl" AllocTRES)"
  if [ "$st" = COMPLETED ]; then pass "DL job $dl COMPLETED"; else fail "DL job $dl ended $st"; fi
  out=$JOBS/dl-$dl.out
  if [ -f "$out" ] && grep -q '^CELLSCHED_DP=' "$out" && grep -q '^CELLSCHED_CELL=' "$out"; then
    pass "DL job output has the injected plan ($out):"; sed 's/^/  /' "$out"
  else
    fail "DL job output $out lacks CELLSCHED_CELL/CELLSCHED_DP:"; sed 's/^/  /' "$out" 2>/dev/null || true
  fi
  acct=""
  for i in $(seq 1 20); do
    acct=$(sacct -n -P -X -j "$dl" -o JobID,State,NodeList,AllocTRES 2>/dev/null || true)
    [[ $acct == *gres/gpu* ]] && break
    sleep 0.5
  done
  if [[ $acct == *gres/gpu* ]]; then pass "sacct (slurmdbd) has DL job $dl: $acct"; else fail "sacct has no GPU AllocTRES for DL job $dl: '$acct'"; fi
}

check_plain_job() {
  local plain ac st
  if ! plain=$(sbatch --parsable --chdir "$JOBS" -o "$JOBS/plain-%j.out" \
    --wrap 'env | grep CELLSCHED_ | sort; echo plain-done' 2>&1); then
    fail "sbatch of the plain job failed: $plain"; return
  fi
  ac=$(admin_comment "$plain")
  st=$(wait_job "$plain")
  log "plain job $plain: JobState=$st AdminComment='$ac' NodeList=$(field "$plain" NodeList) AllocTRES=$(field "$plain" AllocTRES)"
  if [ "$st" = COMPLETED ]; then pass "plain job $plain COMPLETED"; else fail "plain job $plain ended $st"; fi
  if [ -z "$ac" ]; then pass "plain job $plain has no AdminComment"; else fail "plain job $plain got AdminComment '$ac'"; fi
  if [ "$(cat "$JOBS/plain-$plain.out" 2>/dev/null)" = plain-done ]; then
    pass "plain job $plain saw no CELLSCHED_* variable"
  else
    fail "plain job output $JOBS/plain-$plain.out:"; sed 's/^/  /' "$JOBS/plain-$plain.out" 2>/dev/null || true
  fi
}

check_dl_job
check_plain_job

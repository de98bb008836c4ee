#!/usr/bin/env bash
# Everything cellsched does per Slurm release, for every release in
# scripts/slurm-releases (the one table of supported releases).
#
# Usage: scripts/slurm.sh COMMAND [ARGS]
#   releases [--ci|--system]   the releases in the table (--ci: those CI build-checks;
#                              --system: the one whose packages install-deps.sh installs)
#   get RELEASE FIELD          one field of a row: source, suite, headers, ci, configure
#   env RELEASE                SLURM_SRC_DIR=... and SLURM_INCLUDE_DIR=... lines to build against RELEASE
#   check RELEASE [CRATE...|--no-plugins]
#                              unit tests of slurm-sys and cellsched-slurm-ffi, release builds of those,
#                              the smoke-test example plugin and each CRATE (default: the three plugins)
#                              against RELEASE; then for every .so: plugin_version equals RELEASE's
#                              SLURM_VERSION_NUMBER, plugin_name/plugin_type exported, no BIND_NOW
#   build RELEASE [MODE]       builds and installs RELEASE itself from its source tree (optional, not CI;
#                              7-15 min on 2 cores; idempotent). MODE multiple-slurmd (default): for `live`
#                              and the 5-node local cluster; front-end: one slurmd serves every node, for
#                              the emulated large cluster (`cellsched cluster up --nodes N`), in PREFIX-fe
#                              (/opt/cellsched/slurm-RELEASE-fe)
#   live RELEASE               live check (optional, not CI, root): the three plugins on a local cluster
#                              running RELEASE's daemons and client commands
#
# Env:  CELLSCHED_SRC_ROOT       configured source trees, <root>/slurm-RELEASE (default /opt/cellsched/src;
#                                made by scripts/install-deps.sh)
#       CELLSCHED_CHECK_TARGET_DIR  check's build dir (default target-RELEASE, kept apart from the normal
#                                build; a CARGO_TARGET_DIR in the environment is not used for it, so a
#                                check never overwrites the plugins the normal build made)
#       CHECK_TESTS=0            check: skip the unit tests
#       CELLSCHED_SLURM_PREFIX   build/live: install prefix (default /opt/cellsched/slurm-RELEASE, -fe appended
#                                for front-end)
#       CELLSCHED_SLURM_BUILD_DIR  build/live: scratch build copy (default /opt/cellsched/build/<prefix name>)
#       JOBS                     build: parallel make jobs (default: nproc)
#       LIVE_DIR                 live: cluster directory (default /tmp/cs-RELEASE)
#       LIVE_PORT_BASE           live: first port (default 18800: 18800..18808)
#       LIVE_PLUGIN_BUILD_DIR    live: where RELEASE's plugin .so files are (default target-RELEASE/release,
#                                built by `check`; when set, used as is and nothing is built)
#       LIVE_KEEP=1              live: leave the cluster up at the end (default: always brought down)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TABLE=$ROOT/scripts/slurm-releases
CMD=${1:-}
[ $# -gt 0 ] && shift
T0=$SECONDS
log() { printf '[slurm.sh %s %(%H:%M:%S)T] %s\n' "$CMD${REL:+ $REL}" -1 "$*"; }
die() { printf 'slurm.sh %s: error: %s\n' "$CMD${REL:+ $REL}" "$*" >&2; exit 1; }

# The table's rows without comments: release source suite headers ci configure.
rows() { awk '!/^[[:space:]]*(#|$)/ { if (NF != 6) { printf "scripts/slurm-releases: line %d: %d columns, expected 6\n", NR, NF > "/dev/stderr"; exit 1 } print }' "$TABLE"; }
# field RELEASE NAME
field() {
  local col
  case $2 in release) col=1 ;; source) col=2 ;; suite) col=3 ;; headers) col=4 ;; ci) col=5 ;; configure) col=6 ;;
    *) die "unknown field '$2' (release, source, suite, headers, ci, configure)" ;; esac
  rows | awk -v r="$1" -v c=$col '$1 == r { print $c; found = 1 } END { exit !found }' \
    || die "release '$1' is not in scripts/slurm-releases (known: $(rows | awk '{printf "%s ", $1}'))"
}
# version_number RELEASE -> 0x%06x as SLURM_VERSION_NUMBER
version_number() { local IFS=.; set -- $1; printf '0x%02x%02x%02x\n' "$((10#$1))" "$((10#$2))" "$((10#$3))"; }
src_dir() { echo "${CELLSCHED_SRC_ROOT:-/opt/cellsched/src}/slurm-$1"; }
# The include dir for RELEASE: the system headers or the tree's own.
include_dir() { if [ "$(field "$1" headers)" = system ]; then echo /usr/include; else src_dir "$1"; fi; }
need_release() { [ -n "${1:-}" ] || die "usage: scripts/slurm.sh $CMD RELEASE (releases: $(rows | awk '{printf "%s ", $1}'))"; REL=$1; field "$REL" release >/dev/null; }

cmd_releases() {
  case ${1:-} in
    "") rows | awk '{print $1}' ;;
    --ci) rows | awk '$5 == "check" {print $1}' ;;
    --system) rows | awk '$4 == "system" {print $1}' ;;
    *) die "releases: unknown option '$1' (--ci, --system)" ;;
  esac
}

cmd_env() {
  need_release "${1:-}"
  echo "SLURM_SRC_DIR=$(src_dir "$REL")"
  echo "SLURM_INCLUDE_DIR=$(include_dir "$REL")"
}

cmd_check() {
  need_release "${1:-}"; shift
  local SRC INC expected got CRATES=()
  SRC=$(src_dir "$REL"); INC=$(include_dir "$REL")
  export CARGO_TARGET_DIR=${CELLSCHED_CHECK_TARGET_DIR:-target-$REL}
  if [ "${1:-}" = --no-plugins ]; then CRATES=(); elif [ $# -gt 0 ]; then CRATES=("$@"); else CRATES=(site_factor_cellsched job_submit_cellsched spank_cellsched); fi
  [ -f "$SRC/slurm/slurm_version.h" ] || die "no Slurm $REL source tree at $SRC (run scripts/install-deps.sh or set CELLSCHED_SRC_ROOT)"
  [ -f "$SRC/config.h" ] || die "$SRC is not configured (no config.h); run scripts/install-deps.sh"
  [ -f "$INC/slurm/slurm_version.h" ] || die "no Slurm headers in $INC (run scripts/install-deps.sh)"
  expected=$(version_number "$REL")
  got=$(awk '$1=="#define" && $2=="SLURM_VERSION_NUMBER" {print $3}' "$INC/slurm/slurm_version.h")
  [ -n "$got" ] || die "no SLURM_VERSION_NUMBER in $INC/slurm/slurm_version.h"
  got=$(printf '0x%06x' "$got")
  [ "$got" = "$expected" ] || die "headers in $INC are $got, not $REL ($expected)"
  export SLURM_SRC_DIR="$SRC" SLURM_INCLUDE_DIR="$INC"
  log "Slurm source $SRC, headers $INC (SLURM_VERSION_NUMBER $expected), CARGO_TARGET_DIR=$CARGO_TARGET_DIR"

  if [ "${CHECK_TESTS:-1}" != 0 ]; then
    log "unit tests: slurm-sys, cellsched-slurm-ffi"
    cargo test -q -p slurm-sys -p cellsched-slurm-ffi
  fi
  local pkgs=(-p slurm-sys -p cellsched-slurm-ffi) c
  for c in "${CRATES[@]+"${CRATES[@]}"}"; do pkgs+=(-p "$c"); done
  log "cargo build --release ${pkgs[*]}"
  cargo build --release "${pkgs[@]}"

  for c in "${CRATES[@]+"${CRATES[@]}"}"; do check_so "$c" "$CARGO_TARGET_DIR/release/lib$c.so"; done
  log "all ${#CRATES[@]} plugin crate(s) built for Slurm $REL"
}

# plugin_version of a .so, read from the section holding the symbol, as 0x%06x.
plugin_version_of() {
  local so=$1 addr ndx sect bytes
  read -r addr ndx < <(readelf -W --dyn-syms "$so" | awk '$8=="plugin_version" && $4=="OBJECT" {print $2, $7; exit}') || true
  [ -n "${addr:-}" ] || return 1
  sect=$(readelf -SW "$so" | sed 's/\[ */[/' | awk -v n="[$ndx]" '$1==n {print $2; exit}')
  bytes=$(objdump -s -j "$sect" --start-address=0x"$addr" --stop-address=$((0x$addr + 4)) "$so" | awk 'NF>=2 && $1 ~ /^[0-9a-f]+$/ {w=$2} END {print w}')
  [ ${#bytes} = 8 ] || return 1
  printf '0x%06x\n' "0x${bytes:6:2}${bytes:4:2}${bytes:2:2}${bytes:0:2}"
}

check_so() { # name path (uses $expected, $REL)
  local name=$1 so=$2 v
  [ -f "$so" ] || die "$name: $so was not built"
  v=$(plugin_version_of "$so") || die "$name: $so exports no plugin_version"
  [ "$v" = "$expected" ] || die "$name: plugin_version is $v, Slurm $REL needs $expected"
  for s in plugin_name plugin_type; do
    nm -D --defined-only "$so" | awk '{print $3}' | grep -qx "$s" || die "$name: $so does not export $s"
  done
  if readelf -d "$so" | grep -qE 'BIND_NOW|FLAGS_1.*NOW'; then die "$name: $so is linked with BIND_NOW (needs -z lazy)"; fi
  log "ok $name: plugin_version=$v, exports: $(nm -D --defined-only "$so" | awk '{printf "%s ", $3}')"
}



# build_is_complete PREFIX BUILD DEFINE: RELEASE installed, built in the mode
# DEFINE names (config.h), with what the local cluster needs; a front-end
# build also carries the registration patch below and is newer than it.
build_is_complete() {
  [ -x "$1/sbin/slurmctld" ] && "$1/sbin/slurmctld" -V 2>/dev/null | grep -qx "slurm $REL" \
    && [ -f "$1/lib/slurm/accounting_storage_mysql.so" ] \
    && grep -q "^$3" "$2/config.h" 2>/dev/null \
    && { [ "$MODE" != front-end ] || { grep -q 'cellsched emulator' "$2/src/slurmctld/node_mgr.c" \
      && [ "$1/sbin/slurmctld" -nt "$2/src/slurmctld/node_mgr.c" ]; }; }
}

# Front-end mode and GRES: the one slurmd registers for every node but, having
# no NodeName of its own, reports no GRES, so stock 22.05 sets every GPU node
# DOWN ("gres/gpu count reported lower than configured (0 < 8)") at each
# front-end registration (start, reconfigure, and about every 7 min), killing
# its jobs. The emulator keeps the configured GRES instead when
# SlurmdParameters=config_overrides is set (as the local cluster sets it).
# Registration only; nothing in the scheduling path changes. Run in BUILD.
patch_front_end() {
  grep -q 'cellsched emulator' src/slurmctld/node_mgr.c && return 0
  log "patching src/slurmctld/node_mgr.c: front-end registration keeps configured GRES under config_overrides"
  perl -0pi -e 's/(\t\t\t&reason_down\);\n\t\tif \(rc)(\) \{\n\t\t\tif \(!IS_NODE_DOWN\(node_ptr\)\) \{\n\t\t\t\terror\("Setting node %s state to DOWN")/$1 \&\& !(slurm_conf.conf_flags \& CTL_CONF_OR) \/* cellsched emulator *\/$2/' \
    src/slurmctld/node_mgr.c
  grep -q 'cellsched emulator' src/slurmctld/node_mgr.c || die "could not patch src/slurmctld/node_mgr.c (front-end GRES registration)"
}

# build RELEASE [multiple-slurmd|front-end]
# The shared source tree stays untouched (cellsched builds against its
# headers): it is copied to the build dir and configured there with the prefix
# (a build dir already configured for this prefix and mode is reused: make is
# incremental). Result: $PREFIX/sbin/{slurmctld,slurmd,slurmdbd},
# $PREFIX/bin/{sbatch,scontrol,...}, stock plugins in $PREFIX/lib/slurm (the
# local cluster's PluginDir source). The table's configure column gives the
# flags; multiple-slurmd (the default) is the 5-node local cluster, several
# slurmd on one host; front-end swaps --enable-multiple-slurmd for
# --enable-front-end (one slurmd serves every node: the emulated >=1,000-node
# cluster of `cellsched cluster up --nodes N`), installs into PREFIX-fe and
# applies patch_front_end. Neither mode changes a header cellsched's bindings
# read (HAVE_FRONT_END and MULTIPLE_SLURMD appear only in .c files and
# config.h), so plugins built against the install-deps tree of the same
# release load in either build. slurmdbd's MySQL storage plugin needs
# libmariadb-dev at configure time. Only src/ is built: Debian's source tree
# lacks the man pages doc/ wants.
cmd_build() {
  need_release "${1:-}"
  MODE=${2:-multiple-slurmd}
  local SRC PREFIX BUILD JOBS flags define suffix
  case $MODE in
    multiple-slurmd) define='#define MULTIPLE_SLURMD 1'; suffix="" ;;
    front-end) define='#define HAVE_FRONT_END 1'; suffix=-fe ;;
    *) die "build MODE must be multiple-slurmd or front-end, got '$MODE'" ;;
  esac
  SRC=$(src_dir "$REL")
  PREFIX=${CELLSCHED_SLURM_PREFIX:-/opt/cellsched/slurm-$REL$suffix}
  BUILD=${CELLSCHED_SLURM_BUILD_DIR:-/opt/cellsched/build/$(basename "$PREFIX")}
  JOBS=${JOBS:-$(nproc)}
  flags=$(field "$REL" configure); [ "$flags" = - ] && flags=""
  flags=${flags//,/ }
  if [ "$MODE" = front-end ]; then
    flags=$(printf '%s\n' $flags | grep -vx -- --enable-multiple-slurmd | tr '\n' ' ')
    flags="$flags--enable-front-end"
  fi
  if build_is_complete "$PREFIX" "$BUILD" "$define"; then log "Slurm $REL ($MODE) already installed in $PREFIX"; return 0; fi
  command -v mysql_config >/dev/null || command -v mariadb_config >/dev/null \
    || die "mysql_config not found: apt-get install libmariadb-dev libmariadb-dev-compat (slurmdbd's storage plugin needs it)"
  [ -x "$SRC/configure" ] || die "no Slurm $REL source tree at $SRC (run scripts/install-deps.sh or set CELLSCHED_SRC_ROOT)"
  grep -q "^#define SLURM_VERSION_STRING \"$REL\"" "$SRC/config.h" 2>/dev/null \
    || grep -q "SLURM_VERSION_STRING \"$REL\"" "$SRC/slurm/slurm_version.h" 2>/dev/null \
    || die "$SRC is not Slurm $REL"
  local t; for t in make gcc perl; do command -v $t >/dev/null || die "$t not found (apt-get install build-essential perl)"; done
  local t0=$SECONDS
  if grep -q "^$define" "$BUILD/config.h" 2>/dev/null && grep -q "prefix=$PREFIX" "$BUILD/config.log" 2>/dev/null \
     && grep -q '^#define HAVE_MYSQL 1' "$BUILD/config.h"; then
    log "reusing the configured build dir $BUILD"
  else
    log "copying $SRC to $BUILD"
    rm -rf "$BUILD"; mkdir -p "$(dirname "$BUILD")"
    cp -a "$SRC" "$BUILD"
    (
      cd "$BUILD"
      make distclean >/dev/null 2>&1 || true
      log "configure --prefix=$PREFIX $flags (log: $BUILD/configure.log)"
      # shellcheck disable=SC2086
      ./configure --prefix="$PREFIX" --sysconfdir="$PREFIX/etc" --enable-silent-rules $flags >configure.log 2>&1 \
        || die "configure failed; see $BUILD/configure.log"
      grep -q '^#define HAVE_MYSQL 1' config.h || die "configure found no MySQL/MariaDB client library; see $BUILD/configure.log"
      grep -q "^$define" config.h || die "configure did not set '$define'; see $BUILD/configure.log"
    )
  fi
  (
    cd "$BUILD"
    [ "$MODE" != front-end ] || patch_front_end
    log "make -C src -j$JOBS (log: $BUILD/make.log)"
    make -C src -j"$JOBS" >make.log 2>&1 || die "make failed; see $BUILD/make.log (tail: $(tail -3 make.log | tr '\n' ' '))"
    log "make -C src install"
    make -C src install >install.log 2>&1 || die "make install failed; see $BUILD/install.log"
  )
  "$PREFIX/sbin/slurmctld" -V | grep -qx "slurm $REL" || die "$PREFIX/sbin/slurmctld -V is not 'slurm $REL'"
  build_is_complete "$PREFIX" "$BUILD" "$define" || die "$PREFIX lacks $MODE support or accounting_storage_mysql.so after the build"
  log "installed Slurm $REL ($MODE) in $PREFIX in $((SECONDS - t0)) s: sbin/slurmctld, bin/scontrol, plugins in $PREFIX/lib/slurm"
}

# Steps: (1) RELEASE installed by `build` (run here when missing or
# incomplete). (2) plugins built against RELEASE into target-RELEASE/ by
# `check` (incremental). (3) `cellsched cluster up` with RELEASE's
# sbin/bin/lib and those plugins. (4) checks: both slurmctld plugins logged
# as loaded, `sbatch --help` lists the [cellsched] options, a DL job gets a
# decision in AdminComment, runs and sees the injected plan, a plain job is
# untouched. (5) cluster down (trap).
cmd_live() {
  need_release "${1:-}"
  [ "$(id -u)" = 0 ] || die "must run as root (the cluster's daemons run as root)"
  PREFIX=${CELLSCHED_SLURM_PREFIX:-/opt/cellsched/slurm-$REL}
  DIR=${LIVE_DIR:-/tmp/cs-$REL}
  PORT_BASE=${LIVE_PORT_BASE:-18800}
  FAILS=0
  # --- 1. RELEASE's daemons and commands
  "$0" build "$REL"
  local ver; ver=$("$PREFIX/sbin/slurmctld" -V 2>&1 || true)
  [ "$ver" = "slurm $REL" ] || die "$PREFIX/sbin/slurmctld -V says '$ver', expected 'slurm $REL'"
  # --- 2. plugins against RELEASE, and the cluster CLI
  PLUGIN_DIR=${LIVE_PLUGIN_BUILD_DIR:-}
  if [ -z "$PLUGIN_DIR" ]; then
    local tdir=$ROOT/target-$REL
    PLUGIN_DIR=$tdir/release
    log "building the plugins against $REL (scripts/slurm.sh check $REL, incremental)"
    mkdir -p "$tdir"
    CHECK_TESTS=0 CELLSCHED_CHECK_TARGET_DIR="$tdir" "$0" check "$REL" >"$tdir/live-build.log" 2>&1 \
      || { tail -20 "$tdir/live-build.log" >&2; die "scripts/slurm.sh check $REL failed; see $tdir/live-build.log"; }
    grep '\] ok ' "$tdir/live-build.log" | sed 's/^/  /' | cut -c1-120
  fi
  local c
  for c in site_factor job_submit spank; do
    [ -f "$PLUGIN_DIR/lib${c}_cellsched.so" ] || die "$PLUGIN_DIR/lib${c}_cellsched.so missing (LIVE_PLUGIN_BUILD_DIR?)"
  done
  log "building the cellsched CLI (cargo build --release --bin cellsched)"
  cargo build -q --release --bin cellsched || die "cargo build --release --bin cellsched failed"
  CLI=$ROOT/target/release/cellsched
  # --- 3. the cluster
  trap live_teardown EXIT
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
  live_checks
}

cluster() {
  env CELLSCHED_SLURM_SBIN="$PREFIX/sbin" CELLSCHED_PLUGIN_BUILD_DIR="$PLUGIN_DIR" \
    "$CLI" cluster --dir "$DIR" --port-base "$PORT_BASE" "$@"
}
live_teardown() {
  local rc=$?
  if [ "${LIVE_KEEP:-0}" = 1 ]; then
    log "LIVE_KEEP=1: cluster left up; stop it with: $CLI cluster down --dir $DIR --port-base $PORT_BASE"
  else
    log "bringing the cluster down"; cluster down --cancel-jobs || rc=1
  fi
  log "done in $((SECONDS - T0)) s, $FAILS failed check(s)"
  [ "$FAILS" = 0 ] || rc=1
  exit $rc
}
pass() { log "PASS $*"; }
fail() { log "FAIL $*"; FAILS=$((FAILS + 1)); }

live_checks() {
  # --- 4. checks
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
  JOBS=$DIR/jobs; mkdir -p "$JOBS"
  check_dl_job
  check_plain_job
}

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
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# AdminComment is the rest of its line (it holds spaces).
admin_comment() { scontrol show job "$1" | sed -n 's/^ *AdminComment=//p'; }


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
  log "DL job $dl: JobState=$st NodeList=$(job_field "$dl" NodeList) Features=$(job_field "$dl" Features) AllocTRES=$(job_field "$dl" AllocTRES)"
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
  log "plain job $plain: JobState=$st AdminComment='$ac' NodeList=$(job_field "$plain" NodeList) AllocTRES=$(job_field "$plain" AllocTRES)"
  if [ "$st" = COMPLETED ]; then pass "plain job $plain COMPLETED"; else fail "plain job $plain ended $st"; fi
  if [ -z "$ac" ]; then pass "plain job $plain has no AdminComment"; else fail "plain job $plain got AdminComment '$ac'"; fi
  if [ "$(cat "$JOBS/plain-$plain.out" 2>/dev/null)" = plain-done ]; then
    pass "plain job $plain saw no CELLSCHED_* variable"
  else
    fail "plain job output $JOBS/plain-$plain.out:"; sed 's/^/  /' "$JOBS/plain-$plain.out" 2>/dev/null || true
  fi
}

case $CMD in
  releases) cmd_releases "$@" ;;
  get) [ $# = 2 ] || die "usage: scripts/slurm.sh get RELEASE FIELD"; field "$1" "$2" ;;
  env) cmd_env "$@" ;;
  check) cmd_check "$@" ;;
  build) cmd_build "$@" ;;
  live) cmd_live "$@" ;;
  *) die "usage: scripts/slurm.sh releases|get|env|check|build|live [RELEASE] (see the header of scripts/slurm.sh)" ;;
esac

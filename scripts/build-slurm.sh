#!/usr/bin/env bash
# Builds and installs one Slurm release from its configured source tree into a
# private prefix, with the configure flags a local cluster needs. Optional
# (not part of CI); 7-15 min on 2 cores.
#
# Usage: scripts/build-slurm.sh RELEASE MODE     (idempotent: exits early when installed)
#   RELEASE  22.05.8 | 24.11.5 (any release whose configured tree install-deps.sh fetched)
#   MODE     multiple-slurmd   several slurmd on one host (the 5-node local cluster)
#            front-end         one slurmd serves every node (the emulated >=1,000-node
#                              cluster of `cellsched cluster up --nodes N`)
# Env:   SLURM_SRC_DIR_<R>   configured tree (default /opt/cellsched/src/slurm-RELEASE;
#                            <R> = RELEASE without dots, e.g. SLURM_SRC_DIR_2205)
#        SLURM_BUILD_PREFIX  install prefix (default /opt/cellsched/slurm-RELEASE, or
#                            /opt/cellsched/slurm-RELEASE-fe for front-end)
#        SLURM_BUILD_DIR     scratch build copy (default /opt/cellsched/build/<prefix name>)
#        JOBS                parallel make jobs (default: nproc)
#
# The shared source tree stays untouched (cellsched builds against its headers):
# it is copied to the build dir and configured there with the prefix. Neither
# mode changes a header cellsched's bindings read (HAVE_FRONT_END and
# MULTIPLE_SLURMD appear only in .c files and config.h), so plugins built
# against the install-deps tree of the same release load in either build.
# Result: $PREFIX/sbin/{slurmctld,slurmd,slurmdbd}, $PREFIX/bin/{sbatch,...},
# stock plugins in $PREFIX/lib/slurm (the local cluster's PluginDir source).
set -euo pipefail
REL=${1:-}
MODE=${2:-}
log() { printf '[build-slurm %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf 'build-slurm: error: %s\n' "$*" >&2; exit 1; }
case $REL in [0-9]*.[0-9]*.[0-9]*) ;; *) die "usage: $0 RELEASE multiple-slurmd|front-end (RELEASE like 22.05.8, got '$REL')" ;; esac
case $MODE in
  multiple-slurmd) FLAG=--enable-multiple-slurmd; DEFINE='#define MULTIPLE_SLURMD 1'; SUFFIX="" ;;
  front-end) FLAG=--enable-front-end; DEFINE='#define HAVE_FRONT_END 1'; SUFFIX=-fe ;;
  *) die "MODE must be multiple-slurmd or front-end, got '$MODE'" ;;
esac
short=$(echo "$REL" | cut -d. -f1,2 | tr -d .)
src_var=SLURM_SRC_DIR_$short
SRC=${!src_var:-/opt/cellsched/src/slurm-$REL}
PREFIX=${SLURM_BUILD_PREFIX:-/opt/cellsched/slurm-$REL$SUFFIX}
BUILD=${SLURM_BUILD_DIR:-/opt/cellsched/build/$(basename "$PREFIX")}
JOBS=${JOBS:-$(nproc)}

if [ -x "$PREFIX/sbin/slurmctld" ] && "$PREFIX/sbin/slurmctld" -V 2>/dev/null | grep -qx "slurm $REL" \
   && [ -f "$PREFIX/lib/slurm/accounting_storage_mysql.so" ] \
   && grep -q "^$DEFINE" "$BUILD/config.h" 2>/dev/null \
   && { [ "$MODE" != front-end ] || grep -q 'cellsched emulator' "$BUILD/src/slurmctld/node_mgr.c"; } \
   && [ "$PREFIX/sbin/slurmctld" -nt "$BUILD/src/slurmctld/node_mgr.c" ]; then
  log "Slurm $REL ($MODE) already installed in $PREFIX"; exit 0
fi
command -v mysql_config >/dev/null || command -v mariadb_config >/dev/null \
  || die "mysql_config not found: apt-get install libmariadb-dev libmariadb-dev-compat (slurmdbd's storage plugin needs it)"
[ -x "$SRC/configure" ] || die "no Slurm $REL source tree at $SRC (run scripts/install-deps.sh or set $src_var)"
grep -q "SLURM_VERSION_STRING \"$REL\"" "$SRC/config.h" 2>/dev/null \
  || grep -q "SLURM_VERSION_STRING \"$REL\"" "$SRC/slurm/slurm_version.h" 2>/dev/null \
  || die "$SRC is not Slurm $REL"
for t in make gcc; do command -v $t >/dev/null || die "$t not found (apt-get install build-essential)"; done

t0=$SECONDS
# A build dir already configured for this prefix and mode is reused (make is incremental).
if grep -q "^$DEFINE" "$BUILD/config.h" 2>/dev/null && grep -q "prefix=$PREFIX" "$BUILD/config.log" 2>/dev/null \
   && grep -q '^#define HAVE_MYSQL 1' "$BUILD/config.h"; then
  log "reusing the configured build dir $BUILD"
  cd "$BUILD"
else
  log "copying $SRC to $BUILD"
  rm -rf "$BUILD"; mkdir -p "$(dirname "$BUILD")"
  cp -a "$SRC" "$BUILD"
  cd "$BUILD"
  make distclean >/dev/null 2>&1 || true
  log "configure --prefix=$PREFIX $FLAG (log: $BUILD/configure.log)"
  ./configure --prefix="$PREFIX" --sysconfdir="$PREFIX/etc" --enable-silent-rules \
    --disable-debug "$FLAG" >configure.log 2>&1 || die "configure failed; see $BUILD/configure.log"
  grep -q '^#define HAVE_MYSQL 1' config.h || die "configure found no MySQL/MariaDB client library; see $BUILD/configure.log"
  grep -q "^$DEFINE" config.h || die "configure did not set '$DEFINE'; see $BUILD/configure.log"
fi
# Front-end mode and GRES: the one slurmd registers for every node but, having
# no NodeName of its own, reports no GRES, so stock 22.05 sets every GPU node
# DOWN ("gres/gpu count reported lower than configured (0 < 8)") at each
# front-end registration (start, reconfigure, and about every 7 min), killing
# its jobs. The emulator keeps the configured GRES instead when
# SlurmdParameters=config_overrides is set (as the local cluster sets it).
# Registration only; nothing in the scheduling path changes.
if [ "$MODE" = front-end ] && ! grep -q 'cellsched emulator' src/slurmctld/node_mgr.c; then
  log "patching src/slurmctld/node_mgr.c: front-end registration keeps configured GRES under config_overrides"
  perl -0pi -e 's/(\t\t\t&reason_down\);\n\t\tif \(rc)(\) \{\n\t\t\tif \(!IS_NODE_DOWN\(node_ptr\)\) \{\n\t\t\t\terror\("Setting node %s state to DOWN")/$1 \&\& !(slurm_conf.conf_flags \& CTL_CONF_OR) \/* cellsched emulator *\/$2/' \
    src/slurmctld/node_mgr.c
  grep -q 'cellsched emulator' src/slurmctld/node_mgr.c || die "could not patch src/slurmctld/node_mgr.c (front-end GRES registration)"
fi
# Only src/ (daemons, commands, plugins): Debian's source tree lacks the man pages doc/ wants.
log "make -C src -j$JOBS (log: $BUILD/make.log)"
make -C src -j"$JOBS" >make.log 2>&1 || die "make failed; see $BUILD/make.log (tail: $(tail -3 make.log | tr '\n' ' '))"
log "make -C src install"
make -C src install >install.log 2>&1 || die "make install failed; see $BUILD/install.log"
"$PREFIX/sbin/slurmctld" -V | grep -qx "slurm $REL" || die "$PREFIX/sbin/slurmctld -V is not 'slurm $REL'"
log "installed Slurm $REL ($MODE) in $PREFIX in $((SECONDS - t0)) s: sbin/slurmctld, bin/scontrol, plugins in $PREFIX/lib/slurm"

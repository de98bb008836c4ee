#!/usr/bin/env bash
# Optional (not part of CI): builds and installs Slurm 24.11.5 from source so
# cellsched's plugins can be checked live on that release too (~7 min on 2 cores).
#
# Usage: scripts/build-2411.sh            (idempotent: exits early when installed)
# Env:   SLURM_2411_SRC_DIR    configured 24.11.5 tree from install-deps.sh (default /opt/cellsched/src/slurm-24.11.5)
#        SLURM_2411_PREFIX     install prefix (default /opt/cellsched/slurm-24.11.5)
#        SLURM_2411_BUILD_DIR  scratch build copy (default /opt/cellsched/build/slurm-24.11.5)
#        JOBS                  parallel make jobs (default: nproc)
#
# The shared source tree stays untouched (cellsched builds against its
# headers): it is copied to the build dir and configured there with the prefix.
# Result: $PREFIX/sbin/{slurmctld,slurmd}, $PREFIX/bin/{sbatch,scontrol,...},
# stock plugins in $PREFIX/lib/slurm (use it as the PluginDir source).
set -euo pipefail
SRC=${SLURM_2411_SRC_DIR:-/opt/cellsched/src/slurm-24.11.5}
PREFIX=${SLURM_2411_PREFIX:-/opt/cellsched/slurm-24.11.5}
BUILD=${SLURM_2411_BUILD_DIR:-/opt/cellsched/build/slurm-24.11.5}
JOBS=${JOBS:-$(nproc)}
log() { printf '[build-2411 %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf 'build-2411: error: %s\n' "$*" >&2; exit 1; }

# The local test cluster needs several slurmd on one host (--enable-multiple-slurmd)
# and slurmdbd's MySQL storage plugin (libmariadb-dev at configure time).
if [ -x "$PREFIX/sbin/slurmctld" ] && "$PREFIX/sbin/slurmctld" -V 2>/dev/null | grep -qx 'slurm 24.11.5' \
   && [ -f "$PREFIX/lib/slurm/accounting_storage_mysql.so" ] \
   && grep -q '^#define MULTIPLE_SLURMD 1' "$BUILD/config.h" 2>/dev/null; then
  log "Slurm 24.11.5 already installed in $PREFIX"; exit 0
fi
command -v mysql_config >/dev/null || command -v mariadb_config >/dev/null \
  || die "mysql_config not found: apt-get install libmariadb-dev libmariadb-dev-compat (slurmdbd's storage plugin needs it)"
[ -x "$SRC/configure" ] || die "no Slurm 24.11.5 source tree at $SRC (run scripts/install-deps.sh or set SLURM_2411_SRC_DIR)"
grep -q '^#define SLURM_VERSION_STRING "24.11.5"' "$SRC/config.h" 2>/dev/null \
  || grep -q 'SLURM_VERSION_STRING "24.11.5"' "$SRC/slurm/slurm_version.h" 2>/dev/null \
  || die "$SRC is not Slurm 24.11.5"
for t in make gcc; do command -v $t >/dev/null || die "$t not found (apt-get install build-essential)"; done

t0=$SECONDS
log "copying $SRC to $BUILD"
rm -rf "$BUILD"; mkdir -p "$(dirname "$BUILD")"
cp -a "$SRC" "$BUILD"
cd "$BUILD"
make distclean >/dev/null 2>&1 || true
log "configure --prefix=$PREFIX (log: $BUILD/configure.log)"
./configure --prefix="$PREFIX" --sysconfdir="$PREFIX/etc" --enable-silent-rules \
  --disable-debug --enable-multiple-slurmd >configure.log 2>&1 || die "configure failed; see $BUILD/configure.log"
grep -q '^#define HAVE_MYSQL 1' config.h || die "configure found no MySQL/MariaDB client library; see $BUILD/configure.log"
log "make -j$JOBS (log: $BUILD/make.log)"
make -j"$JOBS" >make.log 2>&1 || die "make failed; see $BUILD/make.log (tail: $(tail -3 make.log | tr '\n' ' '))"
log "make install"
make install >install.log 2>&1 || die "make install failed; see $BUILD/install.log"
"$PREFIX/sbin/slurmctld" -V | grep -qx 'slurm 24.11.5' || die "$PREFIX/sbin/slurmctld -V is not 'slurm 24.11.5'"
log "installed Slurm 24.11.5 in $PREFIX in $((SECONDS - t0)) s: sbin/slurmctld, bin/scontrol, plugins in $PREFIX/lib/slurm"

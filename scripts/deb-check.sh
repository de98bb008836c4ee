#!/usr/bin/env bash
# Checks the Debian package on this machine (as root), end to end:
#   1. make deb (dist build, debug info split off, man pages, completions);
#      make install / make uninstall into a scratch DESTDIR
#   2. a package claiming another Slurm release is refused before anything
#      is unpacked, both as a fresh install and as an upgrade
#   3. dpkg -i of the real package (+ -dbgsym): files, sizes, conffile, man
#      pages, completions, debug files found by build id
#   4. unless --no-e2e: the live e2e suite against the *installed* plugin
#      copies (a local cluster whose plugins come from the package's PluginDir)
#   5. dpkg --purge: every file is gone again
# Not part of CI: it installs into the system and needs a second (dist)
# build; run it by hand after packaging changes. About 4.5 min with the dist
# build made, about 7 min more from cold on 2 cores.
# Usage: scripts/deb-check.sh [--no-e2e]
# Env:   CELLSCHED_CLUSTER_DIR  cluster dir for the e2e run (default /tmp/cs-debcheck)
#        CELLSCHED_PORT_BASE    its port base (default 19000)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
E2E=1
for a in "$@"; do
  case $a in --no-e2e) E2E=0 ;; *) echo "usage: $0 [--no-e2e]" >&2; exit 2 ;; esac
done
export CELLSCHED_CLUSTER_DIR=${CELLSCHED_CLUSTER_DIR:-/tmp/cs-debcheck}
export CELLSCHED_PORT_BASE=${CELLSCHED_PORT_BASE:-19000}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PLUGINDIR=/usr/lib/x86_64-linux-gnu/slurm-wlm
PLUGINS=(site_factor_cellsched job_submit_cellsched spank_cellsched)
FAILS=0; PASSES=0; INSTALLED=0; CLUSTER=0
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { echo "deb-check: $*" >&2; exit 1; }
ok() { PASSES=$((PASSES + 1)); echo "  ok    $*"; }
bad() { FAILS=$((FAILS + 1)); echo "  FAIL  $*"; }
check() { local what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }
status_of() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' ' || true; }

cleanup() {
  local rc=$?
  if [ $CLUSTER = 1 ]; then
    /usr/bin/cellsched cluster down --cancel-jobs --dir "$CELLSCHED_CLUSTER_DIR" >/dev/null 2>&1 \
      || "$TARGET_DIR/release/cellsched" cluster down --cancel-jobs --dir "$CELLSCHED_CLUSTER_DIR" >/dev/null 2>&1 || true
  fi
  if [ $INSTALLED = 1 ]; then dpkg --purge cellsched-dbgsym cellsched >/dev/null 2>&1 || true; fi
  [ -n "${LINKS:-}" ] && rm -rf "$LINKS"
  exit $rc
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || die "run as root (it installs and removes the package)"
# Never touch an installation this script did not make.
[ -z "$(status_of cellsched)" ] || [ "$(status_of cellsched)" = un ] \
  || die "package cellsched is already on this machine ($(status_of cellsched)); remove it first: dpkg --purge cellsched-dbgsym cellsched"
for f in /usr/bin/cellsched "$PLUGINDIR/site_factor_cellsched.so" "$PLUGINDIR/job_submit_cellsched.so" "$PLUGINDIR/spank_cellsched.so"; do
  [ ! -e "$f" ] || die "$f exists but belongs to no cellsched package (make install?); remove it first (make uninstall)"
done

log "1. make deb"
T0=$(date +%s)
mapfile -t DEBS < <(make -s deb | grep '\.deb$')
[ ${#DEBS[@]} = 2 ] || die "make deb did not name two packages"
DEB=${DEBS[0]}; DBGDEB=${DEBS[1]}
log "   built $(basename "$DEB") ($(stat -c %s "$DEB") bytes) and $(basename "$DBGDEB") in $(( $(date +%s) - T0 ))s"
HAVE_SLURM=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
check "Depends pins slurm-wlm-basic-plugins (= $HAVE_SLURM)" \
  grep -qF "slurm-wlm-basic-plugins (= $HAVE_SLURM)" <(dpkg-deb -f "$DEB" Depends)
check "conffile /etc/slurm/plugstack.conf.d/cellsched.conf" \
  grep -qx /etc/slurm/plugstack.conf.d/cellsched.conf <(dpkg-deb -I "$DEB" conffiles)

D=$(mktemp -d /tmp/cellsched-destdir.XXXXXX)
make -s install-staged DESTDIR="$D" >/dev/null
n=$(find "$D" -type f | wc -l)
check "make install DESTDIR= installs $n files (CLI, 3 plugins, 4 debug files, man pages, 3 completions, snippet)" \
  test "$n" -eq $(( 1 + 3 + 4 + $(ls "$TARGET_DIR/stage/man" | wc -l) + 3 + 1 ))
make -s uninstall DESTDIR="$D" >/dev/null
check "make uninstall DESTDIR= removes every file" test -z "$(find "$D" -type f)"
rm -rf "$D"

log "2. a package built for another Slurm release is refused"
mapfile -t BAD < <(CELLSCHED_DEB_SLURM_VERSION=99.99.99-1 CELLSCHED_DEB_NAME_SUFFIX=.mismatch \
  packaging/deb/build-deb.sh "$TARGET_DIR/stage" "$TARGET_DIR/deb")
BADDEB=${BAD[0]}
INSTALLED=1
if out=$(dpkg -i "$BADDEB" 2>&1); then bad "fresh install of the mismatched package succeeded"; else
  if grep -q "built for Slurm 99.99.99" <<<"$out"; then ok "fresh install refused: $(grep -m1 'slurm-wlm-basic-plugins .* is installed' <<<"$out")"; else bad "refused without the release message: $out"; fi
fi
check "nothing unpacked after the refusal" test ! -e /usr/bin/cellsched -a ! -e "$PLUGINDIR/spank_cellsched.so"
st=$(status_of cellsched); check "package not installed after the refusal (status '${st:-none}')" test "$st" != ii -a "$st" != iU -a "$st" != iF
dpkg --purge cellsched >/dev/null 2>&1 || true

log "3. install the real package"
if dpkg -i "$DEB" "$DBGDEB" >/tmp/deb-check-install.log 2>&1; then ok "dpkg -i $(basename "$DEB") $(basename "$DBGDEB")"; else
  bad "dpkg -i failed: $(tail -5 /tmp/deb-check-install.log)"; die "cannot continue"; fi
check "cellsched installed (ii)" test "$(status_of cellsched)" = ii
check "cellsched-dbgsym installed (ii)" test "$(status_of cellsched-dbgsym)" = ii
for p in "${PLUGINS[@]}"; do
  f=$PLUGINDIR/$p.so
  if [ -f "$f" ]; then
    s=$(stat -c %s "$f")
    if [ "$s" -le $((5 * 1024 * 1024)) ]; then ok "$f: $s bytes (<= 5 MiB)"; else bad "$f: $s bytes (> 5 MiB)"; fi
    check "$f has no .debug_info and a .gnu_debuglink" bash -c "! readelf -S '$f' | grep -q '\.debug_info' && readelf -S '$f' | grep -q gnu_debuglink"
    id=$(readelf -n "$f" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
    dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    check "$f debug info in $dbg (line tables)" bash -c "readelf -S '$dbg' | grep -q '\.debug_line'"
  else bad "$f missing"; fi
done
s=$(stat -c %s /usr/bin/cellsched)
if [ "$s" -le $((15 * 1024 * 1024)) ]; then ok "/usr/bin/cellsched: $s bytes (<= 15 MiB)"; else bad "/usr/bin/cellsched: $s bytes (> 15 MiB)"; fi
rel=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 }' <<<"${HAVE_SLURM%%-*}")   # 22.05.8 -> 22.5.8 as --version prints it
check "/usr/bin/cellsched --version names Slurm $rel" grep -q "Slurm $rel)" <(/usr/bin/cellsched --version)
for page in cellsched cellsched-cluster cellsched-cluster-up cellsched-report spank_cellsched; do
  check "man -w $page" man -w "$page"
done
check "man spank_cellsched renders plan_dir=" grep -q "plan_dir=" <(MANPAGER=cat man spank_cellsched 2>/dev/null)
for f in /usr/share/bash-completion/completions/cellsched /usr/share/zsh/vendor-completions/_cellsched \
         /usr/share/fish/vendor_completions.d/cellsched.fish /etc/slurm/plugstack.conf.d/cellsched.conf \
         /usr/share/doc/cellsched/README.md /usr/share/doc/cellsched/copyright \
         /usr/share/doc/cellsched/examples/slurm.conf /usr/share/doc/cellsched/examples/cellsched.toml; do
  check "$f" test -s "$f"
done
check "plugstack snippet names the installed SPANK plugin" grep -q "^optional $PLUGINDIR/spank_cellsched.so" /etc/slurm/plugstack.conf.d/cellsched.conf
check "bash completion loads" bash -c 'source /usr/share/bash-completion/completions/cellsched && complete -p cellsched'

log "   an upgrade to a mismatched package is refused and keeps the installed one"
before=$(sha256sum "$PLUGINDIR/spank_cellsched.so")
if dpkg -i "$BADDEB" >/tmp/deb-check-bad.log 2>&1; then bad "upgrade to the mismatched package succeeded"; else ok "upgrade refused"; fi
check "installed package still ii" test "$(status_of cellsched)" = ii
check "installed plugin unchanged" test "$(sha256sum "$PLUGINDIR/spank_cellsched.so")" = "$before"

if [ $E2E = 1 ]; then
  log "4. live e2e suite against the installed plugins ($CELLSCHED_CLUSTER_DIR, port base $CELLSCHED_PORT_BASE)"
  # The cluster and the tests take plugins from CELLSCHED_PLUGIN_BUILD_DIR
  # under cargo's names (libNAME.so): point those names at the installed files.
  LINKS=$(mktemp -d /tmp/cellsched-installed-plugins.XXXXXX)
  for p in "${PLUGINS[@]}"; do ln -s "$PLUGINDIR/$p.so" "$LINKS/lib$p.so"; done
  export CELLSCHED_PLUGIN_BUILD_DIR=$LINKS
  CLUSTER=1
  /usr/bin/cellsched cluster up --dir "$CELLSCHED_CLUSTER_DIR" --port-base "$CELLSCHED_PORT_BASE"
  for p in "${PLUGINS[@]}"; do
    check "cluster runs the installed $p.so" cmp "$PLUGINDIR/$p.so" "$CELLSCHED_CLUSTER_DIR/plugins/$p.so"
  done
  T1=$(date +%s)
  if CELLSCHED_E2E=1 cargo test --release --test integration --no-fail-fast -- --test-threads=4 2>&1 | tee /tmp/deb-check-e2e.log | grep -E '^test result|FAILED|panicked'; then :; fi
  if grep -q '^test result: ok' /tmp/deb-check-e2e.log && ! grep -q '^test result: FAILED' /tmp/deb-check-e2e.log; then
    ok "e2e suite on the installed plugins: $(grep '^test result' /tmp/deb-check-e2e.log | tail -1) ($(( $(date +%s) - T1 ))s)"
  else bad "e2e suite on the installed plugins (log: /tmp/deb-check-e2e.log)"; fi
  /usr/bin/cellsched cluster down --cancel-jobs --dir "$CELLSCHED_CLUSTER_DIR" && CLUSTER=0
fi

log "5. remove the package"
if dpkg --purge cellsched-dbgsym cellsched >/dev/null 2>&1; then ok "dpkg --purge"; else bad "dpkg --purge"; fi
INSTALLED=0
for f in /usr/bin/cellsched "$PLUGINDIR/spank_cellsched.so" "$PLUGINDIR/job_submit_cellsched.so" \
         "$PLUGINDIR/site_factor_cellsched.so" /etc/slurm/plugstack.conf.d/cellsched.conf \
         /usr/share/man/man1/cellsched.1.gz /usr/share/man/man8/spank_cellsched.8.gz /usr/share/doc/cellsched; do
  check "$f removed" test ! -e "$f"
done
printf '\ndeb-check: %d passed, %d failed\n' "$PASSES" "$FAILS"
[ $FAILS = 0 ]

#!/usr/bin/env bash
# Installs everything cellsched needs on Debian 12 (bookworm), idempotently:
#   - Slurm 22.05.8 packages (daemons, client, dev headers), munge, MariaDB, libclang,
#     and a Rust toolchain (Debian's cargo-web) when none is on PATH;
#     groff-base and man-db (the man page tests render every page), binutils
#     (objcopy/readelf: make install and make deb split off debug info)
#   - the configured source tree of every Slurm release in scripts/slurm-releases
#     (read through scripts/slurm.sh) under $CELLSCHED_SRC_ROOT: 22.05.8 from
#     bookworm deb-src, 24.11.5 from the orig tarball of trixie's deb-src
# Usage: scripts/install-deps.sh                  (needs root) everything above: a machine for the demo and tests
#        scripts/install-deps.sh --headers-only   (needs root) build dependencies only, for a build host or a
#            production controller: Slurm's development headers of the installed release, the compilers,
#            libclang, and the configured source trees. It installs no daemon package (no slurmctld, slurmd,
#            slurmdbd, munge or MariaDB), never starts, stops or replaces a service, adds no policy-rc.d,
#            and adds the deb-src entries only when a source tree still has to be fetched.
# Env:   CELLSCHED_SRC_ROOT  where Slurm source trees go (default /opt/cellsched/src)
#        CELLSCHED_SLURM_RELEASES  the releases whose source trees to fetch, space separated
#                            (default: all in the table; the packaged release is always fetched)
set -euo pipefail
MODE=all
case "${1:-}" in
  "") ;;
  --headers-only|--build-deps) MODE=headers ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) printf 'install-deps: error: unknown argument %s (use --headers-only, or none)\n' "$1" >&2; exit 2 ;;
esac
SRC_ROOT=${CELLSCHED_SRC_ROOT:-/opt/cellsched/src}
SLURM_SH=$(cd "$(dirname "$0")" && pwd)/slurm.sh
# The release whose Debian packages are installed (its headers are /usr/include's),
# pinned to the exact Debian version of its source row.
SYSTEM_RELEASE=$("$SLURM_SH" releases --system)
SYSTEM_SOURCE=$("$SLURM_SH" get "$SYSTEM_RELEASE" source)
SLURM_DEB_VERSION=${SYSTEM_SOURCE#*=}
RELEASES=$(printf '%s\n' "$SYSTEM_RELEASE" ${CELLSCHED_SLURM_RELEASES:-$("$SLURM_SH" releases)} | awk '!seen[$0]++')
SUITES=$(for r in $("$SLURM_SH" releases); do "$SLURM_SH" get "$r" suite; done | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//')
log() { printf '[install-deps %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get and Slurm daemons need it)"
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || log "warning: tested on Debian 12 (bookworm); this is ${PRETTY_NAME:-unknown}"

export DEBIAN_FRONTEND=noninteractive
# Source-only entries: binary packages keep coming from bookworm.
# Suites: those of every release in the table (a new release's suite is added).
SRC_LIST=/etc/apt/sources.list.d/cellsched-src.sources
SRC_ENTRY="Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $SUITES
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
# Source trees still to fetch: only they need the deb-src entries.
need_src=
for rel in $RELEASES; do [ -d "$SRC_ROOT/slurm-$rel" ] || need_src=1; done
if { [ "$MODE" = all ] || [ -n "$need_src" ]; } && { [ ! -f "$SRC_LIST" ] || ! grep -qxF "Suites: $SUITES" "$SRC_LIST"; }; then
  log "adding deb-src entries for $SUITES"
  printf '%s\n' "$SRC_ENTRY" > "$SRC_LIST"
  NEED_UPDATE=1
fi
# Build dependencies: Slurm's headers of the installed release, compilers,
# libclang (bindgen), man-page and debug-info tools.
BUILD_PKGS=(libslurm-dev slurm-wlm-basic-plugins-dev libclang-dev clang pkg-config
      build-essential dpkg-dev xz-utils python3 groff-base man-db binutils)
if [ "$MODE" = headers ]; then
  PKGS=("${BUILD_PKGS[@]}")
else
  # Everything for the local test cluster too: the daemons, munge, MariaDB.
  PKGS=(slurmctld slurmd slurm-client slurmdbd munge libmunge-dev mariadb-server mariadb-client
        libmariadb-dev libmariadb-dev-compat procps iproute2 "${BUILD_PKGS[@]}")
  # Stop the Debian packages from starting their own daemons on install.
  if [ ! -f /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
    POLICY_ADDED=1
  fi
fi
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ "$MODE" = headers ] && [ ${#missing[@]} -gt 0 ] \
   && dpkg-query -W -f='${Status}' slurm-wlm-basic-plugins 2>/dev/null | grep -q 'ok installed'; then
  # Headers of another release than the installed one would build plugins
  # Slurm refuses: take them at the installed plugins' exact version.
  run_ver=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
  for i in "${!missing[@]}"; do
    case "${missing[$i]}" in libslurm-dev|slurm-wlm-basic-plugins-dev) missing[$i]="${missing[$i]}=$run_ver" ;; esac
  done
fi
if [ ${#missing[@]} -gt 0 ] || [ -n "${NEED_UPDATE:-}" ]; then
  log "apt-get update"
  apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -n "${POLICY_ADDED:-}" ] && rm -f /usr/sbin/policy-rc.d
# Rust: use the toolchain already on PATH (rustup's ~/.cargo/bin included);
# otherwise Debian 12's cargo-web/rustc-web (newer than Cargo.toml's rust-version,
# the MSRV; bookworm's plain rustc 1.63 is too old).
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null 2>&1; then
  log "no cargo on PATH: installing Debian's cargo-web"
  apt-get install -y -qq --no-install-recommends cargo-web >/dev/null || die "cannot install cargo-web; install Rust >= 1.85 (e.g. rustup) and rerun"
fi
log "using $(cargo --version)"
inst=$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null || echo none)
[ "$inst" = "$SLURM_DEB_VERSION" ] || log "warning: libslurm-dev is $inst; the packaged release of scripts/slurm-releases is $SLURM_DEB_VERSION"

mkdir -p "$SRC_ROOT"
configure_tree() { # dir
  local d=$1
  if [ ! -f "$d/config.h" ]; then
    log "configuring $d (about 30 s)"
    (cd "$d" && ./configure --quiet --prefix=/usr --sysconfdir=/etc/slurm --enable-silent-rules >"$d/.cellsched-configure.log" 2>&1) \
      || die "configure failed in $d; see $d/.cellsched-configure.log"
  fi
}
# fetch_tree RELEASE DIR: the release's source package as its table row says.
fetch_tree() {
  local rel=$1 dest=$2 src pkg ver up tmp tb d
  src=$("$SLURM_SH" get "$rel" source); pkg=${src%%=*}; ver=${src#*=}; up=${ver%%-*}
  tmp=$(mktemp -d "$SRC_ROOT/.fetch.XXXX")
  if [[ $ver == *-\* ]]; then
    # Only the upstream orig tarball is used, so any Debian revision will do
    # (e.g. trixie replaces 24.11.5-4 with security updates such as -4+deb13u1).
    ver=$(apt-cache showsrc "$pkg" 2>/dev/null | sed -n "s/^Version: \(${up//./\\.}-.*\)/\1/p" | sort -V | tail -1)
    [ -n "$ver" ] || die "no $pkg $up-* source package found (is the $("$SLURM_SH" get "$rel" suite) deb-src entry in $SRC_LIST reachable? try apt-get update)"
    log "fetching $pkg $ver orig tarball"
    (cd "$tmp" && apt-get source --download-only -qq "$pkg=$ver" >/dev/null 2>&1) || true
    tb=$(find "$tmp" -maxdepth 1 -name "${pkg}_${up}.orig.tar.*" | head -1)
    [ -n "$tb" ] || die "could not download ${pkg}_${up}.orig tarball (deb-src for $("$SLURM_SH" get "$rel" suite) reachable?)"
    tar -C "$tmp" -xf "$tb"
    d=$(find "$tmp" -maxdepth 1 -type d \( -name "slurm-${up}*" -o -name "slurm-slurm-${up//./-}*" \) | head -1)
    [ -n "$d" ] || die "unexpected layout of $tb"
  else
    log "fetching $pkg $ver source"
    (cd "$tmp" && apt-get source -qq "$pkg=$ver" >/dev/null 2>&1) || die "apt-get source $pkg=$ver failed (deb-src for $("$SLURM_SH" get "$rel" suite) reachable?)"
    d=$tmp/$pkg-$up
    [ -d "$d" ] || die "apt-get source $pkg=$ver made no $d"
  fi
  mv "$d" "$dest"; rm -rf "$tmp"
}
done_list=()
for rel in $RELEASES; do
  d="$SRC_ROOT/slurm-$rel"
  [ -d "$d" ] || fetch_tree "$rel" "$d"
  configure_tree "$d"
  done_list+=("$d ($rel)")
done
log "done: SLURM_SRC_DIR=${done_list[0]}${done_list[1]:+, other releases: ${done_list[*]:1}}"

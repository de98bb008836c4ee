#!/usr/bin/env bash
# Installs everything cellsched needs on Debian 12 (bookworm), idempotently:
#   - Slurm 22.05.8 packages (daemons, client, dev headers), munge, MariaDB, libclang,
#     and a Rust toolchain (Debian's cargo-web) when none is on PATH;
#     groff-base and man-db (the man page tests render every page), binutils
#     (objcopy/readelf: make install and make deb split off debug info)
#   - the configured source trees of Slurm 22.05.8 (bookworm deb-src) and
#     24.11.5 (orig tarball from trixie deb-src) under $CELLSCHED_SRC_ROOT
# Usage: scripts/install-deps.sh            (needs root)
# Env:   CELLSCHED_SRC_ROOT  where Slurm source trees go (default /opt/cellsched/src)
#        CELLSCHED_SKIP_2411=1  skip the 24.11.5 source tree
set -euo pipefail
SRC_ROOT=${CELLSCHED_SRC_ROOT:-/opt/cellsched/src}
SLURM_DEB_VERSION=22.05.8-4+deb12u3
# 24.11.5: only the upstream orig tarball is used, so any Debian revision of it
# will do (trixie replaces 24.11.5-4 with security updates such as -4+deb13u1).
SLURM_2411_UPSTREAM=24.11.5
log() { printf '[install-deps %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get and Slurm daemons need it)"
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || log "warning: tested on Debian 12 (bookworm); this is ${PRETTY_NAME:-unknown}"

export DEBIAN_FRONTEND=noninteractive
# Source-only entries: binary packages keep coming from bookworm.
SRC_LIST=/etc/apt/sources.list.d/cellsched-src.sources
if [ ! -f "$SRC_LIST" ]; then
  log "adding deb-src entries for bookworm and trixie"
  cat > "$SRC_LIST" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  NEED_UPDATE=1
fi
# Stop the Debian packages from starting their own daemons on install.
if [ ! -f /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  POLICY_ADDED=1
fi
PKGS=(slurmctld slurmd slurm-client slurmdbd libslurm-dev slurm-wlm-basic-plugins-dev
      munge libmunge-dev mariadb-server mariadb-client libmariadb-dev libmariadb-dev-compat libclang-dev clang pkg-config
      build-essential dpkg-dev xz-utils procps iproute2 python3
      groff-base man-db binutils)
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
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
# otherwise Debian 12's cargo-web/rustc-web (1.85+; bookworm's plain rustc 1.63 is too old).
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
if ! command -v cargo >/dev/null 2>&1; then
  log "no cargo on PATH: installing Debian's cargo-web (Rust >= 1.85)"
  apt-get install -y -qq --no-install-recommends cargo-web >/dev/null || die "cannot install cargo-web; install Rust >= 1.77 (e.g. rustup) and rerun"
fi
log "using $(cargo --version)"
inst=$(dpkg-query -W -f='${Version}' slurmctld)
[ "$inst" = "$SLURM_DEB_VERSION" ] || log "warning: slurmctld is $inst, expected $SLURM_DEB_VERSION"

mkdir -p "$SRC_ROOT"
configure_tree() { # dir
  local d=$1
  if [ ! -f "$d/config.h" ]; then
    log "configuring $d (about 30 s)"
    (cd "$d" && ./configure --quiet --prefix=/usr --sysconfdir=/etc/slurm --enable-silent-rules >"$d/.cellsched-configure.log" 2>&1) \
      || die "configure failed in $d; see $d/.cellsched-configure.log"
  fi
}
# Slurm 22.05.8: the release of the installed packages.
D2205="$SRC_ROOT/slurm-22.05.8"
if [ ! -d "$D2205" ]; then
  log "fetching slurm-wlm $SLURM_DEB_VERSION source"
  tmp=$(mktemp -d "$SRC_ROOT/.fetch.XXXX")
  (cd "$tmp" && apt-get source -qq "slurm-wlm=$SLURM_DEB_VERSION" >/dev/null 2>&1) || die "apt-get source slurm-wlm=$SLURM_DEB_VERSION failed (deb-src for bookworm reachable?)"
  mv "$tmp"/slurm-wlm-22.05.8 "$D2205"; rm -rf "$tmp"
fi
configure_tree "$D2205"
# Slurm 24.11.5: orig tarball from trixie; the Debian diff is not needed.
D2411="$SRC_ROOT/slurm-24.11.5"
if [ -z "${CELLSCHED_SKIP_2411:-}" ] && [ ! -d "$D2411" ]; then
  v2411=$(apt-cache showsrc slurm-wlm 2>/dev/null | sed -n "s/^Version: \(${SLURM_2411_UPSTREAM//./\\.}-.*\)/\1/p" | sort -V | tail -1)
  [ -n "$v2411" ] || die "no slurm-wlm $SLURM_2411_UPSTREAM-* source package found (is the trixie deb-src entry in $SRC_LIST reachable? try apt-get update)"
  log "fetching slurm-wlm $v2411 orig tarball"
  tmp=$(mktemp -d "$SRC_ROOT/.fetch.XXXX")
  (cd "$tmp" && apt-get source --download-only -qq "slurm-wlm=$v2411" >/dev/null 2>&1) || true
  tb=$(find "$tmp" -maxdepth 1 -name "slurm-wlm_${SLURM_2411_UPSTREAM}.orig.tar.*" | head -1)
  [ -n "$tb" ] || die "could not download slurm-wlm_${SLURM_2411_UPSTREAM}.orig tarball (deb-src for trixie reachable?)"
  tar -C "$tmp" -xf "$tb"
  src=$(find "$tmp" -maxdepth 1 -type d \( -name 'slurm-24.11.5*' -o -name 'slurm-slurm-24-11-5*' \) | head -1)
  [ -n "$src" ] || die "unexpected layout of $tb"
  mv "$src" "$D2411"; rm -rf "$tmp"
fi
[ -z "${CELLSCHED_SKIP_2411:-}" ] && configure_tree "$D2411"
log "done: SLURM_SRC_DIR=$D2205 (22.05.8), $D2411 (24.11.5)"

#!/usr/bin/env bash
# Builds cellsched against Slurm 24.11.5 headers and checks the plugin .so files.
#
# Usage: scripts/check-2411.sh [CRATE...]      (or --no-plugins: only slurm-sys, common and its smoke example)
#   CRATE: plugin crates to build (default: site_factor_cellsched job_submit_cellsched spank_cellsched)
# Env:  SLURM_2411_SRC_DIR  configured 24.11.5 source tree (default /opt/cellsched/src/slurm-24.11.5)
#       CARGO_TARGET_DIR    build dir (default target-2411, kept apart from the 22.05.8 build)
#       CHECK_2411_TESTS=0  skip the unit tests of slurm-sys and cellsched-plugin-common
#
# Steps: unit tests of slurm-sys + cellsched-plugin-common against 24.11.5;
# release builds of those, the smoke-test example plugin and each CRATE; then
# for every .so: `plugin_version` equals 24.11.5's SLURM_VERSION_NUMBER
# (0x180b05), plugin_name/plugin_type are exported, and no BIND_NOW is set.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${SLURM_2411_SRC_DIR:-/opt/cellsched/src/slurm-24.11.5}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target-2411}
if [ "${1:-}" = --no-plugins ]; then CRATES=(); elif [ $# -gt 0 ]; then CRATES=("$@"); else CRATES=(site_factor_cellsched job_submit_cellsched spank_cellsched); fi

log() { printf '[check-2411 %(%H:%M:%S)T] %s\n' -1 "$*"; }
die() { printf 'check-2411: error: %s\n' "$*" >&2; exit 1; }

[ -f "$SRC/slurm/slurm_version.h" ] || die "no Slurm 24.11.5 source tree at $SRC (run scripts/install-deps.sh or set SLURM_2411_SRC_DIR)"
[ -f "$SRC/config.h" ] || die "$SRC is not configured (no config.h); run scripts/install-deps.sh"
expected=$(awk '$1=="#define" && $2=="SLURM_VERSION_NUMBER" {print $3}' "$SRC/slurm/slurm_version.h")
[ -n "$expected" ] || die "no SLURM_VERSION_NUMBER in $SRC/slurm/slurm_version.h"
expected=$(printf '0x%06x' "$expected")
export SLURM_SRC_DIR="$SRC" SLURM_INCLUDE_DIR="$SRC"
log "Slurm source $SRC (SLURM_VERSION_NUMBER $expected), CARGO_TARGET_DIR=$CARGO_TARGET_DIR"

if [ "${CHECK_2411_TESTS:-1}" != 0 ]; then
  log "unit tests: slurm-sys, cellsched-plugin-common"
  cargo test -q -p slurm-sys -p cellsched-plugin-common
fi

pkgs=(-p slurm-sys -p cellsched-plugin-common)
for c in "${CRATES[@]+"${CRATES[@]}"}"; do pkgs+=(-p "$c"); done
log "cargo build --release ${pkgs[*]}"
cargo build --release "${pkgs[@]}"
log "cargo build --release --example site_factor_cellsched_smoke"
cargo build --release -p cellsched-plugin-common --example site_factor_cellsched_smoke

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

check_so() { # name path
  local name=$1 so=$2 v
  [ -f "$so" ] || die "$name: $so was not built"
  v=$(plugin_version_of "$so") || die "$name: $so exports no plugin_version"
  [ "$v" = "$expected" ] || die "$name: plugin_version is $v, Slurm 24.11.5 needs $expected"
  for s in plugin_name plugin_type; do
    nm -D --defined-only "$so" | awk '{print $3}' | grep -qx "$s" || die "$name: $so does not export $s"
  done
  if readelf -d "$so" | grep -qE 'BIND_NOW|FLAGS_1.*NOW'; then die "$name: $so is linked with BIND_NOW (needs -z lazy)"; fi
  log "ok $name: plugin_version=$v, exports: $(nm -D --defined-only "$so" | awk '{printf "%s ", $3}')"
}

check_so site_factor_cellsched_smoke "$CARGO_TARGET_DIR/release/examples/libsite_factor_cellsched_smoke.so"
for c in "${CRATES[@]+"${CRATES[@]}"}"; do check_so "$c" "$CARGO_TARGET_DIR/release/lib$c.so"; done
log "all ${#CRATES[@]} plugin crate(s) + smoke example built for Slurm 24.11.5"

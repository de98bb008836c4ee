#!/usr/bin/env bash
# The whole cellsched test suite, from a fresh Debian 12 machine (as root):
#   install deps -> build (release) -> unit tests -> live cluster up ->
#   end-to-end tests -> build check against every release the table marks
#   for CI (scripts/slurm-releases: 24.11.5) -> cluster down.
# Prints the time of each phase. Exit status is non-zero if anything fails.
# Env: CELLSCHED_TEST_DIR   cluster dir for the run (default /tmp/cellsched-test)
#      CELLSCHED_PORT_BASE  port base for the test cluster (default 17900)
#      CELLSCHED_SKIP_RELEASE_CHECKS=1  skip the build checks against other Slurm releases
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export CELLSCHED_CLUSTER_DIR=${CELLSCHED_TEST_DIR:-/tmp/cellsched-test}
export CELLSCHED_PORT_BASE=${CELLSCHED_PORT_BASE:-17900}
export CARGO_TERM_COLOR=never
T0=$(date +%s); PHASE_T=$T0; SUMMARY=""
phase() { # name
  local now; now=$(date +%s)
  [ -n "${PHASE_NAME:-}" ] && SUMMARY+=$(printf '%-28s %5ds\\n' "$PHASE_NAME" $((now - PHASE_T)))
  PHASE_NAME=$1; PHASE_T=$now
  printf '\n=== [%(%H:%M:%S)T] %s\n' -1 "$1"
}
finish() {
  local rc=$?
  phase "done"
  if [ -x target/release/cellsched ]; then
    # The shared test cluster, plus private ones a killed test run may have left.
    for d in "$CELLSCHED_CLUSTER_DIR" /tmp/cs-e2e-*; do
      [ -d "$d/etc" ] && target/release/cellsched cluster down --cancel-jobs --dir "$d" || true
    done
  fi
  printf '\n=== phase timings\n%b' "$SUMMARY"
  printf '%-28s %5ds\n' total $(( $(date +%s) - T0 ))
  exit $rc
}
trap finish EXIT

phase "install dependencies"
bash scripts/install-deps.sh
# shellcheck disable=SC1091
command -v cargo >/dev/null || { [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"; }

phase "build (release)"
cargo build --release --workspace --all-targets

phase "unit and CLI tests"
cargo test --release --workspace --no-fail-fast

phase "live cluster up"
target/release/cellsched cluster up --dir "$CELLSCHED_CLUSTER_DIR" --port-base "$CELLSCHED_PORT_BASE"

phase "end-to-end tests (live cluster)"
CELLSCHED_E2E=1 cargo test --release --test integration --no-fail-fast -- --test-threads=4

if [ -z "${CELLSCHED_SKIP_RELEASE_CHECKS:-}" ]; then
  for rel in $(scripts/slurm.sh releases --ci); do
    phase "build check: Slurm $rel"
    bash scripts/slurm.sh check "$rel"
  done
fi

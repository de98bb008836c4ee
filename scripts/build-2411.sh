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
# The local test cluster needs several slurmd on one host, so this is
# scripts/build-slurm.sh 24.11.5 multiple-slurmd (which see).
set -euo pipefail
export SLURM_SRC_DIR_2411=${SLURM_2411_SRC_DIR:-/opt/cellsched/src/slurm-24.11.5}
export SLURM_BUILD_PREFIX=${SLURM_2411_PREFIX:-/opt/cellsched/slurm-24.11.5}
export SLURM_BUILD_DIR=${SLURM_2411_BUILD_DIR:-/opt/cellsched/build/slurm-24.11.5}
exec "$(dirname "$0")/build-slurm.sh" 24.11.5 multiple-slurmd

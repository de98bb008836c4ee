//! cellsched's one integration-test binary: end-to-end tests against the
//! live local Slurm cluster and the built CLI. Live-cluster tests run when
//! `CELLSCHED_E2E=1` (scripts/test.sh sets it) and are skipped otherwise.
mod common;
mod cluster;
mod cli;
mod spank;
mod placement;
mod modify;
mod report;
mod sim;
mod doctor;
mod whatif;
mod emulated;
mod docs;
mod install;
mod hardening;
mod elastic;

//! cellsched's one integration-test binary: end-to-end tests against the
//! live local Slurm cluster and the built CLI.

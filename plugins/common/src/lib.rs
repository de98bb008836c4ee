//! Thin FFI helpers shared by the cellsched Slurm plugins: logging through Slurm's logger, panic guards, C strings

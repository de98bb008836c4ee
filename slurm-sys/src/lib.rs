//! Bindgen bindings to Slurm public headers and slurmctld internal headers of the same release

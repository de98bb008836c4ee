//! SPANK plugin: cellsched DL options on sbatch/srun/salloc and injection of the chosen plan

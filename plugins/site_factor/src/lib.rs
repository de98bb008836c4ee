//! site_factor/cellsched: A-SRPT ordering as a Slurm priority site factor

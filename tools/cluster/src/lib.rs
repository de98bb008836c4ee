//! A live heterogeneous Slurm cluster on localhost (slurmctld, slurmd nodes, slurmdbd, MariaDB)

//! job_submit/cellsched: Cell/GRES-type-aware placement and re-planning inside slurmctld

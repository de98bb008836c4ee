//! Slurm's own text, parsed once: hostlist expressions, GRES/TRES strings
//! and slurm.conf/gres.conf lines. Every crate that reads these (the
//! plugins, `cellsched doctor`, reports, the simulator's snapshot) calls
//! here.
mod conf;
mod gres;
mod hostlist;
mod split;

pub use conf::{conf_line_pairs, gres_conf_gpu_type, show_config_value, slurm_conf_gpu_type};
pub use gres::{gpu_entries, gpu_request, parse_tres_gpus, strip_tres_gres_prefix, with_untyped_gpus, without_gpus, GpuRequest, GRES_PREFIX_2205};
pub use hostlist::{first_host, hostlist_contains, hostlist_entries, hostlist_expand};
pub use split::split_top_level;

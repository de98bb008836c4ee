//! Bindgen bindings to Slurm's public headers (`slurm.h`, `spank.h`,
//! `slurm_errno.h`) and slurmctld's internal headers of the *same* release,
//! plus a small C shim with stable accessors.
//!
//! # Build inputs
//! - `SLURM_INCLUDE_DIR` (default `/usr/include`; with only `SLURM_SRC_DIR`
//!   set, that tree's `slurm/` headers) and `SLURM_SRC_DIR` (default
//!   `/opt/cellsched/src/slurm-<release of the headers>`, configured so that
//!   `config.h` exists). The build fails naming the missing file or the two
//!   mismatching releases.
//!
//! # Contents
//! - [`SLURM_VERSION_NUMBER`], [`RELEASE`], [`SLURM_API_VERSION`]: the
//!   release built against. Every plugin's `plugin_version` must equal
//!   `SLURM_VERSION_NUMBER` or Slurm refuses it.
//! - Sentinels typed as the fields that hold them ([`NO_VAL`] `u32`,
//!   [`NO_VAL64`] `u64`, [`NO_VAL16`] `u16`, [`INFINITE`], [`NICE_OFFSET`], ...).
//! - Raw bindings (`job_desc_msg_t`, `spank_*`, `job_record`, `lock_slurmctld`,
//!   ...). Rust code must not name slurmctld-only symbols (`job_list`,
//!   `lock_slurmctld`, `update_job`, ...) directly: outside slurmctld they do
//!   not exist. Use the shim.
//! - `SLURM_BIT(n)` flags from `slurm.h` (`JOB_REQUEUE`, `NODE_STATE_DRAIN`, ...) as `u64`.
//! - [`compat`]: the release differences Rust code needs to know.
//! - [`shim`]: the C accessors, compiled against the same source tree.
//!
//! # Shim contract (`shim/cellsched_shim.h`)
//! All Slurm symbols are resolved lazily with `dlsym(RTLD_DEFAULT, ..)`; in a
//! process without them a function returns `-1` / `NULL` / `0`.
//! - Process: `cellsched_shim_version_number() -> u32`,
//!   `cellsched_in_slurmctld() -> int` (1 when slurmctld's API is reachable).
//! - Memory: `cellsched_xstrdup(s) -> char*` (for fields Slurm will `xfree`),
//!   `cellsched_xfree(p)`.
//! - Locks/scheduling: `cellsched_with_lock(CELLSCHED_LOCK_READ|WRITE, cb, arg)`
//!   runs `cb(arg)` under `lock_slurmctld` (WRITE = conf R, job W, node W,
//!   part R, fed R, as the update-job RPC); `cellsched_queue_scheduler()`.
//! - Jobs (caller holds the job lock; `site_factor_p_update` already holds the
//!   job write lock, `job_submit()` runs under slurmctld's own locks):
//!   `cellsched_for_each_job(pending_only, cb, arg) -> visited`,
//!   `cellsched_find_job(id)`; getters `cellsched_job_{id, user_id, state,
//!   is_pending, state_reason, name, partition, admin_comment, comment,
//!   features, tres_per_node, tres_req_str, tres_alloc_str, nodes, min_nodes,
//!   max_nodes, num_tasks, time_limit, priority, site_factor, submit_time,
//!   begin_time, start_time}`; setters (job write lock)
//!   `cellsched_job_set_site_factor`, `cellsched_job_set_admin_comment`,
//!   `cellsched_job_env_set(job, name, value)`; `spank_job_env` reads
//!   `cellsched_job_env_count` / `cellsched_job_env_at`.
//! - `details->env_sup` (job write lock to set): `cellsched_job_env_sup_count`,
//!   `cellsched_job_env_sup_at`, `cellsched_job_env_sup_set(job, name, value)`;
//!   `cellsched_job_is_batch`.
//! - Job descriptors (job_submit): `cellsched_env_array_set(&desc.spank_job_env,
//!   &desc.spank_job_env_size, name, value)`.
//! - Updates: `cellsched_job_update_init(&u, job_id)` then set `features`,
//!   `gres` (as users write it, `"gpu:4"`; the release's TRES prefix is added),
//!   `admin_comment`, `min_nodes`, `max_nodes`, `num_tasks`;
//!   `cellsched_update_job(&u) -> slurm rc` runs slurmctld's `update_job()` as
//!   root; the caller holds the WRITE lock set.
//! - Nodes (node read lock): `cellsched_node_count()`, `cellsched_node_{name,
//!   features, gres, state, is_available, cpus}(i)` (`is_available`: registered, not
//!   down/drained/failed/future/not responding),
//!   `cellsched_node_gres_used(i)` (free with `cellsched_xfree`).
#![deny(missing_docs)]
#![allow(clippy::all)]

mod bindings {
    #![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, missing_docs)]
    #![allow(improper_ctypes, clippy::all, unnecessary_transmutes)]
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
mod bit_flags {
    include!(concat!(env!("OUT_DIR"), "/bit_flags.rs"));
}
mod version {
    include!(concat!(env!("OUT_DIR"), "/version.rs"));
}

pub mod compat;
pub mod consts;
pub mod shim;

pub use bindings::*;
pub use bit_flags::*;
pub use consts::*;
pub use version::*;

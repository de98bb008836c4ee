//! Differences between the Slurm releases cellsched builds against
//! (22.05.8 and 24.11.5), derived from [`crate::SLURM_VERSION_NUMBER`].
//! Plugins ask here instead of testing version numbers themselves; the C
//! side of the same differences lives in `shim/cellsched_shim.c`, and
//! build-time ones (header paths) in `build.rs`.
//!
//! Differences that need no flag, because one form serves both releases:
//! - `site_factor_p_reconfig` is looked up by 22.05 only; exporting it on
//!   newer releases is harmless, so site_factor/cellsched always does.
use crate::SLURM_VERSION_NUMBER;

/// `SLURM_VERSION_NUM(a, b, c)`.
pub const fn version_num(major: u32, minor: u32, micro: u32) -> u32 {
    (major << 16) | (minor << 8) | micro
}

/// True when built against 23.02 or newer (interfaces/ reorganisation, `list_t`).
const AT_LEAST_23_02: bool = SLURM_VERSION_NUMBER >= version_num(23, 2, 0);

/// `job_modify()` passes a `char **err_msg` fourth argument (23.02 on):
/// without it (22.05) the argument register holds garbage, never to be
/// written, and a refusal reaches the user as its error code only.
pub const JOB_MODIFY_HAS_ERR_MSG: bool = AT_LEAST_23_02;

/// Prefix of GRES entries in `tres_per_node` / `tres_per_job`: `gres:` up to 22.05, `gres/` later
/// (passed to `cellsched_core::slurm_text`, which parses both).
pub const TRES_GRES_PREFIX: &str = if AT_LEAST_23_02 { "gres/" } else { "gres:" };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gres_prefix_follows_release() {
        let expect = if SLURM_VERSION_NUMBER >= 0x170200 { "gres/" } else { "gres:" };
        assert_eq!(TRES_GRES_PREFIX, expect);
    }
}

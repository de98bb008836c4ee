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

/// Prefix of GRES entries in `tres_per_node` / `tres_per_job`: `gres:` up to 22.05, `gres/` later.
pub const TRES_GRES_PREFIX: &str = if AT_LEAST_23_02 { "gres/" } else { "gres:" };

/// Strips the TRES GRES prefix of either release: `gres:gpu:a100:4` / `gres/gpu:a100:4` → `gpu:a100:4`.
pub fn strip_tres_gres_prefix(entry: &str) -> &str {
    entry.strip_prefix("gres:").or_else(|| entry.strip_prefix("gres/")).unwrap_or(entry)
}

/// Parses a release string `"22.05.8"` (also `"22.5.8"`, trailing `-suffix` ignored) into a version number.
pub fn parse_release(s: &str) -> Option<u32> {
    let core = s.trim().split(['-', ' ']).next()?;
    let mut parts = core.split('.');
    let mut next = || -> Option<u32> { parts.next()?.parse::<u32>().ok().filter(|v| *v <= 0xff) };
    let (a, b, c) = (next()?, next()?, next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(version_num(a, b, c))
}

/// Formats a version number as Slurm does: `0x160508` → `"22.05.8"`.
pub fn release_string(n: u32) -> String {
    format!("{:02}.{:02}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_round_trips() {
        assert_eq!(parse_release("22.05.8"), Some(0x160508));
        assert_eq!(parse_release("24.11.5"), Some(0x180b05));
        assert_eq!(parse_release("22.5.8"), Some(0x160508));
        assert_eq!(parse_release("22.05.8-4+deb12u3"), Some(0x160508));
        assert_eq!(release_string(0x160508), "22.05.8");
        assert_eq!(release_string(0x180b05), "24.11.5");
        assert_eq!(parse_release(crate::RELEASE), Some(crate::SLURM_VERSION_NUMBER));
    }

    #[test]
    fn bad_releases_are_rejected() {
        for bad in ["", "22", "22.05", "22.05.x", "22.05.8.1", "300.1.1"] {
            assert_eq!(parse_release(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn gres_prefix_follows_release() {
        assert_eq!(strip_tres_gres_prefix("gres:gpu:a100:4"), "gpu:a100:4");
        assert_eq!(strip_tres_gres_prefix("gres/gpu:4"), "gpu:4");
        assert_eq!(strip_tres_gres_prefix("gpu:4"), "gpu:4");
        let expect = if SLURM_VERSION_NUMBER >= 0x170200 { "gres/" } else { "gres:" };
        assert_eq!(TRES_GRES_PREFIX, expect);
    }
}

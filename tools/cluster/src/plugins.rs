//! The private PluginDir: symlinks to every stock Slurm plugin plus copies
//! of cellsched's own `.so` files, installed by temp file + rename so a
//! running daemon never maps a half-written file.
use crate::error::{ClusterError, Result};
use std::fs;
use std::path::Path;

/// Our plugins: (file cargo builds, name in PluginDir).
pub const OUR_PLUGINS: [(&str, &str); 3] = [
    ("libsite_factor_cellsched.so", "site_factor_cellsched.so"),
    ("libjob_submit_cellsched.so", "job_submit_cellsched.so"),
    ("libspank_cellsched.so", "spank_cellsched.so"),
];

/// Stock plugins left out of the private PluginDir: the PMIx MPI plugins
/// need libpmix (not installed) and only log load errors in every daemon.
const SKIPPED_STOCK: [&str; 1] = ["mpi_pmix"];

/// Which of our plugins are installed and get configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginSet {
    /// `site_factor/cellsched` (`PrioritySiteFactorPlugin` in slurm.conf).
    pub site_factor: bool,
    /// `job_submit/cellsched` (`JobSubmitPlugins` in slurm.conf).
    pub job_submit: bool,
    /// `spank_cellsched.so` (in plugstack.conf).
    pub spank: bool,
}

impl PluginSet {
    /// True when none of our plugins is configured (stock Slurm).
    pub fn is_stock(&self) -> bool {
        !(self.site_factor || self.job_submit || self.spank)
    }

    /// Names of the configured plugins, for messages.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.site_factor {
            v.push("site_factor/cellsched");
        }
        if self.job_submit {
            v.push("job_submit/cellsched");
        }
        if self.spank {
            v.push("spank_cellsched.so");
        }
        v
    }
}

/// Result of preparing the PluginDir.
#[derive(Debug, Clone, Copy)]
pub struct PluginInstall {
    /// The plugins now in PluginDir (to configure).
    pub set: PluginSet,
    /// Whether any of our files was added, replaced or removed.
    pub changed: bool,
}

/// Links each stock plugin (`*.so`) of `stock_dir` into `plugin_dir`,
/// replacing links that point elsewhere. Fails when `stock_dir` has none.
pub fn link_stock_plugins(stock_dir: &Path, plugin_dir: &Path) -> Result<usize> {
    let entries = fs::read_dir(stock_dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ClusterError::MissingProgram {
            what: "Slurm's stock plugin directory".into(),
            path: stock_dir.to_path_buf(),
        },
        _ => ClusterError::io("cannot list", stock_dir)(e),
    })?;
    let mut n = 0;
    for e in entries {
        let e = e.map_err(ClusterError::io("cannot list", stock_dir))?;
        let name = e.file_name();
        let Some(s) = name.to_str() else { continue };
        if !s.ends_with(".so") || OUR_PLUGINS.iter().any(|(_, ours)| *ours == s) || SKIPPED_STOCK.iter().any(|p| s.starts_with(p)) {
            continue;
        }
        let target = e.path();
        let link = plugin_dir.join(s);
        match fs::read_link(&link) {
            Ok(t) if t == target => {}
            _ => {
                let _ = fs::remove_file(&link);
                std::os::unix::fs::symlink(&target, &link).map_err(ClusterError::io("cannot create symlink", &link))?;
            }
        }
        n += 1;
    }
    // Drop links to skipped plugins and links whose target vanished.
    if let Ok(entries) = fs::read_dir(plugin_dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_link = e.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            if is_link && (SKIPPED_STOCK.iter().any(|p| name.starts_with(p)) || !e.path().exists()) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    if n == 0 {
        return Err(ClusterError::MissingProgram { what: "Slurm stock plugins (*.so)".into(), path: stock_dir.to_path_buf() });
    }
    Ok(n)
}

/// Installs our built plugins into `plugin_dir` when `enabled` (only those
/// whose `.so` exists in `build_dir`); removes them when not enabled.
pub fn install_our_plugins(enabled: bool, build_dir: &Path, plugin_dir: &Path) -> Result<PluginInstall> {
    let mut set = PluginSet::default();
    let mut changed = false;
    for (built, installed) in OUR_PLUGINS {
        let src = build_dir.join(built);
        let dst = plugin_dir.join(installed);
        let present = enabled && src.is_file();
        if present {
            let new = fs::read(&src).map_err(ClusterError::io("cannot read", &src))?;
            let same = fs::read(&dst).map(|old| old == new).unwrap_or(false);
            if !same {
                let tmp = plugin_dir.join(format!(".{installed}.tmp{}", std::process::id()));
                fs::write(&tmp, &new).map_err(ClusterError::io("cannot write", &tmp))?;
                fs::rename(&tmp, &dst).map_err(ClusterError::io("cannot rename into place", &dst))?;
                changed = true;
            }
        } else if dst.exists() {
            fs::remove_file(&dst).map_err(ClusterError::io("cannot remove", &dst))?;
            changed = true;
        }
        match installed {
            "site_factor_cellsched.so" => set.site_factor = present,
            "job_submit_cellsched.so" => set.job_submit = present,
            _ => set.spank = present,
        }
    }
    Ok(PluginInstall { set, changed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cs-plugins-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn installs_only_built_plugins_and_detects_changes() {
        let build = tmpdir("build");
        let pd = tmpdir("pd");
        fs::write(build.join("libsite_factor_cellsched.so"), b"v1").unwrap();
        let r = install_our_plugins(true, &build, &pd).unwrap();
        assert_eq!(r.set, PluginSet { site_factor: true, job_submit: false, spank: false });
        assert!(r.changed);
        assert_eq!(fs::read(pd.join("site_factor_cellsched.so")).unwrap(), b"v1");
        // Same content again: nothing changes.
        assert!(!install_our_plugins(true, &build, &pd).unwrap().changed);
        fs::write(build.join("libsite_factor_cellsched.so"), b"v2").unwrap();
        assert!(install_our_plugins(true, &build, &pd).unwrap().changed);
        assert_eq!(fs::read(pd.join("site_factor_cellsched.so")).unwrap(), b"v2");
        // Disabled: removed, stock set.
        let r = install_our_plugins(false, &build, &pd).unwrap();
        assert!(r.changed && r.set.is_stock());
        assert!(!pd.join("site_factor_cellsched.so").exists());
        // No temp files left behind.
        assert_eq!(fs::read_dir(&pd).unwrap().count(), 0);
        let _ = fs::remove_dir_all(&build);
        let _ = fs::remove_dir_all(&pd);
    }

    #[test]
    fn links_stock_plugins_and_rejects_empty_dir() {
        let stock = tmpdir("stock");
        let pd = tmpdir("pd2");
        assert!(matches!(link_stock_plugins(&stock, &pd), Err(ClusterError::MissingProgram { .. })));
        fs::write(stock.join("select_linear.so"), b"x").unwrap();
        fs::write(stock.join("select_linear.la"), b"x").unwrap();
        fs::write(stock.join("mpi_pmix_v4.so"), b"x").unwrap();
        assert_eq!(link_stock_plugins(&stock, &pd).unwrap(), 1);
        assert_eq!(fs::read_link(pd.join("select_linear.so")).unwrap(), stock.join("select_linear.so"));
        assert!(!pd.join("select_linear.la").exists() && !pd.join("mpi_pmix_v4.so").exists());
        let missing = stock.join("nope");
        assert!(link_stock_plugins(&missing, &pd).unwrap_err().to_string().contains("nope"));
        let _ = fs::remove_dir_all(&stock);
        let _ = fs::remove_dir_all(&pd);
    }
}

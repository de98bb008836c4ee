//! Plugstack arguments (`key=value` after the plugin path in plugstack.conf):
//! site defaults. An unknown key or bad value is an error at load time.
use crate::error::SpankError;
use std::path::PathBuf;

/// Site settings given as plugstack.conf arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginArgs {
    /// GPU type to assume when neither the decision nor `--dl-cell` names one.
    pub default_gpu_type: Option<String>,
    /// cellsched.toml path (GPU catalog overrides, profile DB).
    pub config: Option<PathBuf>,
    /// Directory under which per-job plan directories are created (absolute).
    pub plan_dir: PathBuf,
    /// Base of the per-job `MASTER_PORT` range (`base + jobid % 2000`).
    pub master_port_base: u16,
}

impl Default for PluginArgs {
    fn default() -> Self {
        PluginArgs { default_gpu_type: None, config: None, plan_dir: PathBuf::from(crate::plan_file::DEFAULT_PLAN_DIR), master_port_base: 29500 }
    }
}

/// Keys accepted in plugstack.conf, for the error message.
pub const KNOWN_KEYS: &str = "default_gpu_type, config, plan_dir, master_port_base";

impl PluginArgs {
    /// Parses `key=value` arguments; unknown keys and bad values are errors.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<PluginArgs, SpankError> {
        let mut out = PluginArgs::default();
        for a in args {
            let a = a.as_ref();
            let err = |msg: String| SpankError::Arg { arg: a.to_string(), msg };
            let (k, v) = a.split_once('=').ok_or_else(|| err(format!("expected key=value with key one of {KNOWN_KEYS}")))?;
            match k {
                "default_gpu_type" => {
                    let t = v.trim().to_ascii_lowercase();
                    if t.is_empty() || t.len() > 32 || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                        return Err(err("expected a GPU type such as a100 (letters, digits, '_', '-')".into()));
                    }
                    out.default_gpu_type = Some(t);
                }
                "config" => out.config = Some(absolute_path(v).map_err(err)?),
                "plan_dir" => out.plan_dir = absolute_path(v).map_err(err)?,
                "master_port_base" => {
                    out.master_port_base = v
                        .parse::<u16>()
                        .ok()
                        .filter(|p| (1024..=63535).contains(p))
                        .ok_or_else(|| err("expected a port number in 1024..=63535".into()))?
                }
                _ => return Err(err(format!("unknown key '{k}' (known keys: {KNOWN_KEYS})"))),
            }
        }
        Ok(out)
    }
}

/// An absolute path without `..` components or control characters.
fn absolute_path(v: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(v);
    if !p.is_absolute() || v.split('/').any(|c| c == "..") || v.chars().any(|c| c.is_control()) {
        return Err("expected an absolute path without '..'".into());
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_keys() {
        let a = PluginArgs::parse(&[
            "default_gpu_type=A100",
            "config=/etc/slurm/cellsched.toml",
            "plan_dir=/run/cellsched",
            "master_port_base=20000",
        ])
        .unwrap();
        assert_eq!(a.default_gpu_type.as_deref(), Some("a100"));
        assert_eq!(a.config, Some(PathBuf::from("/etc/slurm/cellsched.toml")));
        assert_eq!(a.plan_dir, PathBuf::from("/run/cellsched"));
        assert_eq!(a.master_port_base, 20000);
        assert_eq!(PluginArgs::parse::<&str>(&[]).unwrap(), PluginArgs::default());
    }

    #[test]
    fn rejects_unknown_and_bad() {
        let e = PluginArgs::parse(&["defualt_gpu_type=a100"]).unwrap_err().to_string();
        assert!(e.contains("unknown key 'defualt_gpu_type'") && e.contains("default_gpu_type"), "{e}");
        for bad in ["plan_dir=tmp", "plan_dir=/tmp/../etc", "config=", "master_port_base=80", "noequals", "default_gpu_type=a 100"] {
            assert!(PluginArgs::parse(&[bad]).is_err(), "{bad} should be rejected");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
        /// plugstack.conf arguments: accepted or refused, never a panic.
        #[test]
        fn args_parser_never_panics(a in proptest::prelude::any::<String>(), near in "(plan_dir|config|default_gpu_type|master_port_base)=[a-z0-9/._ -]{0,20}") {
            let _ = PluginArgs::parse(&[a.as_str()]);
            if let Ok(p) = PluginArgs::parse(&[near.as_str()]) {
                proptest::prop_assert!(p.plan_dir.is_absolute());
            }
        }
    }
}

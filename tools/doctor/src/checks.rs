//! The checks, in the order they are reported.
use crate::conf::{hostlist_expand, read_with_includes, spank_lines, ConfFile, Line, SpankLine};
use crate::controller::{show_config_value, Controller};
use crate::elf::{read_u32_symbol, release_number, release_text};
use crate::report::{Finding, Report};
use cellsched_core::config::{resolve_config_path, Config, CONFIG_ENV};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::CoreError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Debian's PluginDir, Slurm's built-in default there.
pub const DEFAULT_PLUGIN_DIR: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
/// The SPANK plugin's default `plan_dir=`.
pub const DEFAULT_PLAN_DIR: &str = "/run/cellsched";
/// Slurm's default `SlurmctldPidFile`.
pub const DEFAULT_CTLD_PID_FILE: &str = "/var/run/slurmctld.pid";

/// What to check.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The slurm.conf of the installation.
    pub slurm_conf: PathBuf,
    /// A cellsched.toml to check instead of the one the plugins would find.
    pub config: Option<PathBuf>,
    /// `CELLSCHED_CONFIG` as slurmctld sees it, when known; else doctor's
    /// own environment is used (see [`ctld_env`]).
    pub ctld_config_env: Option<String>,
}

/// Runs every check.
pub fn run(opts: &Options, ctl: &dyn Controller) -> Report {
    let mut r = Report::default();
    let running = ctl.show_config().ok();
    let release = check_controller(ctl, running.as_deref(), &mut r);
    let slurm_conf = match read_with_includes(&opts.slurm_conf, opts.slurm_conf.parent().unwrap_or(Path::new("/"))) {
        Ok(f) => {
            r.checks.push(Finding::ok("slurm.conf", format!("{} read ({} settings lines)", opts.slurm_conf.display(), f.lines.len())));
            for (line, e) in &f.unreadable_includes {
                r.checks.push(Finding::warn("slurm.conf", format!("{}: included file unreadable: {e}", line.at()), "fix or remove the Include line"));
            }
            f
        }
        Err(e) => {
            r.checks.push(Finding::fail("slurm.conf", e, "pass the installation's slurm.conf with --slurm-conf or SLURM_CONF"));
            return r;
        }
    };
    check_settings(&slurm_conf, &opts.slurm_conf, running.as_deref(), &mut r);
    let plugin_dirs = plugin_dirs(&slurm_conf);
    for (name, file) in [("site_factor/cellsched", "site_factor_cellsched.so"), ("job_submit/cellsched", "job_submit_cellsched.so")] {
        let found = plugin_dirs.iter().map(|d| d.join(file)).find(|p| p.exists());
        r.checks.push(match found {
            Some(p) => version_finding(&format!("plugin {name}"), &p, release),
            None => Finding::fail(
                format!("plugin {name}"),
                format!("{file} not found in PluginDir {}", join_paths(&plugin_dirs)),
                "build with `make build` and install with `make install` (copies the .so files into PluginDir)",
            ),
        });
    }
    let spank = check_plugstack(&slurm_conf, &opts.slurm_conf, &plugin_dirs, release, &mut r);
    let catalog = check_config(opts, &slurm_conf, spank.as_ref(), &mut r);
    check_gpu_types(&slurm_conf, &opts.slurm_conf, &catalog, &mut r);
    r
}

fn join_paths(p: &[PathBuf]) -> String {
    p.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
}

/// The release slurmctld runs (`None` when unknown), after the ping check.
fn check_controller(ctl: &dyn Controller, running: Option<&str>, r: &mut Report) -> Option<u32> {
    match ctl.ping() {
        Ok(out) => r.checks.push(Finding::ok("slurmctld", out.lines().next().unwrap_or("answers").trim().to_string())),
        Err(e) => r.checks.push(Finding::fail(
            "slurmctld",
            format!("does not answer `scontrol ping`: {e}"),
            "start slurmctld (systemctl start slurmctld) and check SlurmctldHost/SlurmctldPort and its log",
        )),
    }
    let ctld = running.and_then(|t| show_config_value(t, "SLURM_VERSION"));
    if let Some(v) = ctld.as_deref().and_then(release_number) {
        r.checks.push(Finding::ok("Slurm release", format!("slurmctld runs {}", release_text(v))));
        return Some(v);
    }
    let client = ctl.client_version().ok().and_then(|t| t.split_whitespace().last().and_then(release_number));
    match client {
        Some(v) => {
            r.checks.push(Finding::warn(
                "Slurm release",
                format!("slurmctld did not report its release; the installed scontrol is {}", release_text(v)),
                "start slurmctld so plugin versions can be checked against the release it runs",
            ));
            Some(v)
        }
        None => {
            r.checks.push(Finding::warn(
                "Slurm release",
                "cannot tell the Slurm release: neither `scontrol show config` nor `scontrol version` answered",
                "put Slurm's scontrol on PATH and start slurmctld",
            ));
            None
        }
    }
}

/// The required slurm.conf settings, and whether the running slurmctld
/// (`running`: its `scontrol show config`) has them too.
fn check_settings(f: &ConfFile, path: &Path, running: Option<&str>, r: &mut Report) {
    let file = path.display();
    type Want = fn(&str) -> bool;
    let rules: [(&str, &str, Want); 4] = [
        ("PriorityType", "priority/multifactor", |v| v == "priority/multifactor"),
        ("PrioritySiteFactorPlugin", "site_factor/cellsched", |v| v == "site_factor/cellsched"),
        ("JobSubmitPlugins", "cellsched", |v| v.split(',').any(|p| matches!(p.trim(), "cellsched" | "job_submit/cellsched"))),
        ("GresTypes", "gpu", |v| v.split(',').any(|p| p.trim() == "gpu")),
    ];
    for (key, want, ok) in rules {
        let check = format!("slurm.conf {key}");
        // slurmctld 22.05.8 reports PrioritySiteFactorPlugin as "(null)" even
        // with the plugin loaded (seen on the test cluster): "(null)" is no evidence.
        let live = running.and_then(|t| show_config_value(t, key)).filter(|v| v != "(null)");
        r.checks.push(match f.setting(key) {
            Some((line, v)) if ok(&v) && live.as_deref().is_some_and(|l| !ok(l)) => Finding::warn(
                check,
                format!("{key}={v} at {}, but the running slurmctld has {key}={}", line.at(), live.unwrap_or_default()),
                "restart slurmctld (systemctl restart slurmctld) so it loads the file",
            ),
            Some((line, v)) if ok(&v) => Finding::ok(check, format!("{key}={v} ({})", line.at())),
            Some((line, v)) => Finding::fail(
                check,
                format!("{key}={v} at {}", line.at()),
                format!("{} {key}={want}", if key == "JobSubmitPlugins" || key == "GresTypes" { "add to the list:" } else { "set" }),
            ),
            None => Finding::fail(check, format!("{key} not set in {file}"), format!("add the line {key}={want}")),
        });
    }
}

/// PluginDir entries (colon separated), or Debian's default.
fn plugin_dirs(f: &ConfFile) -> Vec<PathBuf> {
    match f.setting("PluginDir") {
        Some((_, v)) if !v.is_empty() => v.split(':').filter(|s| !s.is_empty()).map(PathBuf::from).collect(),
        _ => vec![PathBuf::from(DEFAULT_PLUGIN_DIR)],
    }
}

/// The `plugin_version` of `so` against the running release.
fn version_finding(check: &str, so: &Path, release: Option<u32>) -> Finding {
    let fix_rebuild = |rel: u32| {
        format!(
            "rebuild the plugins against Slurm {} (its headers and configured source tree: SLURM_INCLUDE_DIR, SLURM_SRC_DIR) and reinstall with `make install`",
            release_text(rel)
        )
    };
    match read_u32_symbol(so, "plugin_version") {
        Err(e) => Finding::fail(check, e.to_string(), "reinstall the plugin with `make install`"),
        Ok(None) => Finding::fail(check, format!("{} exports no plugin_version symbol", so.display()), "reinstall the plugin with `make install`"),
        Ok(Some(v)) => match release {
            Some(rel) if rel == v => Finding::ok(check, format!("{} built for Slurm {}", so.display(), release_text(v))),
            Some(rel) => Finding::fail(
                check,
                format!("{} was built for Slurm {} (plugin_version {v:#x}) but slurmctld runs {} ({rel:#x}); Slurm refuses to load it", so.display(), release_text(v), release_text(rel)),
                fix_rebuild(rel),
            ),
            None => Finding::warn(
                check,
                format!("{} built for Slurm {}; the running release is unknown", so.display(), release_text(v)),
                "start slurmctld and run doctor again",
            ),
        },
    }
}

/// plugstack.conf loads spank_cellsched.so; its `.so` and `plan_dir=`.
/// Returns the plugin line when found.
fn check_plugstack(f: &ConfFile, slurm_conf: &Path, plugin_dirs: &[PathBuf], release: Option<u32>, r: &mut Report) -> Option<SpankLine> {
    let etc = slurm_conf.parent().unwrap_or(Path::new("/"));
    let path = match f.setting("PlugStackConfig") {
        Some((_, v)) => PathBuf::from(v),
        None => etc.join("plugstack.conf"),
    };
    let stack = match read_with_includes(&path, etc) {
        Ok(s) => s,
        Err(e) => {
            r.checks.push(Finding::fail(
                "plugstack.conf",
                e,
                format!("create {} with the line `required {DEFAULT_PLUGIN_DIR}/spank_cellsched.so` (or `include /etc/slurm/plugstack.conf.d/*.conf` after `make install`)", path.display()),
            ));
            return None;
        }
    };
    for (line, e) in &stack.unreadable_includes {
        r.checks.push(Finding::warn("plugstack.conf", format!("{}: included file unreadable: {e}", line.at()), "fix or remove the include line"));
    }
    let Some(spank) = spank_lines(&stack).into_iter().find(|s| s.path.ends_with("spank_cellsched.so")) else {
        r.checks.push(Finding::fail(
            "plugstack.conf",
            format!("{} (and its includes) do not load spank_cellsched.so", path.display()),
            format!("add the line `required spank_cellsched.so` to {} (or `include /etc/slurm/plugstack.conf.d/*.conf` after `make install`)", path.display()),
        ));
        return None;
    };
    r.checks.push(Finding::ok("plugstack.conf", format!("{} {} ({})", spank.kind, spank.path, spank.line.at())));
    let so = if Path::new(&spank.path).is_absolute() {
        Some(PathBuf::from(&spank.path))
    } else {
        plugin_dirs.iter().map(|d| d.join(&spank.path)).find(|p| p.exists())
    };
    r.checks.push(match so.filter(|p| p.exists()) {
        Some(p) => version_finding("plugin spank_cellsched", &p, release),
        None => Finding::fail(
            "plugin spank_cellsched",
            format!("{} (named at {}) does not exist", spank.path, spank.line.at()),
            "install it with `make install` or correct the path",
        ),
    });
    let plan_dir = spank.args.iter().find_map(|a| a.strip_prefix("plan_dir=")).unwrap_or(DEFAULT_PLAN_DIR);
    r.checks.push(plan_dir_finding(Path::new(plan_dir), &spank.line));
    Some(spank)
}

/// `plan_dir` must be absent (created by slurmstepd) or a root-owned
/// directory no one else can write.
fn plan_dir_finding(dir: &Path, line: &Line) -> Finding {
    let check = "plan_dir";
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Finding::ok(check, format!("{} absent; slurmstepd creates it root-owned at the first DL step", dir.display()))
        }
        Err(e) => Finding::fail(check, format!("{}: cannot stat: {e}", dir.display()), "make it readable by root"),
        Ok(m) if !m.file_type().is_dir() => Finding::fail(
            check,
            format!("{} is not a directory ({})", dir.display(), if m.file_type().is_symlink() { "a symlink" } else { "a file" }),
            format!("remove it, or set plan_dir= at {} to a root-owned directory", line.at()),
        ),
        Ok(m) if m.uid() != 0 || m.mode() & 0o022 != 0 => Finding::fail(
            check,
            format!("{} is owned by uid {} with mode {:o}; the SPANK plugin refuses it", dir.display(), m.uid(), m.mode() & 0o7777),
            format!("chown root {d} && chmod go-w {d}", d = dir.display()),
        ),
        Ok(m) => Finding::ok(check, format!("{} root-owned, mode {:o}", dir.display(), m.mode() & 0o7777)),
    }
}

/// `CELLSCHED_CONFIG` in the environment of the running slurmctld (from
/// `/proc/PID/environ`, PID from `SlurmctldPidFile`): `Some(None)` when
/// slurmctld runs without it, `None` when that cannot be read.
pub fn ctld_env(slurm_conf: &Path) -> Option<Option<String>> {
    let f = read_with_includes(slurm_conf, slurm_conf.parent()?).ok()?;
    let pid_file = f.setting("SlurmctldPidFile").map(|(_, v)| v).unwrap_or_else(|| DEFAULT_CTLD_PID_FILE.into());
    let pid: u32 = std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim() != "slurmctld" {
        return None;
    }
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{CONFIG_ENV}=");
    Some(env.split(|b| *b == 0).find_map(|kv| std::str::from_utf8(kv).ok()?.strip_prefix(prefix.as_str()).map(str::to_string)))
}

/// cellsched.toml and the estimator data it names; returns the GPU catalog
/// (with the site's overrides when they parse).
fn check_config(opts: &Options, f: &ConfFile, spank: Option<&SpankLine>, r: &mut Report) -> GpuCatalog {
    let conf_str = opts.slurm_conf.to_str();
    let params = f.setting("PrioritySiteFactorParameters").map(|(_, v)| v);
    let env = opts.ctld_config_env.as_deref();
    let site_factor = resolve_config_path(params.as_deref(), env, conf_str);
    // Both slurmctld plugins find it by one rule (cellsched_slurm_ffi::host::config_path).
    let job_submit = resolve_config_path(params.as_deref(), env, conf_str);
    let spank_arg = spank.and_then(|s| s.args.iter().find_map(|a| a.strip_prefix("config=")));
    let spank_path = resolve_config_path(spank_arg, None, conf_str);
    let (path, how) = match &opts.config {
        Some(p) => (p.clone(), "given with --config".to_string()),
        None => (site_factor.clone(), "as the plugins find it".to_string()),
    };
    let mut catalog = GpuCatalog::builtin();
    if opts.config.is_none() && (site_factor != job_submit || (spank.is_some() && spank_path != site_factor)) {
        r.checks.push(Finding::warn(
            "cellsched.toml location",
            format!(
                "the plugins read different files: site_factor {}, job_submit {}, SPANK {}",
                site_factor.display(),
                job_submit.display(),
                spank_path.display()
            ),
            "put cellsched.toml beside slurm.conf, or name the same file in PrioritySiteFactorParameters=config=, CELLSCHED_CONFIG and plugstack config=",
        ));
    }
    let cfg = match Config::load(&path) {
        Ok(c) => {
            r.checks.push(Finding::ok("cellsched.toml", format!("{} parses ({how})", path.display())));
            c
        }
        Err(e) => {
            let fix = match &e {
                CoreError::File { .. } if untrusted(&e) => UNTRUSTED_FIX.into(),
                CoreError::File { msg, .. } if msg.starts_with("cannot read") => format!(
                    "create {} (see the commented etc/cellsched.toml); without it the plugins fall back to stock Slurm behaviour",
                    path.display()
                ),
                _ => "correct the file at the line named; until then slurmctld keeps the last good configuration (stock behaviour after a restart)".into(),
            };
            r.checks.push(Finding::fail("cellsched.toml", format!("{e} ({how})"), fix));
            return catalog;
        }
    };
    let est = &cfg.estimator;
    match &est.profile_db {
        None => r.checks.push(Finding::ok("estimator.profile_db", "not set: built-in (calibrated datasheet) estimates")),
        Some(p) => r.checks.push(match cellsched_core::profile_db::ProfileDb::load_csv(p) {
            Ok(db) => Finding::ok("estimator.profile_db", format!("{} parses ({} measured points)", p.display(), db.len())),
            Err(e) => Finding::fail("estimator.profile_db", e.to_string(), fix_for(&e, "fix the CSV at the line named (`cellsched profile list --db FILE` shows it), or remove profile_db")),
        }),
    }
    match &est.gpu_catalog {
        None => r.checks.push(Finding::ok("estimator.gpu_catalog", "not set: built-in GPU catalog")),
        Some(p) => {
            let shown = p.display().to_string();
            let res = cellsched_core::config::check_trusted_file(p)
                .and_then(|()| std::fs::read_to_string(p).map_err(|e| CoreError::File { path: shown.clone(), line: None, msg: format!("cannot read: {e}") }))
                .and_then(|t| catalog.apply_overrides_toml(&t, &shown));
            r.checks.push(match res {
                Ok(()) => Finding::ok("estimator.gpu_catalog", format!("{shown} parses ({} GPU types known)", catalog.names().count())),
                Err(e) => {
                    catalog = GpuCatalog::builtin();
                    Finding::fail("estimator.gpu_catalog", e.to_string(), fix_for(&e, "fix the [gpu.NAME] table at the line named, or remove gpu_catalog"))
                }
            });
        }
    }
    match &est.history {
        None => r.checks.push(Finding::ok("estimator.history", "not set: no iteration predictor; jobs without --dl-iters are ranked by their time limit")),
        Some(p) => r.checks.push(match cellsched_core::history::load_csv(p) {
            Ok(h) => Finding::ok("estimator.history", format!("{} parses ({} records)", p.display(), h.len())),
            Err(e) => Finding::fail("estimator.history", e.to_string(), fix_for(&e, "fix the CSV at the line named (`cellsched report history` writes it), or remove history")),
        }),
    }
    catalog
}

/// The fix for a file the plugins refuse to trust (core's `check_trusted_file`).
const UNTRUSTED_FIX: &str = "chown root FILE and chmod go-w FILE (and the same for each directory above it that is not root's or is writable by others without the sticky bit); the plugins refuse to load it until then";

/// Whether `e` is core's refusal of a file others can write.
fn untrusted(e: &CoreError) -> bool {
    matches!(e, CoreError::File { msg, .. } if msg.starts_with("not trusted"))
}

/// [`UNTRUSTED_FIX`] for an untrusted file, else `otherwise`.
fn fix_for(e: &CoreError, otherwise: &str) -> String {
    if untrusted(e) { UNTRUSTED_FIX.into() } else { otherwise.into() }
}

/// Typed GPU entries `(type, count text)` of a `Gres=` value.
fn gres_gpu_types(gres: &str) -> Vec<Option<String>> {
    gres.split(',')
        .filter_map(|e| {
            let mut parts = e.trim().split(':');
            (parts.next()? == "gpu").then_some(())?;
            let t = parts.next().map(|t| t.split('(').next().unwrap_or("").to_string());
            Some(match (t, parts.next()) {
                (Some(t), Some(_)) if !t.is_empty() => Some(t),
                (Some(t), None) if !t.is_empty() && !t.bytes().all(|b| b.is_ascii_digit()) => Some(t),
                _ => None,
            })
        })
        .collect()
}

/// GPU types in gres.conf and slurm.conf are in the catalog; every node with
/// GPUs has its GPU type as a Feature.
fn check_gpu_types(f: &ConfFile, slurm_conf: &Path, catalog: &GpuCatalog, r: &mut Report) {
    let etc = slurm_conf.parent().unwrap_or(Path::new("/"));
    let gres_path = etc.join("gres.conf");
    let gres = read_with_includes(&gres_path, etc).ok();
    let mut typed: Vec<(String, Line)> = Vec::new();
    if let Some(g) = &gres {
        for l in &g.lines {
            if l.get("name").as_deref() == Some("gpu") {
                if let Some(t) = l.get("type") {
                    typed.push((t, l.clone()));
                }
            }
        }
    }
    for l in f.node_lines().chain(f.lines.iter().filter(|l| l.get("nodename").is_some_and(|v| v.eq_ignore_ascii_case("default")))) {
        if let Some(g) = l.get("gres") {
            typed.extend(gres_gpu_types(&g).into_iter().flatten().map(|t| (t, l.clone())));
        }
    }
    let mut known = Vec::new();
    for (t, l) in &typed {
        match catalog.get(t) {
            Ok(spec) => {
                if !known.contains(&spec.name) {
                    known.push(spec.name.clone());
                }
            }
            Err(e) => r.checks.push(Finding::fail(
                "GPU types",
                format!("{}: GPU type '{t}': {e}", l.at()),
                "use a type the catalog knows (`cellsched cells` lists them) or describe it in the estimator.gpu_catalog file",
            )),
        }
    }
    if typed.is_empty() {
        r.checks.push(Finding::warn(
            "GPU types",
            format!("no typed GPUs in {} or slurm.conf", gres_path.display()),
            "give each node Gres=gpu:TYPE:N in slurm.conf and Type=TYPE in gres.conf",
        ));
    } else if !r.checks.iter().any(|c| c.check == "GPU types") {
        r.checks.push(Finding::ok("GPU types", format!("{} known to the GPU catalog", known.join(", "))));
    }
    let mut types: Vec<String> = typed.iter().map(|(t, _)| t.to_ascii_lowercase()).collect();
    types.sort();
    types.dedup();
    check_tres(f, &types, r);
    check_features(f, gres.as_ref(), r);
}

/// `AccountingStorageTRES` lists `gres/gpu` and `gres/gpu:TYPE` of every
/// GPU type, so sacct's AllocTRES (and `cellsched report`) shows GPU types.
fn check_tres(f: &ConfFile, types: &[String], r: &mut Report) {
    let (at, listed): (String, Vec<String>) = match f.setting("AccountingStorageTRES") {
        Some((l, v)) => (l.at(), v.split(',').map(|t| t.trim().to_ascii_lowercase()).collect()),
        None => ("not set".into(), Vec::new()),
    };
    let missing: Vec<String> = std::iter::once("gres/gpu".to_string())
        .chain(types.iter().map(|t| format!("gres/gpu:{t}")))
        .filter(|t| !listed.contains(t))
        .collect();
    let check = "slurm.conf AccountingStorageTRES";
    r.checks.push(if missing.is_empty() {
        Finding::ok(check, format!("lists gres/gpu and every GPU type ({at})"))
    } else {
        Finding::warn(
            check,
            format!("{} missing ({at}): sacct's AllocTRES, and so `cellsched report`, cannot tell GPU types apart", missing.join(", ")),
            format!("add {} to AccountingStorageTRES", missing.join(",")),
        )
    });
}

/// Each node line with GPUs lists its GPU type among its Features.
fn check_features(f: &ConfFile, gres: Option<&ConfFile>, r: &mut Report) {
    let gres_text: String = gres.map(|g| g.lines.iter().map(|l| l.text.clone() + "\n").collect()).unwrap_or_default();
    let default_gres = f.node_default("gres");
    let default_features = f.node_default("feature").or_else(|| f.node_default("features"));
    let (mut nodes_ok, mut lines_ok) = (0usize, 0usize);
    for l in f.node_lines() {
        let names = l.get("nodename").unwrap_or_default();
        let Some(gres_value) = l.get("gres").or_else(|| default_gres.clone()) else { continue };
        let entries = gres_gpu_types(&gres_value);
        if entries.is_empty() {
            continue; // no GPUs on these nodes
        }
        let hosts = hostlist_expand(&names, 100_000).unwrap_or_else(|| vec![names.clone()]);
        let mut types: Vec<String> = entries.iter().flatten().map(|t| t.to_ascii_lowercase()).collect();
        if types.is_empty() {
            types = hosts.iter().filter_map(|h| cellsched_core::slurm_text::gres_conf_gpu_type(&gres_text, h)).collect();
            types.sort();
            types.dedup();
        }
        if types.is_empty() {
            r.checks.push(Finding::warn(
                "node Features",
                format!("nodes {names} ({}) have GPUs of no known type", l.at()),
                "give the type in Gres=gpu:TYPE:N or in gres.conf Type=, and add it to Feature=",
            ));
            continue;
        }
        let features: Vec<String> = l
            .get("feature")
            .or_else(|| l.get("features"))
            .or_else(|| default_features.clone())
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .collect();
        let missing: Vec<&String> = types.iter().filter(|t| !features.contains(t)).collect();
        if missing.is_empty() {
            nodes_ok += hosts.len();
            lines_ok += 1;
        } else {
            let want = missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",");
            r.checks.push(Finding::fail(
                "node Features",
                format!("nodes {names} ({}) have {want} GPUs but not Feature={want}; cellsched places jobs with a feature plus an untyped GPU count", l.at()),
                format!("add {want} to Feature= on that NodeName line, then `scontrol reconfigure`"),
            ));
        }
    }
    if lines_ok > 0 && !r.checks.iter().any(|c| c.check == "node Features") {
        r.checks.push(Finding::ok("node Features", format!("all {nodes_ok} GPU nodes ({lines_ok} NodeName lines) have their GPU type as a Feature")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::tests::tiny_elf;
    use crate::report::Status;

    /// A controller that answers from fixed values.
    struct Fake {
        up: bool,
        ctld: Option<&'static str>,
        client: Option<&'static str>,
    }

    impl Controller for Fake {
        fn ping(&self) -> Result<String, String> {
            if self.up {
                Ok("Slurmctld(primary) at localhost is UP".into())
            } else {
                Err("Slurmctld(primary) at localhost is DOWN".into())
            }
        }
        fn show_config(&self) -> Result<String, String> {
            self.ctld.map(|v| format!("Configuration data as of x\nSLURM_VERSION           = {v}\n")).ok_or_else(|| "down".into())
        }
        fn client_version(&self) -> Result<String, String> {
            self.client.map(|v| format!("slurm {v}\n")).ok_or_else(|| "no scontrol".into())
        }
    }

    const UP: Fake = Fake { up: true, ctld: Some("22.05.8"), client: Some("22.05.8") };

    /// A complete, healthy installation under a fresh temp dir.
    struct Fixture {
        dir: PathBuf,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    impl Fixture {
        fn new(tag: &str) -> Fixture {
            let dir = std::env::temp_dir().join(format!("cs-doctor-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for sub in ["plugins", "plugstack.conf.d"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            let fx = Fixture { dir };
            let d = fx.dir.display();
            fx.write(
                "slurm.conf",
                &format!(
                    "ClusterName=t\nPluginDir={d}/plugins\nPlugStackConfig={d}/plugstack.conf\nSlurmctldPidFile={d}/none.pid\n\
                     PriorityType=priority/multifactor\nPrioritySiteFactorPlugin=site_factor/cellsched\nJobSubmitPlugins=lua,cellsched\n\
                     GresTypes=gpu\nAccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100\nNodeName=DEFAULT CPUs=16\nNodeName=a100-[1-2] Gres=gpu:a100:4 Feature=a100,ib\n\
                     NodeName=v100-1 Gres=gpu:8 Features=v100\nNodeName=cpu-1 CPUs=4\nPartitionName=gpu Nodes=ALL\n"
                ),
            );
            fx.write("gres.conf", "NodeName=a100-[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-3]\nNodeName=v100-1 Name=gpu Type=v100 File=/dev/nvidia[0-7]\n");
            fx.write("plugstack.conf", &format!("include {d}/plugstack.conf.d/*.conf\n"));
            fx.write("plugstack.conf.d/cellsched.conf", &format!("required spank_cellsched.so plan_dir={d}/plans\n"));
            fx.write(
                "cellsched.toml",
                &format!("[estimator]\nprofile_db = \"{d}/p.csv\"\ngpu_catalog = \"{d}/gpus.toml\"\nhistory = \"{d}/h.csv\"\n"),
            );
            fx.write("p.csv", "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt__1.3B,64,a100,1,4,0.5\n");
            fx.write("gpus.toml", "[gpu.a100]\nmem_gib = 80\n");
            fx.write("h.csv", "user,model,batch,gpus,requested_time_s,iterations,elapsed_s,gpu_type\nalice,gpt__1.3B,64,4,3600,1000,1800,a100\n");
            for so in ["site_factor_cellsched.so", "job_submit_cellsched.so", "spank_cellsched.so"] {
                fx.so(so, 0x160508);
            }
            fx
        }
        fn path(&self, rel: &str) -> PathBuf {
            self.dir.join(rel)
        }
        fn write(&self, rel: &str, text: &str) {
            std::fs::write(self.path(rel), text).unwrap();
        }
        fn edit(&self, rel: &str, from: &str, to: &str) {
            let t = std::fs::read_to_string(self.path(rel)).unwrap();
            assert!(t.contains(from), "{rel} lacks {from:?}");
            self.write(rel, &t.replacen(from, to, 1));
        }
        fn so(&self, name: &str, version: u32) {
            std::fs::write(self.path(&format!("plugins/{name}")), tiny_elf(&[("plugin_version", version)], true)).unwrap();
        }
        fn run_with(&self, ctl: &dyn Controller, config: Option<PathBuf>) -> Report {
            run(&Options { slurm_conf: self.path("slurm.conf"), config, ctld_config_env: None }, ctl)
        }
        fn run(&self) -> Report {
            self.run_with(&UP, None)
        }
    }

    fn only(r: &Report, check: &str) -> Finding {
        let v: Vec<&Finding> = r.checks.iter().filter(|f| f.check == check).collect();
        assert_eq!(v.len(), 1, "{check}: {}", r.text());
        v[0].clone()
    }

    /// Issue 31 item 10: cellsched.toml, the GPU catalog, the profile DB or
    /// the history writable by others, or in a world-writable directory
    /// without the sticky bit, fail with the chown/chmod fix.
    #[test]
    fn files_others_can_write_fail() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        let fx = Fixture::new("perm");
        mode(&fx.dir, 0o755);
        assert!(fx.run().checks.iter().all(|c| c.status == Status::Ok), "{}", fx.run().text());
        for (file, check) in [("cellsched.toml", "cellsched.toml"), ("gpus.toml", "estimator.gpu_catalog"), ("p.csv", "estimator.profile_db"), ("h.csv", "estimator.history")] {
            mode(&fx.path(file), 0o666);
            let f = only(&fx.run(), check);
            assert_eq!(f.status, Status::Fail, "{file}: {f:?}");
            assert!(f.message.contains("writable by others") && f.fix.as_deref().is_some_and(|x| x.contains("chmod go-w")), "{f:?}");
            mode(&fx.path(file), 0o644);
        }
        // Files in a world-writable directory: refused without the sticky bit, fine with it.
        mode(&fx.dir, 0o777);
        let f = only(&fx.run(), "cellsched.toml");
        assert!(f.status == Status::Fail && f.message.contains("without the sticky bit"), "{f:?}");
        mode(&fx.dir, 0o1777);
        assert!(fx.run().checks.iter().all(|c| c.status == Status::Ok), "{}", fx.run().text());
        mode(&fx.dir, 0o755);
    }

    #[test]
    fn healthy_installation_is_all_ok() {
        let fx = Fixture::new("ok");
        let r = fx.run();
        assert!(r.checks.iter().all(|c| c.status == Status::Ok), "{}", r.text());
        for check in [
            "slurmctld",
            "Slurm release",
            "slurm.conf PriorityType",
            "slurm.conf JobSubmitPlugins",
            "plugin site_factor/cellsched",
            "plugin job_submit/cellsched",
            "plugstack.conf",
            "plugin spank_cellsched",
            "plan_dir",
            "cellsched.toml",
            "estimator.profile_db",
            "estimator.gpu_catalog",
            "estimator.history",
            "GPU types",
            "node Features",
        ] {
            assert!(!r.of(check).is_empty(), "no {check} finding:\n{}", r.text());
        }
        assert!(only(&r, "node Features").message.contains("all 3 GPU nodes"), "{}", r.text());
        assert!(only(&r, "estimator.profile_db").message.contains("1 measured points"));
    }

    #[test]
    fn slurm_conf_settings_missing_or_wrong() {
        let fx = Fixture::new("settings");
        fx.edit("slurm.conf", "PriorityType=priority/multifactor", "PriorityType=priority/basic");
        fx.edit("slurm.conf", "JobSubmitPlugins=lua,cellsched\n", "JobSubmitPlugins=lua\n");
        fx.edit("slurm.conf", "GresTypes=gpu\n", "");
        fx.edit("slurm.conf", "PrioritySiteFactorPlugin=site_factor/cellsched\n", "");
        let r = fx.run();
        let f = only(&r, "slurm.conf PriorityType");
        assert_eq!(f.status, Status::Fail);
        assert!(f.message.contains("slurm.conf:5") && f.fix.unwrap().contains("priority/multifactor"), "{}", r.text());
        let f = only(&r, "slurm.conf JobSubmitPlugins");
        assert!(f.status == Status::Fail && f.fix.unwrap().contains("cellsched"));
        assert_eq!(only(&r, "slurm.conf GresTypes").status, Status::Fail);
        assert!(only(&r, "slurm.conf PrioritySiteFactorPlugin").message.contains("not set"));
        assert!(!r.ok());
    }

    #[test]
    fn running_slurmctld_without_the_settings_is_a_warning() {
        struct Stale;
        impl Controller for Stale {
            fn ping(&self) -> Result<String, String> {
                UP.ping()
            }
            fn show_config(&self) -> Result<String, String> {
                Ok("SLURM_VERSION = 22.05.8\nJobSubmitPlugins        = lua\nPrioritySiteFactorPlugin = (null)\nPriorityType = priority/multifactor\n".into())
            }
            fn client_version(&self) -> Result<String, String> {
                UP.client_version()
            }
        }
        let fx = Fixture::new("stale");
        let r = fx.run_with(&Stale, None);
        let f = only(&r, "slurm.conf JobSubmitPlugins");
        assert!(f.status == Status::Warn && f.message.contains("running slurmctld has JobSubmitPlugins=lua"), "{}", r.text());
        assert!(f.fix.unwrap().contains("restart slurmctld"));
        assert_eq!(only(&r, "slurm.conf PriorityType").status, Status::Ok);
        assert_eq!(only(&r, "slurm.conf PrioritySiteFactorPlugin").status, Status::Ok, "(null) (as 22.05.8 reports it even when loaded) is not compared");
    }

    #[test]
    fn accounting_tres_without_gpu_types_is_a_warning() {
        let fx = Fixture::new("tres");
        fx.edit("slurm.conf", "AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100", "AccountingStorageTRES=gres/gpu:a100");
        let r = fx.run();
        let f = only(&r, "slurm.conf AccountingStorageTRES");
        assert_eq!(f.status, Status::Warn);
        assert!(f.message.starts_with("gres/gpu, gres/gpu:v100 missing"), "{}", f.message);
        assert!(r.ok(), "a warning is not a failure");
        fx.edit("slurm.conf", "AccountingStorageTRES=gres/gpu:a100\n", "");
        assert!(only(&fx.run(), "slurm.conf AccountingStorageTRES").message.contains("not set"));
    }

    #[test]
    fn unreadable_slurm_conf_stops_early() {
        let fx = Fixture::new("noconf");
        std::fs::remove_file(fx.path("slurm.conf")).unwrap();
        let r = fx.run();
        let f = only(&r, "slurm.conf");
        assert!(f.status == Status::Fail && f.message.contains("cannot read"), "{}", r.text());
        assert!(r.of("cellsched.toml").is_empty());
    }

    #[test]
    fn plugin_missing_or_built_for_another_release() {
        let fx = Fixture::new("plugins");
        std::fs::remove_file(fx.path("plugins/job_submit_cellsched.so")).unwrap();
        fx.so("site_factor_cellsched.so", 0x180B05);
        fx.write("plugins/spank_cellsched.so", "not an elf");
        let r = fx.run();
        let f = only(&r, "plugin site_factor/cellsched");
        assert_eq!(f.status, Status::Fail);
        assert!(f.message.contains("24.11.5") && f.message.contains("22.05.8"), "{}", f.message);
        assert!(f.fix.unwrap().contains("rebuild"));
        let f = only(&r, "plugin job_submit/cellsched");
        assert!(f.status == Status::Fail && f.message.contains("not found in PluginDir"), "{}", f.message);
        let f = only(&r, "plugin spank_cellsched");
        assert!(f.status == Status::Fail && f.message.contains("not an ELF"), "{}", f.message);
    }

    #[test]
    fn controller_down_is_a_failure_and_release_falls_back_to_the_client() {
        let fx = Fixture::new("down");
        let r = fx.run_with(&Fake { up: false, ctld: None, client: Some("22.05.8") }, None);
        assert_eq!(only(&r, "slurmctld").status, Status::Fail);
        assert_eq!(only(&r, "Slurm release").status, Status::Warn);
        assert_eq!(only(&r, "plugin site_factor/cellsched").status, Status::Ok, "{}", r.text());
        let r = fx.run_with(&Fake { up: false, ctld: None, client: None }, None);
        assert_eq!(only(&r, "plugin site_factor/cellsched").status, Status::Warn, "{}", r.text());
    }

    #[test]
    fn plugstack_without_the_plugin_and_unsafe_plan_dir() {
        let fx = Fixture::new("stack");
        fx.write("plugstack.conf.d/cellsched.conf", "# nothing\n");
        let r = fx.run();
        let f = only(&r, "plugstack.conf");
        assert!(f.status == Status::Fail && f.message.contains("do not load spank_cellsched.so"), "{}", r.text());

        let fx = Fixture::new("plandir");
        std::fs::create_dir_all(fx.path("plans")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(fx.path("plans"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let r = fx.run();
        let f = only(&r, "plan_dir");
        assert!(f.status == Status::Fail && f.message.contains("mode 777") && f.fix.unwrap().contains("chmod go-w"), "{}", r.text());
        std::fs::set_permissions(fx.path("plans"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let owner = std::fs::metadata(fx.path("plans")).unwrap().uid();
        assert_eq!(only(&fx.run(), "plan_dir").status == Status::Ok, owner == 0);
        std::fs::remove_dir(fx.path("plans")).unwrap();
        std::os::unix::fs::symlink("/tmp", fx.path("plans")).unwrap();
        assert!(only(&fx.run(), "plan_dir").message.contains("symlink"));
    }

    #[test]
    fn broken_config_names_file_and_line() {
        let fx = Fixture::new("toml");
        fx.write("bad.toml", "[placement]\nmax_gpus = 4\nmax_gpu = 8\n");
        let r = fx.run_with(&UP, Some(fx.path("bad.toml")));
        let f = only(&r, "cellsched.toml");
        assert_eq!(f.status, Status::Fail);
        assert!(f.message.contains(&format!("{}:3", fx.path("bad.toml").display())) && f.message.contains("max_gpu"), "{}", f.message);
        // The file the plugins find, missing.
        std::fs::remove_file(fx.path("cellsched.toml")).unwrap();
        let f = only(&fx.run(), "cellsched.toml");
        assert!(f.status == Status::Fail && f.message.contains("cannot read") && f.fix.unwrap().contains("create"), "{}", f.message);
    }

    #[test]
    fn config_location_follows_the_plugins() {
        let fx = Fixture::new("where");
        fx.write("other.toml", "[placement\n");
        // PrioritySiteFactorParameters=config= wins for both slurmctld plugins; SPANK reads the one beside slurm.conf.
        fx.edit("slurm.conf", "GresTypes=gpu\n", &format!("GresTypes=gpu\nPrioritySiteFactorParameters=config={}\n", fx.path("other.toml").display()));
        let r = fx.run();
        assert_eq!(only(&r, "cellsched.toml location").status, Status::Warn, "{}", r.text());
        let f = only(&r, "cellsched.toml");
        assert!(f.status == Status::Fail && f.message.contains("other.toml:1"), "{}", f.message);
        // CELLSCHED_CONFIG of slurmctld applies to both slurmctld plugins.
        let fx = Fixture::new("env");
        fx.write("env.toml", "");
        let r = run(
            &Options { slurm_conf: fx.path("slurm.conf"), config: None, ctld_config_env: Some(fx.path("env.toml").display().to_string()) },
            &UP,
        );
        assert!(only(&r, "cellsched.toml").message.contains("env.toml"));
        assert_eq!(only(&r, "cellsched.toml location").status, Status::Warn, "SPANK reads another file: {}", r.text());
    }

    #[test]
    fn broken_estimator_data() {
        let fx = Fixture::new("data");
        fx.write("p.csv", "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt__1.3B,64,a100,1,4,fast\n");
        fx.write("gpus.toml", "[gpu.newgpu]\nmem_gib = 80\n");
        std::fs::remove_file(fx.path("h.csv")).unwrap();
        let r = fx.run();
        let f = only(&r, "estimator.profile_db");
        assert!(f.status == Status::Fail && f.message.contains("p.csv:2"), "{}", f.message);
        let f = only(&r, "estimator.gpu_catalog");
        assert!(f.status == Status::Fail && f.message.contains("gpus.toml:1") && f.message.contains("fp16_tflops"), "{}", f.message);
        let f = only(&r, "estimator.history");
        assert!(f.status == Status::Fail && f.message.contains("h.csv"), "{}", f.message);
    }

    #[test]
    fn unknown_gpu_types_and_missing_features() {
        let fx = Fixture::new("types");
        fx.edit("gres.conf", "Type=v100", "Type=v1000");
        fx.edit("slurm.conf", "Feature=a100,ib", "Feature=ib");
        let r = fx.run();
        let types = r.of("GPU types");
        assert_eq!(types.len(), 1, "{}", r.text());
        assert!(types[0].status == Status::Fail && types[0].message.contains("gres.conf:2") && types[0].message.contains("v1000"));
        assert!(types[0].message.contains("v100"), "suggests the close name: {}", types[0].message);
        let features = r.of("node Features");
        assert_eq!(features.len(), 2, "{}", r.text());
        let f = features.iter().find(|f| f.message.contains("a100-[1-2]")).expect("a100 nodes named");
        assert!(f.status == Status::Fail && f.message.contains("slurm.conf:11"), "{}", r.text());
        assert!(f.fix.as_deref().unwrap().contains("add a100 to Feature="));
        // v100-1's untyped Gres takes its type from gres.conf (now v1000), which is not among its Features.
        assert!(features.iter().any(|f| f.message.contains("v100-1") && f.message.contains("v1000")), "{}", r.text());
        // A type the site's catalog adds is known.
        let fx = Fixture::new("types2");
        fx.write("gpus.toml", "[gpu.x9]\nfp16_tflops = 1\nfp32_tflops = 1\nmem_gib = 1\nmem_bw_gbs = 1\nintra_link = \"pcie\"\nintra_node_gbs = 1\ninter_node_gbs = 1\n");
        fx.edit("gres.conf", "Type=v100", "Type=x9");
        fx.edit("slurm.conf", "Features=v100", "Features=x9");
        fx.edit("slurm.conf", "gres/gpu:v100", "gres/gpu:x9");
        let r = fx.run();
        assert!(r.checks.iter().all(|c| c.status == Status::Ok), "{}", r.text());
    }

    #[test]
    fn shipped_examples_pass_the_file_checks() {
        let etc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../etc");
        let r = run(&Options { slurm_conf: etc.join("slurm.conf"), config: Some(etc.join("cellsched.toml")), ctld_config_env: None }, &UP);
        for check in ["slurm.conf", "cellsched.toml", "estimator", "GPU types", "node Features", "plugstack.conf"] {
            for f in r.of(check) {
                assert_eq!(f.status, Status::Ok, "{}", r.text());
            }
        }
    }
}

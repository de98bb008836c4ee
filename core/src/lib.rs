//! cellsched-core: the decision logic of cellsched, in pure Rust with no FFI.
//!
//! Used alike by the slurmctld plugins, the SPANK plugin, the simulator and
//! the CLI, so that what is tested here is what runs inside Slurm.
//!
//! - [`cell`]: the shared vocabulary — [`cell::Cell`], [`cell::Plan`],
//!   [`cell::Decision`] and their text forms (sbatch options, admin comments).
//! - [`gpu`], [`model`]: the GPU and model catalogs (data in `core/data/`).
//! - [`estimator`]: Cell → best plan and iteration time (with its
//!   calibration); [`profile_db`]: measured iteration times.
//! - [`placement`]: which Cell a DL job gets (submit, re-planning, sizing by
//!   marginal value, GRES strings); [`deadline`]: `--dl-deadline`;
//!   [`declared`]: what a declared `--dl-iters` bounds.
//! - [`elastic`]: reconfiguration of running `--dl-elastic` jobs (grow,
//!   move, preempt) and its restart-cost model.
//! - [`asrpt`]: the order of pending jobs; [`ordering`]: job records → site factors (site_factor/cellsched); [`predictor`], [`history`]: the
//!   iteration predictor; [`freezing`]: layer freezing.
//! - [`options`], [`job_env`]: the DL option table and the job-environment
//!   contract; [`limits`]: the one table of input caps (batch, GPUs, nodes)
//!   every edge applies; [`plan_env`]: the plan for tasks (the choice rule,
//!   and the plan as environment variables).
//! - [`signal`]: [`signal::ElasticSignal`], the checkpoint signal of `--dl-elastic`.
//! - [`record`]: the typed job record ([`record::DlRecord`]) and its one
//!   AdminComment text form, printer and parser.
//! - [`config`]: `cellsched.toml`; [`slurm_text`]: Slurm's own text parsed
//!   once (hostlists, GRES/TRES strings, slurm.conf/gres.conf lines).
//! - [`rank_cache`], [`snapshot_cache`]: bounded caches for long-lived
//!   processes (slurmctld), over the private `bounded` map.
//! - [`rng`]: [`rng::SplitMix64`], the seeded generator of the predictor,
//!   the history generator and the simulator.
//! - `error` (private): the crate's error type, [`CoreError`].
//!
//! The public surface is chosen, not everything that exists: the modules
//! above are namespaces, and every module below them is private, with what
//! other crates use re-exported by its parent (`placement::SizingRule`, not
//! `placement::sizing::SizingRule`; `estimator::Calibration`, not
//! `estimator::calibration::Calibration`). The vocabulary every host uses
//! is at the root: [`Cell`], [`Plan`], [`Decision`], [`CoreError`].
//! A test keeps it that way.
#![deny(missing_docs)]
pub mod asrpt;
mod bounded;
pub mod cell;
pub mod config;
pub mod deadline;
pub mod declared;
pub mod elastic;
mod error;
pub mod estimator;
pub mod freezing;
pub mod gpu;
pub mod history;
pub mod job_env;
pub mod limits;
pub mod model;
pub mod options;
pub mod ordering;
pub mod placement;
pub mod plan_env;
pub mod predictor;

pub mod profile_db;
pub mod rank_cache;
pub mod record;
pub mod rng;
pub mod signal;
pub mod slurm_text;
pub mod snapshot_cache;

pub use cell::{Cell, Decision, Plan};
pub use error::CoreError;

#[cfg(test)]
mod structure_tests {
    /// Modules below the top level are private (their parent re-exports
    /// what other crates use), and every public top-level module is mapped
    /// in the crate doc.
    #[test]
    fn submodules_are_private_and_top_modules_are_mapped() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap();
        let doc: String = lib.lines().filter(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        let mut public = 0;
        for line in lib.lines().filter(|l| l.starts_with("pub mod ")) {
            let m = line.trim_start_matches("pub mod ").trim_end_matches(';');
            assert!(doc.contains(&format!("[`{m}`]")), "core::{m} is public but the crate doc does not map it");
            public += 1;
        }
        assert!(public > 10, "read too few public modules");
        let mut stack = vec![root.clone()];
        let mut read = 0;
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p != root.join("lib.rs") && p.extension().is_some_and(|x| x == "rs") {
                    read += 1;
                    let text = std::fs::read_to_string(&p).unwrap();
                    for l in text.lines() {
                        assert!(!l.trim_start().starts_with("pub mod "), "{}: '{}': submodules are private; re-export what other crates need", p.display(), l.trim());
                    }
                }
            }
        }
        assert!(read > 20, "read too few files: {read}");
    }

    /// No file of core imports another that leads back to it: the modules,
    /// files included, form no circle of any length. Imports are read as
    /// text (`crate::a::b`, `super::x`, and a parent's own children) outside
    /// comments and test modules, each resolved to the deepest file it names.
    /// A folder's `mod.rs` using its own children is the folder's face, not
    /// an import: children may use their parent's names.
    #[test]
    fn no_file_imports_one_that_leads_back_to_it() {
        use std::collections::{BTreeMap, BTreeSet};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        // Module path ("estimator::plan_cost") -> the file's code before its tests.
        let mut code: BTreeMap<String, String> = BTreeMap::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
                if !rel.ends_with(".rs") || rel == "lib.rs" {
                    continue;
                }
                let module = rel.trim_end_matches(".rs").trim_end_matches("/mod").replace('/', "::");
                let text = std::fs::read_to_string(&p).unwrap();
                let body = text.split("#[cfg(test)]").next().unwrap_or("");
                let lines: Vec<&str> = body.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
                code.insert(module, lines.join("\n"));
            }
        }
        let known: BTreeSet<String> = code.keys().cloned().collect();
        let deepest = |path: &[&str]| -> Option<String> {
            (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| known.contains(m))
        };
        let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in &code {
            let segments: Vec<&str> = module.split("::").collect();
            let words = |rest: &str| -> Vec<String> {
                rest.split("::").map(|w| w.chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect::<String>()).take_while(|w| !w.is_empty()).collect()
            };
            let mut add = |target: Option<String>| {
                if let Some(t) = target.filter(|t| t != module) {
                    deps.entry(module.clone()).or_default().insert(t);
                }
            };
            for part in text.split("crate::").skip(1) {
                let w = words(part);
                add(deepest(&w.iter().map(String::as_str).collect::<Vec<_>>()));
            }
            for part in text.split("super::").skip(1) {
                let w = words(part);
                let full: Vec<&str> = segments[..segments.len() - 1].iter().copied().chain(w.iter().map(String::as_str)).collect();
                add(deepest(&full));
            }
        }
        assert!(deps.len() > 20, "read too few modules: {}", deps.len());
        // Depth-first search for a back edge; report the circle it closes.
        fn visit(m: &str, deps: &BTreeMap<String, BTreeSet<String>>, state: &mut BTreeMap<String, u8>, path: &mut Vec<String>) -> Option<Vec<String>> {
            state.insert(m.to_string(), 1);
            path.push(m.to_string());
            for d in deps.get(m).into_iter().flatten() {
                match state.get(d.as_str()).copied().unwrap_or(0) {
                    1 => {
                        let start = path.iter().position(|p| p == d).unwrap();
                        return Some(path[start..].iter().cloned().chain([d.clone()]).collect());
                    }
                    0 => {
                        if let Some(c) = visit(d, deps, state, path) {
                            return Some(c);
                        }
                    }
                    _ => {}
                }
            }
            path.pop();
            state.insert(m.to_string(), 2);
            None
        }
        let mut state = BTreeMap::new();
        for m in code.keys() {
            if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
                if let Some(c) = visit(m, &deps, &mut state, &mut Vec::new()) {
                    panic!("import circle in core: {}", c.join(" -> "));
                }
            }
        }
    }
}

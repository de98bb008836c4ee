//! The one way to assemble an [`Estimator`] from `cellsched.toml`'s
//! `[estimator]` settings: built-in catalogs, the site's GPU catalog
//! overrides, extra models, the measured profile DB. Every host (job_submit,
//! the SPANK plugin, `cellsched estimate`/`cells`/`whatif`, the simulator and
//! the live replay) calls [`Estimator::from_config`] or, to add sources of its
//! own, [`Estimator::builder`]; a file that cannot be used is left out and
//! named in [`Assembled::problems`], so a host inside Slurm logs it and keeps
//! running on the built-in numbers, while the CLI refuses to go on.
use super::Estimator;
use crate::config::EstimatorConfig;
use crate::gpu::GpuCatalog;
use crate::model::ModelCatalog;
use crate::profile_db::ProfileDb;
use std::path::Path;

/// An estimator and what assembling it found.
pub struct Assembled {
    /// The estimator (built-in numbers where a file was left out).
    pub estimator: Estimator,
    /// The profile DB it was given, if one loaded (to tell measured points from estimates).
    pub db: Option<ProfileDb>,
    /// One line per file left out, naming the setting, the file and why.
    pub problems: Vec<String>,
}

/// What an [`Estimator`] is assembled from: `cellsched.toml`'s
/// `[estimator]` settings plus what a host adds (a model catalog, GPU data of
/// its own, a profile DB it already loaded). Made by [`Estimator::builder`].
pub struct EstimatorSources<'a> {
    cfg: &'a EstimatorConfig,
    model_catalog: Option<&'a Path>,
    gpu_overrides: Vec<(String, String)>,
    db: Option<ProfileDb>,
}

impl<'a> EstimatorSources<'a> {
    /// Extra `[[model]]` entries from this TOML file.
    pub fn model_catalog(mut self, path: Option<&'a Path>) -> Self {
        self.model_catalog = path;
        self
    }

    /// GPU catalog overrides as TOML text (`[gpu.KEY]` tables), applied after
    /// `estimator.gpu_catalog`; `origin` names them in problems (e.g. a
    /// simulated cluster's network bandwidth per GPU type).
    pub fn gpu_overrides(mut self, origin: &str, toml_text: String) -> Self {
        self.gpu_overrides.push((origin.to_string(), toml_text));
        self
    }

    /// A profile DB already loaded, used in place of `estimator.profile_db`.
    pub fn profile_db(mut self, db: Option<ProfileDb>) -> Self {
        if db.is_some() {
            self.db = db;
        }
        self
    }

    /// Assembles the estimator (see the module doc).
    pub fn assemble(self) -> Assembled {
        let mut problems = Vec::new();
        let mut gpus = GpuCatalog::builtin();
        if let Some(p) = &self.cfg.gpu_catalog {
            let mut with = gpus.clone();
            match crate::config::check_trusted_file(p).map_err(|e| e.to_string()).and_then(|()| std::fs::read_to_string(p).map_err(|e| e.to_string())).and_then(|t| {
                with.apply_overrides_toml(&t, &p.display().to_string()).map_err(|e| e.to_string())
            }) {
                Ok(()) => gpus = with,
                Err(e) => problems.push(format!("estimator.gpu_catalog {}: {e}; using built-in GPU data", p.display())),
            }
        }
        for (origin, text) in &self.gpu_overrides {
            let mut with = gpus.clone();
            match with.apply_overrides_toml(text, origin) {
                Ok(()) => gpus = with,
                Err(e) => problems.push(format!("GPU overrides from {origin}: {e}; left out")),
            }
        }
        let mut models = ModelCatalog::builtin();
        if let Some(p) = self.model_catalog {
            let mut with = models.clone();
            match std::fs::read_to_string(p).map_err(|e| e.to_string()).and_then(|t| {
                with.add_models_toml(&t, &p.display().to_string()).map_err(|e| e.to_string())
            }) {
                Ok(()) => models = with,
                Err(e) => problems.push(format!("model catalog {}: {e}; using the built-in models", p.display())),
            }
        }
        let mut estimator = Estimator::new(gpus, models);
        let mut db = self.db;
        if db.is_none() {
            if let Some(p) = &self.cfg.profile_db {
                match ProfileDb::load_csv(p) {
                    Ok(d) => db = Some(d),
                    Err(e) => problems.push(format!("estimator.profile_db: {e}; using analytical estimates only")),
                }
            }
        }
        if let Some(d) = &db {
            estimator = estimator.with_db(d.clone());
        }
        Assembled { estimator, db, problems }
    }
}

impl Estimator {
    /// Assembles the estimator `cfg` describes, with extra `[[model]]`
    /// entries from `model_catalog` when given (see the module doc).
    pub fn from_config(cfg: &EstimatorConfig, model_catalog: Option<&Path>) -> Assembled {
        Estimator::builder(cfg).model_catalog(model_catalog).assemble()
    }

    /// The sources `cfg` names, for a host that adds its own (see
    /// [`EstimatorSources`]); `.assemble()` builds the estimator.
    pub fn builder(cfg: &EstimatorConfig) -> EstimatorSources<'_> {
        EstimatorSources { cfg, model_catalog: None, gpu_overrides: Vec::new(), db: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::JobSpec;

    #[test]
    fn missing_or_broken_files_are_named_and_left_out() {
        let dir = std::env::temp_dir().join(format!("cellsched-assemble-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad_gpus = dir.join("gpus.toml");
        std::fs::write(&bad_gpus, "[gpu.a100]\nfp16_tflops = \"lots\"\n").unwrap();
        let cfg = EstimatorConfig { profile_db: Some(dir.join("nope.csv")), gpu_catalog: Some(bad_gpus.clone()), history: None };
        let a = Estimator::from_config(&cfg, Some(&dir.join("models-missing.toml")));
        assert_eq!(a.problems.len(), 3, "{:?}", a.problems);
        assert!(a.problems[0].starts_with("estimator.gpu_catalog") && a.problems[0].contains("gpus.toml"), "{:?}", a.problems);
        assert!(a.problems[1].contains("models-missing.toml"), "{:?}", a.problems);
        assert!(a.problems[2].starts_with("estimator.profile_db") && a.problems[2].contains("nope.csv"), "{:?}", a.problems);
        assert!(a.db.is_none());
        // What is left is the built-in estimator: same answers.
        let job = JobSpec { model: ModelCatalog::builtin().resolve("gpt__350M").unwrap(), global_batch: 8 };
        let cell = crate::Cell::new("a100", 4, 1).unwrap();
        let builtin = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        assert_eq!(a.estimator.estimate(&job, &cell, 4).unwrap(), builtin.estimate(&job, &cell, 4).unwrap());
        // A good profile DB is used and returned.
        let db = dir.join("db.csv");
        std::fs::write(&db, "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt__350M,8,a100,1,4,0.5\n").unwrap();
        let good = Estimator::from_config(&EstimatorConfig { profile_db: Some(db), ..Default::default() }, None);
        assert!(good.problems.is_empty(), "{:?}", good.problems);
        assert!(good.db.is_some());
        assert_eq!(good.estimator.estimate(&job, &cell, 4).unwrap().iter_time_s, 0.5);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_hosts_own_gpu_data_and_db_are_used_and_bad_overrides_named() {
        let cfg = EstimatorConfig::default();
        let job = JobSpec { model: ModelCatalog::builtin().resolve("gpt__1.3B").unwrap(), global_batch: 32 };
        let cell = crate::Cell::new("a100", 8, 1).unwrap();
        let base = Estimator::from_config(&cfg, None).estimator.estimate(&job, &cell, 4).unwrap().iter_time_s;
        let slow_net = Estimator::builder(&cfg).gpu_overrides("cluster c.toml", "[gpu.a100]\ninter_node_gbs = 0.1\n".into()).assemble();
        assert!(slow_net.problems.is_empty(), "{:?}", slow_net.problems);
        let slow = slow_net.estimator.estimate(&job, &cell, 4).unwrap().iter_time_s;
        assert!(slow > base, "a 0.1 GB/s network must slow an 8-GPU job over 2 nodes: {slow} vs {base}");
        let bad = Estimator::builder(&cfg).gpu_overrides("cluster c.toml", "[gpu.a100]\ninter_node_gbs = \"fast\"\n".into()).assemble();
        assert_eq!(bad.problems.len(), 1, "{:?}", bad.problems);
        assert!(bad.problems[0].contains("cluster c.toml"), "{:?}", bad.problems);
        let mut db = ProfileDb::new();
        for r in crate::profile_db::parse_csv("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\ngpt__1.3B,32,a100,2,4,0.25\n", "mem").unwrap() {
            db.insert(r);
        }
        let with_db = Estimator::builder(&cfg).profile_db(Some(db)).assemble();
        assert!(with_db.db.is_some());
        assert_eq!(with_db.estimator.estimate(&job, &cell, 4).unwrap().iter_time_s, 0.25);
    }
}

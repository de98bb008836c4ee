//! The production [`IterTimeSource`]: the core's `Estimator` (datasheet or
//! calibrated model) with the measured `ProfileDb` overriding exact matches —
//! the same code the job_submit plugin runs.
//!
//! A simulator shape (`nodes` x `gpus_per_node`) is passed to the estimator
//! with `gpus_per_node` as the node size, so a job spread over more nodes than
//! necessary pays the inter-node costs of that spread. A group's
//! `inter_node_gbps` overrides the GPU type's catalog network bandwidth.
use crate::cluster::ClusterSpec;
use crate::error::SimError;
use crate::times::{IterTimeSource, Measured, TimedCell};
use cellsched_core::estimator::{CellOffer, Estimator, JobSpec};
use cellsched_core::config::EstimatorConfig;
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::profile_db::{ProfileDb, ProfileRecord};
use cellsched_core::Cell;
use std::cell::RefCell;
use std::collections::HashMap;

/// Iteration times from the core estimator (+ optional measured DB).
pub struct CoreTimes {
    est: Estimator,
    db: Option<ProfileDb>,
    jobs: RefCell<HashMap<(String, u32), Option<JobSpec>>>,
}

impl CoreTimes {
    /// An estimator for the cluster's GPU types (assembled by
    /// `Estimator::builder`, with each group's `inter_node_gbps` as GPU data
    /// overrides and `db` as the profile DB); errors name unknown types.
    pub fn new(spec: &ClusterSpec, db: Option<ProfileDb>) -> Result<Self, SimError> {
        let mut overrides = String::new();
        let mut seen: HashMap<&str, f64> = HashMap::new();
        let builtin = GpuCatalog::builtin();
        for g in &spec.groups {
            let s = builtin.get(&g.gpu_type)?;
            if s.name != g.gpu_type {
                return Err(SimError::invalid("GPU type", &g.gpu_type, format!("the catalog key '{}'", s.name)));
            }
            if let Some(gbps) = g.inter_node_gbps {
                match seen.get(g.gpu_type.as_str()) {
                    Some(&prev) if prev != gbps => log::warn!(
                        "groups of GPU type {} declare different inter_node_gbps ({prev} and {gbps}); using {prev}",
                        g.gpu_type
                    ),
                    Some(_) => {}
                    None => {
                        seen.insert(&g.gpu_type, gbps);
                        overrides.push_str(&format!("[gpu.{}]\ninter_node_gbs = {}\n", g.gpu_type, gbps / 8.0));
                    }
                }
            }
        }
        let a = Estimator::builder(&EstimatorConfig::default())
            .gpu_overrides("the cluster spec's inter_node_gbps", overrides)
            .profile_db(db)
            .assemble();
        if let Some(p) = a.problems.first() {
            return Err(SimError::input("cluster spec", None, "inter_node_gbps", p.clone()));
        }
        Ok(CoreTimes { est: a.estimator, db: a.db, jobs: RefCell::new(HashMap::new()) })
    }

    /// Wraps an estimator built elsewhere (e.g. from the plugins'
    /// `cellsched.toml`); `db` is the profile DB it was given, if any (used
    /// only to tell measured points from estimates).
    pub fn from_estimator(est: Estimator, db: Option<ProfileDb>) -> Self {
        CoreTimes { est, db, jobs: RefCell::new(HashMap::new()) }
    }

    /// Loads a measured iteration-time CSV (`model,batch,gpu_type,nodes,gpus_per_node,iter_time_s`).
    pub fn load_db(path: &str) -> Result<ProfileDb, SimError> {
        Ok(ProfileDb::load_csv(path)?)
    }

    fn job(&self, model: &str, batch: u32) -> Option<JobSpec> {
        self.jobs
            .borrow_mut()
            .entry((model.to_string(), batch))
            .or_insert_with(|| {
                let m = self.est.model_catalog().get(model).ok()?.clone();
                Some(JobSpec { model: m, global_batch: batch })
            })
            .clone()
    }

    /// The estimator in use.
    pub fn estimator(&self) -> &Estimator {
        &self.est
    }
}

impl IterTimeSource for CoreTimes {
    fn iter_time(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
        let job = self.job(model, batch)?;
        let gpus = nodes * gpus_per_node;
        let mut best: Option<f64> = None;
        for stages in (1..=gpus.min(64)).filter(|s| gpus % s == 0) {
            let Ok(cell) = Cell::new(gpu_type, gpus, stages) else { continue };
            if let Ok(e) = self.est.estimate(&job, &cell, gpus_per_node) {
                if best.map_or(true, |b| e.iter_time_s < b) {
                    best = Some(e.iter_time_s);
                }
            }
        }
        best
    }

    fn rank_cells(&self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Vec<TimedCell> {
        let Some(job) = self.job(model, batch) else { return Vec::new() };
        let mut out: Vec<TimedCell> = Vec::new();
        for e in self.est.rank_cells(&job, &offers, max_gpus) {
            let nodes = e.nodes.max(1);
            let c = TimedCell { gpu_type: e.cell.gpu_type.clone(), gpus: e.cell.gpus, nodes, gpus_per_node: e.cell.gpus / nodes, iter_s: e.iter_time_s };
            // Several stage counts per shape: keep the fastest (first).
            if !out.iter().any(|o| o.gpu_type == c.gpu_type && o.gpus == c.gpus && o.nodes == c.nodes) {
                out.push(c);
            }
        }
        out
    }

    fn check_model(&self, model: &str) -> Result<(), SimError> {
        self.est.model_catalog().get(model).map(|_| ()).map_err(SimError::from)
    }

    fn is_measured(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> bool {
        self.db.as_ref().is_some_and(|d| d.lookup(model, batch, gpu_type, nodes, gpus_per_node).is_some())
    }

    fn with_learned(&self, learned: &[Measured]) -> Option<Box<dyn IterTimeSource>> {
        let mut db = self.db.clone().unwrap_or_default();
        for m in learned {
            db.insert(ProfileRecord {
                model: m.model.clone(),
                batch: m.batch,
                gpu_type: m.gpu_type.clone(),
                nodes: m.nodes,
                gpus_per_node: m.gpus_per_node,
                iter_time_s: m.iter_s,
                // `cellsched report --profile-rows` does not know the plan a job ran.
                plan: None,
                peak_mem_gib: None,
                first_iter_s: None,
            });
        }
        Some(Box::new(CoreTimes::from_estimator(self.est.clone().with_db(db.clone()), Some(db))))
    }

    fn num_layers(&self, model: &str) -> u32 {
        self.est.model_catalog().get(model).map_or(0, |m| m.layers)
    }

    fn measured_first_iter_s(&self, model: &str, gpu_type: &str) -> Option<f64> {
        let name = self.est.model_catalog().get(model).map_or_else(|_| model.to_string(), |m| m.name.clone());
        self.est.measured_first_iter_s(&name, gpu_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ClusterSpec {
        ClusterSpec::parse("[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 4\n[[group]]\ngpu_type = \"v100\"\nnodes = 2\ngpus_per_node = 8\n", "c").unwrap()
    }

    #[test]
    fn estimator_times_are_sane() {
        let t = CoreTimes::new(&spec(), None).unwrap();
        let a = t.iter_time("resnet50", 64, "a100", 1, 1).unwrap();
        let v = t.iter_time("resnet50", 64, "v100", 1, 1).unwrap();
        assert!(a > 0.0 && v > a, "a100 {a} should beat v100 {v}");
        // Spreading 4 GPUs over 2 nodes is not faster than one node.
        let one = t.iter_time("bert__760M", 32, "a100", 1, 4).unwrap();
        let two = t.iter_time("bert__760M", 32, "a100", 2, 2).unwrap();
        assert!(two >= one, "{two} < {one}");
        assert!(t.check_model("resnet-50").is_ok());
        let e = t.check_model("resnet51").unwrap_err().to_string();
        assert!(e.contains("resnet51"), "{e}");
        let offers = vec![CellOffer { gpu_type: "v100".into(), gpus_per_node: 8, free_gpus_per_node: vec![8, 3] }];
        let r = t.rank_cells("bert__760M", 32, &offers, 8);
        assert!(!r.is_empty() && r.iter().all(|c| c.gpu_type == "v100" && c.gpus <= 8));
        assert!(r.windows(2).all(|w| w[0].iter_s <= w[1].iter_s));
    }

    /// A learnt run answers its own Cell and, through the recalibration,
    /// moves the estimate of the same model's other Cells on that type
    /// towards it; the source it was made from is unchanged.
    #[test]
    fn learnt_runs_recalibrate_the_other_cells() {
        let t = CoreTimes::new(&spec(), None).unwrap();
        let (one, four) = (t.iter_time("resnet50", 64, "v100", 1, 1).unwrap(), t.iter_time("resnet50", 64, "v100", 1, 4).unwrap());
        let measured = Measured { model: "resnet50".into(), batch: 64, gpu_type: "v100".into(), nodes: 1, gpus_per_node: 1, iter_s: 2.0 * one };
        let learnt = t.with_learned(&[measured]).unwrap();
        assert_eq!(learnt.iter_time("resnet50", 64, "v100", 1, 1), Some(2.0 * one));
        assert!(learnt.is_measured("resnet50", 64, "v100", 1, 1));
        let four_after = learnt.iter_time("resnet50", 64, "v100", 1, 4).unwrap();
        assert!(four_after > 1.3 * four, "a single GPU measured 2x slower must slow the 4-GPU estimate: {four} -> {four_after}");
        assert_eq!(t.iter_time("resnet50", 64, "v100", 1, 4), Some(four));
        assert!(!t.is_measured("resnet50", 64, "v100", 1, 1));
    }

    #[test]
    fn unknown_cluster_gpu_type_is_named() {
        let s = ClusterSpec::parse("[[group]]\ngpu_type = \"a1000\"\nnodes = 1\ngpus_per_node = 4\n", "c").unwrap();
        let e = CoreTimes::new(&s, None).err().unwrap().to_string();
        assert!(e.contains("a1000"), "{e}");
    }
}

//! Choosing a Cell for a submitted DL job: the pure part of the plugin.
//!
//! Input: the job's `spank_job_env`, feature and GPU request strings, and a
//! snapshot of the nodes' GPUs. Output: leave the job stock, reject it with
//! a message (bad user input), or place it: a [`Decision`] plus, unless the
//! user's own typed `--gres` already says where it runs, a [`Rewrite`] to a
//! node feature and an untyped per-node GPU count.
use crate::job_env;
use crate::request::{self, GpuRequest};
use cellsched_core::config::PlacementConfig;
use cellsched_core::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use cellsched_core::options::{CellChoice, DlOptions};
use cellsched_core::{Cell, CoreError, Decision};
use std::collections::BTreeMap;

/// GPUs of one type on one node, from its configured and used GRES.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGpus {
    /// Node name.
    pub node: String,
    /// GPU type (GRES type, also the node's feature).
    pub gpu_type: String,
    /// GPUs of this type on the node.
    pub total: u32,
    /// GPUs of this type not allocated.
    pub free: u32,
}

/// `(type, count)` of each GPU entry in a GRES string like `gpu:a100:4(S:0),gpu:v100:2(IDX:0-1)`.
fn gres_gpus(gres: &str) -> Vec<(Option<String>, u32)> {
    // Split on commas outside parentheses (`IDX:0,2-3` lists contain commas).
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in gres.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(&gres[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&gres[start..]);
    entries
        .into_iter()
        .filter_map(|e| request::gpu_request(Some(e)))
        .map(|GpuRequest { gpu_type, count }| (gpu_type, count.min(u64::from(u32::MAX)) as u32))
        .collect()
}

/// GPUs of an available node, per type; unavailable nodes and untyped GPUs offer nothing.
pub fn node_gpus(node: &str, gres: Option<&str>, gres_used: Option<&str>, available: bool) -> Vec<NodeGpus> {
    if !available {
        return Vec::new();
    }
    let used = gres_gpus(gres_used.unwrap_or(""));
    gres_gpus(gres.unwrap_or(""))
        .into_iter()
        .filter_map(|(ty, total)| {
            let ty = ty?;
            let busy: u32 = used.iter().filter(|(t, _)| t.as_deref() == Some(ty.as_str())).map(|(_, n)| *n).sum();
            Some(NodeGpus { node: node.to_string(), gpu_type: ty, total, free: total.saturating_sub(busy) })
        })
        .collect()
}

/// Offers per allowed GPU type: free GPUs per node (`capacity` = every GPU counted free).
pub fn offers(nodes: &[NodeGpus], cfg: &PlacementConfig, capacity: bool) -> Vec<CellOffer> {
    let mut by_type: BTreeMap<&str, CellOffer> = BTreeMap::new();
    for n in nodes.iter().filter(|n| cfg.allows(&n.gpu_type) && n.total > 0) {
        let o = by_type.entry(&n.gpu_type).or_insert_with(|| CellOffer {
            gpu_type: n.gpu_type.clone(),
            gpus_per_node: n.total,
            free_gpus_per_node: Vec::new(),
        });
        o.gpus_per_node = o.gpus_per_node.max(n.total);
        o.free_gpus_per_node.push(if capacity { n.total } else { n.free });
    }
    by_type.into_values().collect()
}

/// The job fields placement reads.
#[derive(Debug, Clone, Default)]
pub struct SubmitRequest {
    /// `spank_job_env` entries.
    pub env: Vec<String>,
    /// `--constraint` expression.
    pub features: Option<String>,
    /// `tres_per_node` (`--gres`, `--gpus-per-node`).
    pub tres_per_node: Option<String>,
    /// `min_nodes` if the user set it.
    pub min_nodes: Option<u32>,
}

/// How the job's request is rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// New feature expression (the user's AND the GPU type).
    pub features: String,
    /// New `tres_per_node` with an untyped GPU count.
    pub tres_per_node: String,
    /// Node count (min = max).
    pub nodes: u32,
}

/// A placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The estimate behind it.
    pub estimate: Estimate,
    /// What is recorded in AdminComment and `CELLSCHED_DECISION`.
    pub decision: Decision,
    /// `None` when the user's typed `--gres` is kept as is.
    pub rewrite: Option<Rewrite>,
    /// The user pinned the Cell (never re-planned).
    pub pinned: bool,
    /// Report tags appended to AdminComment ([`dl_tags`]).
    pub tags: String,
}

impl Placement {
    /// AdminComment text: the decision, then the report tags.
    pub fn admin_comment(&self) -> String {
        with_tags(&self.decision.to_admin_comment(), &self.tags)
    }
}

/// `text` followed by ` tags` (nothing added for empty tags).
pub fn with_tags(text: &str, tags: &str) -> String {
    if tags.is_empty() {
        text.to_string()
    } else {
        format!("{text} {tags}")
    }
}

/// The tags `cellsched report` reads after the decision in AdminComment:
/// `model=<catalog name> batch=<global batch>`, plus `iters=<N>` only when
/// the user declared `--dl-iters`. `Decision::parse_admin_comment` ignores them.
pub fn dl_tags(job: &JobSpec, opts: &DlOptions) -> String {
    let mut t = Vec::new();
    // Catalog names never hold spaces or '='; a name that did would break the word format.
    if !job.model.name.is_empty() && !job.model.name.contains(|c: char| c.is_whitespace() || c == '=' || c == ';') {
        t.push(format!("model={}", job.model.name));
    }
    t.push(format!("batch={}", job.global_batch));
    if let Some(n) = opts.iters {
        t.push(format!("iters={n}"));
    }
    t.join(" ")
}

/// What to do with a submitted job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Leave the job as Slurm would; the reason is logged.
    Stock(String),
    /// Reject the submission with this message (bad user input).
    Reject(String),
    /// Place it.
    Place(Box<Placement>),
}

/// The job's validated DL options, `Ok(None)` if it has none.
pub fn dl_options(env: &[String]) -> Result<Option<DlOptions>, CoreError> {
    if !job_env::has_dl_options(env) {
        return Ok(None);
    }
    let o = DlOptions::from_env(|k| job_env::lookup_exact(env, k).map(str::to_string))?;
    o.check_consistency()?;
    Ok(Some(o))
}

/// The estimator's view of the job, or the outcome that ends placement.
pub fn job_spec(opts: &DlOptions, est: &Estimator) -> Result<JobSpec, Outcome> {
    let Some(model) = opts.model.as_deref() else {
        return Err(Outcome::Reject("cellsched: --dl-model is required with other --dl-* options".into()));
    };
    if model.to_ascii_lowercase().ends_with(".toml") {
        return Err(Outcome::Stock(format!(
            "model file '{model}' is not read inside slurmctld; use a catalog model name for Cell placement"
        )));
    }
    let spec = opts.check_model(|m| est.model_catalog().resolve(m)).map_err(|e| Outcome::Reject(format!("cellsched: {e}")))?;
    let Some(global_batch) = opts.batch else {
        return Err(Outcome::Reject(format!("cellsched: --dl-batch=N (global batch size) is required with --dl-model={model}")));
    };
    Ok(JobSpec { model: spec.expect("model is set"), global_batch })
}

fn gpus_per_node_of(nodes: &[NodeGpus], gpu_type: &str) -> Option<u32> {
    nodes.iter().filter(|n| n.gpu_type == gpu_type).map(|n| n.total).max()
}

/// Chooses the Cell of a submitted job (see the module doc).
pub fn place(req: &SubmitRequest, nodes: &[NodeGpus], cfg: &PlacementConfig, est: &Estimator) -> Outcome {
    let opts = match dl_options(&req.env) {
        Ok(None) => return Outcome::Stock("no DL options".into()),
        Ok(Some(o)) => o,
        Err(e) => return Outcome::Reject(format!("cellsched: {e}")),
    };
    let job = match job_spec(&opts, est) {
        Ok(j) => j,
        Err(out) => return out,
    };
    let user_gpus = request::gpu_request(req.tres_per_node.as_deref());
    let typed = user_gpus.as_ref().and_then(|g| g.gpu_type.clone().map(|t| (t, g.count)));

    // Pinned by the user: a typed --gres or --dl-cell=TYPExN.
    let pinned_cell = match (&opts.cell, &typed) {
        (CellChoice::Pinned(c), Some((t, _))) if &c.gpu_type != t => {
            return Outcome::Reject(format!(
                "cellsched: --dl-cell={c} conflicts with the requested GPU type '{t}' in --gres; give one of them"
            ))
        }
        (CellChoice::Pinned(c), _) => Some(c.clone()),
        (CellChoice::Auto, Some((t, per_node))) => {
            let nodes_n = req.min_nodes.unwrap_or(1).max(1);
            match Cell::new(t, (*per_node as u32).saturating_mul(nodes_n), 1) {
                Ok(c) => Some(c),
                Err(e) => return Outcome::Reject(format!("cellsched: --gres: {e}")),
            }
        }
        (CellChoice::Auto, None) => None,
    };
    if let Some(cell) = pinned_cell {
        let Some(node_size) = gpus_per_node_of(nodes, &cell.gpu_type) else {
            return Outcome::Stock(format!("no node offers GPU type '{}' to estimate cell {cell}", cell.gpu_type));
        };
        let estimate = match est.estimate(&job, &cell, node_size) {
            Ok(e) => e,
            Err(e @ (CoreError::Infeasible(_) | CoreError::Invalid { .. })) => {
                return Outcome::Reject(format!("cellsched: cell {cell} cannot run {}: {e}", job.model.name))
            }
            Err(e) => return Outcome::Stock(format!("estimator error for pinned cell {cell}: {e}")),
        };
        let rewrite = typed.is_none().then(|| rewrite_for(req, &estimate));
        let tags = dl_tags(&job, &opts);
        return Outcome::Place(Box::new(Placement { decision: estimate.to_decision(), estimate, rewrite, pinned: true, tags }));
    }

    if !cfg.enabled {
        return Outcome::Stock("placement.enabled = false".into());
    }
    let free = offers(nodes, cfg, false);
    if free.iter().all(|o| est.gpu_catalog().get(&o.gpu_type).is_err()) {
        return Outcome::Stock("no allowed GPU type of the cluster is known to the estimator".into());
    }
    let best = est.rank_cells(&job, &free, cfg.max_gpus).into_iter().next().or_else(|| {
        // Nothing fits in the free GPUs now: the best Cell of the whole cluster (re-planned later).
        est.rank_cells(&job, &offers(nodes, cfg, true), cfg.max_gpus).into_iter().next()
    });
    match best {
        Some(estimate) => Outcome::Place(Box::new(Placement {
            decision: estimate.to_decision(),
            rewrite: Some(rewrite_for(req, &estimate)),
            estimate,
            pinned: false,
            tags: dl_tags(&job, &opts),
        })),
        None => Outcome::Reject(format!(
            "cellsched: {} with global batch {} fits on no allowed GPU type with at most {} GPUs (placement.max_gpus)",
            job.model.name, job.global_batch, cfg.max_gpus
        )),
    }
}

/// The request rewrite for an estimate: feature = type, untyped count per node.
pub fn rewrite_for(req: &SubmitRequest, e: &Estimate) -> Rewrite {
    Rewrite {
        features: request::with_type_feature(req.features.as_deref(), &e.cell.gpu_type),
        tres_per_node: request::with_untyped_gpus(req.tres_per_node.as_deref(), e.gpus_per_node),
        nodes: e.nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;

    fn est() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn model() -> String {
        ModelCatalog::builtin().names().find(|n| n.contains("gpt")).expect("a GPT model in the catalog").to_string()
    }

    /// The test cluster: 2 × a100 (4), 2 × v100 (8), 1 × a10 (4).
    fn cluster(used: &[(&str, u32)]) -> Vec<NodeGpus> {
        let spec = [("a100-1", "a100", 4), ("a100-2", "a100", 4), ("v100-1", "v100", 8), ("v100-2", "v100", 8), ("a10-1", "a10", 4)];
        spec.iter()
            .flat_map(|(n, t, c)| {
                let u = used.iter().find(|(x, _)| x == n).map(|(_, u)| *u).unwrap_or(0);
                let used_s = format!("gpu:{t}:{u}(IDX:N/A)");
                node_gpus(n, Some(&format!("gpu:{t}:{c}(S:0)")), Some(&used_s), true)
            })
            .collect()
    }

    fn req(env: &[&str]) -> SubmitRequest {
        SubmitRequest { env: env.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn parses_node_gres() {
        let n = node_gpus("v", Some("gpu:v100:8(S:0-1)"), Some("gpu:v100:3(IDX:0,2-3)"), true);
        assert_eq!(n, vec![NodeGpus { node: "v".into(), gpu_type: "v100".into(), total: 8, free: 5 }]);
        assert!(node_gpus("v", Some("gpu:v100:8"), None, false).is_empty());
        assert_eq!(node_gpus("v", Some("gpu:v100:8"), None, true)[0].free, 8);
        let cfg = PlacementConfig { allowed_gpu_types: vec!["a100".into(), "v100".into()], ..Default::default() };
        let o = offers(&cluster(&[("a100-1", 4)]), &cfg, false);
        assert_eq!(o.len(), 2);
        assert_eq!((o[0].gpu_type.as_str(), o[0].free_gpus_per_node.clone()), ("a100", vec![0, 4]));
        assert_eq!(offers(&cluster(&[("a100-1", 4)]), &cfg, true)[0].free_gpus_per_node, vec![4, 4]);
    }

    #[test]
    fn no_dl_options_is_stock_and_bad_input_is_rejected() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        assert!(matches!(place(&req(&["FOO=1"]), &c, &cfg, &e), Outcome::Stock(_)));
        let m = model();
        for (env, needle) in [
            (vec!["CELLSCHED_DL_MODEL=no-such-model", "CELLSCHED_DL_BATCH=8"], "no-such-model"),
            (vec![format!("CELLSCHED_DL_MODEL={m}").leak() as &str, "CELLSCHED_DL_BATCH=zero"], "CELLSCHED_DL_BATCH"),
            (vec![format!("CELLSCHED_DL_MODEL={m}").leak() as &str], "--dl-batch"),
            (vec!["CELLSCHED_DL_BATCH=8"], "--dl-model"),
        ] {
            match place(&req(&env), &c, &cfg, &e) {
                Outcome::Reject(msg) => assert!(msg.contains(needle), "{env:?}: {msg}"),
                other => panic!("{env:?}: expected a rejection, got {other:?}"),
            }
        }
    }

    #[test]
    fn auto_picks_the_best_ranked_free_cell_and_rewrites() {
        let (e, cfg) = (est(), PlacementConfig::default());
        let m = model();
        let env = [format!("SPANK_CELLSCHED_DL_MODEL={m}"), "SPANK_CELLSCHED_DL_BATCH=32".into()];
        let r = SubmitRequest { env: env.to_vec(), features: Some("ib".into()), ..Default::default() };
        let c = cluster(&[]);
        let Outcome::Place(p) = place(&r, &c, &cfg, &e) else { panic!("not placed") };
        let job = job_spec(&dl_options(&r.env).unwrap().unwrap(), &e).unwrap();
        let expect = e.rank_cells(&job, &offers(&c, &cfg, false), cfg.max_gpus)[0].clone();
        assert_eq!(p.estimate, expect);
        assert!(!p.pinned);
        let w = p.rewrite.unwrap();
        assert_eq!(w.features, format!("ib&{}", expect.cell.gpu_type));
        assert_eq!(w.tres_per_node, format!("{}gpu:{}", slurm_sys::compat::TRES_GRES_PREFIX, expect.gpus_per_node));
        assert_eq!(w.nodes, expect.nodes);

        // That type fully busy: a different, free type is chosen.
        let busy: Vec<(&str, u32)> = c.iter().filter(|n| n.gpu_type == expect.cell.gpu_type).map(|n| (n.node.as_str(), n.total)).collect();
        let c2 = cluster(&busy);
        let Outcome::Place(p2) = place(&r, &c2, &cfg, &e) else { panic!("not placed") };
        assert_ne!(p2.estimate.cell.gpu_type, expect.cell.gpu_type);

        // Allowed types restrict the choice; max_gpus bounds the count.
        let only = PlacementConfig { allowed_gpu_types: vec!["v100".into()], max_gpus: 4, ..Default::default() };
        if let Outcome::Place(p3) = place(&r, &c, &only, &e) {
            assert_eq!(p3.estimate.cell.gpu_type, "v100");
            assert!(p3.estimate.cell.gpus <= 4);
        }
    }

    #[test]
    fn pins_are_respected() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        let m = model();
        let env = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_CELL=v100x8".into()];
        let Outcome::Place(p) = place(&SubmitRequest { env: env.clone(), ..Default::default() }, &c, &cfg, &e) else {
            panic!("not placed")
        };
        assert!(p.pinned);
        assert_eq!(p.decision.cell, "v100x8".parse().unwrap());
        assert_eq!(p.rewrite.unwrap().tres_per_node, format!("{}gpu:8", slurm_sys::compat::TRES_GRES_PREFIX));

        // Typed --gres: decision recorded, request untouched.
        let env2 = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=32".into()];
        let r2 = SubmitRequest { env: env2, tres_per_node: Some("gres:gpu:a100:4".into()), ..Default::default() };
        let Outcome::Place(p2) = place(&r2, &c, &cfg, &e) else { panic!("not placed") };
        assert!(p2.pinned && p2.rewrite.is_none());
        assert_eq!(p2.decision.cell.gpu_type, "a100");

        // Conflicting pins are rejected with a message naming both.
        let r3 = SubmitRequest { tres_per_node: Some("gres:gpu:a100:4".into()), env, ..Default::default() };
        match place(&r3, &c, &cfg, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("v100x8") && msg.contains("a100"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn admin_comment_carries_report_tags() {
        let m = model();
        let canonical = ModelCatalog::builtin().resolve(&m).unwrap().name;
        let with_iters = [format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=32".into(), "SPANK_CELLSCHED_DL_ITERS=500".into()];
        let Outcome::Place(p) = place(&req(&with_iters.iter().map(String::as_str).collect::<Vec<_>>()), &cluster(&[]), &PlacementConfig::default(), &est())
        else {
            panic!("not placed")
        };
        let text = p.admin_comment();
        assert_eq!(text, format!("{} model={canonical} batch=32 iters=500", p.decision.to_admin_comment()));
        // The decision still parses, unchanged, with the tags after it.
        assert_eq!(Decision::parse_admin_comment(&text), Decision::parse_admin_comment(&p.decision.to_admin_comment()));
        assert!(Decision::parse_admin_comment(&text).is_some());
        // No declared iterations: no iters tag.
        let no_iters = [format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=8".into()];
        let Outcome::Place(q) = place(&req(&no_iters.iter().map(String::as_str).collect::<Vec<_>>()), &cluster(&[]), &PlacementConfig::default(), &est())
        else {
            panic!("not placed")
        };
        assert!(q.admin_comment().ends_with(&format!(" model={canonical} batch=8")), "{}", q.admin_comment());
        assert_eq!(with_tags("x", ""), "x");
    }

    #[test]
    fn disabled_placement_is_stock_for_auto_jobs() {
        let cfg = PlacementConfig { enabled: false, ..Default::default() };
        let env = [format!("CELLSCHED_DL_MODEL={}", model()), "CELLSCHED_DL_BATCH=32".into()];
        let r = SubmitRequest { env: env.to_vec(), ..Default::default() };
        assert!(matches!(place(&r, &cluster(&[]), &cfg, &est()), Outcome::Stock(_)));
    }
}

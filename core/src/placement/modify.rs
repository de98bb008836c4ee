//! Edits of a DL job after placement (`scontrol update`): the rule
//! job_submit/cellsched's `job_modify` applies, so an edit cannot make a
//! job run on GPUs its decision was not made for.
//!
//! Input: the job's record (its AdminComment), what it has now, and the
//! typed edit. Output ([`ModifyVerdict`]):
//! - **Accept**: the edit does not touch the job's Cell (or keeps it as it
//!   is), and any new time limit is at most the declared-work limit.
//! - **Replan**: the edit names another GPU type (a node feature, or a
//!   typed `TresPerNode`), GPU count per node or node count, all of one
//!   Cell: the job is re-planned on that Cell by the estimator, as at
//!   submit, its request rewritten to a node feature plus an untyped GPU
//!   count, its record (decision, `gpus=`, `limit_min=`, `moved_at=`)
//!   and time limit updated.
//! - **Refuse**: the edit cannot be honoured (a partition change, a
//!   `--gpus`/`--gpus-per-task` edit, a running job's shape, a Cell no
//!   node has or the model cannot run on, a job whose `--dl-cell`/`--dl-plan`
//!   pins its Cell, a time limit above the declared-work limit); the
//!   message names the field.
//!
//! Time limits: lowering is always accepted; raising past the limit
//! cellsched set from the declared work (`limit_min=`) is refused (more
//! work is declared by resubmitting with a larger `--dl-iters`). Admins
//! (root, SlurmUser, operators) are not judged; the host logs their edits.
use super::{gpus_per_node_of, request, NodeGpus, Rewrite};
use crate::declared::DeclaredConfig;
use crate::estimator::{Estimate, Estimator};
use crate::options::{CellChoice, PlanChoice};
use crate::record::DlRecord;
use crate::Cell;
use std::fmt;

/// The job field an edit touches (named in refusals; the host maps it to Slurm's error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditField {
    /// `Features=` (node features).
    Features,
    /// `TresPerNode=`/`Gres=`, or `--gpus`-style TRES.
    Gres,
    /// `NumNodes=`.
    NodeCount,
    /// `Partition=`.
    Partition,
    /// `TimeLimit=`.
    TimeLimit,
}

impl fmt::Display for EditField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EditField::Features => "Features",
            EditField::Gres => "TresPerNode/Gres",
            EditField::NodeCount => "NumNodes",
            EditField::Partition => "Partition",
            EditField::TimeLimit => "TimeLimit",
        })
    }
}

/// What an update asks to change; `None`: the field is not in the update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobEdit {
    /// New feature expression.
    pub features: Option<String>,
    /// New `tres_per_node` (e.g. `gres:gpu:8`, `gres/gpu:v100:8`).
    pub tres_per_node: Option<String>,
    /// A new `tres_per_job`/`tres_per_socket`/`tres_per_task` that names GPUs.
    pub other_gpu_tres: Option<String>,
    /// New minimum node count.
    pub min_nodes: Option<u32>,
    /// New maximum node count.
    pub max_nodes: Option<u32>,
    /// New partition.
    pub partition: Option<String>,
    /// New time limit in minutes (`u32::MAX`: unlimited).
    pub time_limit_min: Option<u32>,
}

impl JobEdit {
    /// True when the update touches none of the fields judged here.
    pub fn is_empty(&self) -> bool {
        *self == JobEdit::default()
    }

    fn touches_shape(&self) -> bool {
        self.features.is_some() || self.tres_per_node.is_some() || self.min_nodes.is_some() || self.max_nodes.is_some()
    }
}

impl fmt::Display for JobEdit {
    /// The edit as `scontrol update` words (`Features=v100 TimeLimit=60`), for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words: Vec<String> = Vec::new();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                words.push(format!("{k}={v}"));
            }
        };
        put("Features", self.features.clone());
        put("TresPerNode", self.tres_per_node.clone());
        put("TresPerJob/Socket/Task", self.other_gpu_tres.clone());
        put("MinNodes", self.min_nodes.map(|n| n.to_string()));
        put("MaxNodes", self.max_nodes.map(|n| n.to_string()));
        put("Partition", self.partition.clone());
        put("TimeLimit", self.time_limit_min.map(|t| if t == u32::MAX { "UNLIMITED".into() } else { t.to_string() }));
        f.write_str(&words.join(" "))
    }
}

/// The job as it is before the edit.
#[derive(Debug, Clone, Copy)]
pub struct JobNow<'a> {
    /// Its record.
    pub record: &'a DlRecord,
    /// Its `spank_job_env` entries (the DL options and a model file's description).
    pub env: &'a [String],
    /// Its feature expression.
    pub features: Option<&'a str>,
    /// Its partition(s).
    pub partition: Option<&'a str>,
    /// True while pending.
    pub pending: bool,
}

/// The job re-planned on the Cell an edit names.
#[derive(Debug, Clone, PartialEq)]
pub struct Replanned {
    /// The new record (written to AdminComment; its decision to `CELLSCHED_DECISION`).
    pub record: DlRecord,
    /// The request to write instead of the user's edit.
    pub rewrite: Rewrite,
    /// The time limit to set (minutes), when the declared work or the edit sets one.
    pub time_limit_min: Option<u32>,
    /// The estimate behind the new decision.
    pub estimate: Estimate,
}

/// What happens to an edit of a placed DL job.
#[derive(Debug, Clone, PartialEq)]
pub enum ModifyVerdict {
    /// Let the edit through as is.
    Accept,
    /// Apply the re-planned request and record instead of the edit's fields.
    Replan(Box<Replanned>),
    /// Refuse the update with this message (naming `field`).
    Refuse {
        /// The field that cannot be changed so.
        field: EditField,
        /// The message for the user and the log.
        message: String,
    },
}

fn refuse(field: EditField, msg: impl Into<String>) -> ModifyVerdict {
    ModifyVerdict::Refuse { field, message: format!("cellsched: {field}: {}", msg.into()) }
}

/// What the host needs besides the job: the nodes' GPUs, the estimator
/// (`None`: no valid configuration, so no re-plan), the declared-work
/// rules, the release's TRES GRES prefix and the current time.
#[derive(Clone, Copy)]
pub struct ModifyContext<'a> {
    /// GPUs per node of the cluster.
    pub nodes: &'a [NodeGpus],
    /// The estimator in force.
    pub est: Option<&'a Estimator>,
    /// `[declared]`: how declared work bounds the time limit.
    pub declared: &'a DeclaredConfig,
    /// `gres:` (22.05) or `gres/` (23.02+).
    pub gres_prefix: &'a str,
    /// Unix seconds (the record's `moved_at`).
    pub now: i64,
}

/// How a pending DL job's request and its record are brought back together
/// when they disagree ([`reconcile`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Reconcile {
    /// The record is re-planned on the Cell the request names.
    Record(Box<Replanned>),
    /// The request names no Cell the job can run on: it is written back to
    /// the record's Cell.
    Request(Rewrite),
}

/// The job's current request against its record. Slurm calls `job_modify`
/// before it validates the rest of an update, so a refused update (an
/// invalid license, dependency or feature word beside a re-planned edit)
/// can leave the record re-planned while the request is not, or the request
/// half changed. Re-planning's pass calls this for a pending, automatically
/// placed job whose request or record changed: `None` when the request's
/// GPU type (its features' one type, or for an array with a type set one of
/// them), GPUs per node and node count are the record's; else the record
/// re-planned on the request's Cell by the rule users' edits follow
/// ([`judge_edit`]), or, when that Cell is refused, the request written back.
pub fn reconcile(job: &JobNow<'_>, tres_per_node: Option<&str>, nodes_now: u32, ctx: &ModifyContext<'_>) -> Option<Reconcile> {
    let r = job.record;
    let d = &r.decision;
    let named = job.features.map(|f| named_types(f, ctx.nodes)).unwrap_or_default();
    let type_ok = match named.as_slice() {
        [one] => one.eq_ignore_ascii_case(&d.cell.gpu_type),
        many => r.types.len() > 1 && !many.is_empty() && many.iter().all(|t| r.allows_type(t)),
    };
    let per_node = crate::slurm_text::gpu_request(tres_per_node).filter(|g| g.gpu_type.is_none()).and_then(|g| u32::try_from(g.count).ok());
    let want_per_node = d.cell.gpus / d.nodes.max(1);
    if type_ok && per_node == Some(want_per_node) && nodes_now == d.nodes {
        return None;
    }
    let back = || {
        // The user's own words without the GPU type; an expression that still names one is dropped.
        let user = named
            .first()
            .map_or_else(|| job.features.map(str::to_string), |t| request::without_type_feature(job.features, t))
            .filter(|u| named_types(u, ctx.nodes).is_empty());
        let features = if r.types.len() > 1 {
            request::with_type_set_feature(user.as_deref(), &r.types).unwrap_or_else(|| request::with_type_feature(user.as_deref(), &d.cell.gpu_type))
        } else {
            request::with_type_feature(user.as_deref(), &d.cell.gpu_type)
        };
        Reconcile::Request(Rewrite { features, tres_per_node: crate::slurm_text::with_untyped_gpus(None, want_per_node, ctx.gres_prefix), nodes: d.nodes })
    };
    if named.len() != 1 || per_node.is_none() {
        return Some(back());
    }
    let edit = JobEdit {
        features: job.features.map(str::to_string),
        tres_per_node: tres_per_node.map(str::to_string),
        min_nodes: Some(nodes_now),
        max_nodes: Some(nodes_now),
        ..JobEdit::default()
    };
    match judge_edit(job, &edit, ctx) {
        ModifyVerdict::Replan(x) => Some(Reconcile::Record(x)),
        ModifyVerdict::Refuse { .. } | ModifyVerdict::Accept => Some(back()),
    }
}

/// The GPU types of the cluster that `features` names as words.
pub(super) fn named_types<'n>(features: &str, nodes: &'n [NodeGpus]) -> Vec<&'n str> {
    let words: Vec<&str> = features.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).filter(|w| !w.is_empty()).collect();
    let mut t: Vec<&str> = nodes.iter().map(|n| n.gpu_type.as_str()).filter(|t| words.iter().any(|w| w.eq_ignore_ascii_case(t))).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// Judges `edit` of the job `job` (see the module doc). Admins are not
/// judged: the host skips this for them.
pub fn judge_edit(job: &JobNow<'_>, edit: &JobEdit, ctx: &ModifyContext<'_>) -> ModifyVerdict {
    let r = job.record;
    if let Some(p) = edit.partition.as_deref().filter(|p| Some(*p) != job.partition) {
        return refuse(
            EditField::Partition,
            format!("a DL job cannot move to partition '{p}' after placement (its Cell was chosen for the GPUs it may use); cancel it and resubmit with -p {p}"),
        );
    }
    if let Some(t) = &edit.other_gpu_tres {
        return refuse(EditField::Gres, format!("'{t}': a DL job's GPUs can only be changed per node (TresPerNode=gres:gpu:N, with Features=TYPE for the GPU type)"));
    }
    let replanned = if edit.touches_shape() {
        match replan_shape(job, edit, ctx) {
            Ok(x) => x,
            Err(v) => return v,
        }
    } else {
        None
    };
    // The declared-work limit after the edit: the re-planned one, else the record's.
    let bound = replanned.as_ref().map_or(r.limit_min, |x| x.record.limit_min);
    if let (Some(t), Some(b)) = (edit.time_limit_min, bound) {
        if t > b {
            let shown = if t == u32::MAX { "UNLIMITED".to_string() } else { format!("{t} minutes") };
            return refuse(
                EditField::TimeLimit,
                format!(
                    "{shown} is above {b} minutes, the limit cellsched set from the declared work ({} iterations at {:.4} s each, predicted); a time limit may be lowered, not raised past it; resubmit with a larger --dl-iters to declare more work",
                    r.iters.unwrap_or(0),
                    replanned.as_ref().map_or(r.decision.iter_s, |x| x.record.decision.iter_s)
                ),
            );
        }
    }
    match replanned {
        Some(mut x) => {
            if let Some(t) = edit.time_limit_min {
                x.time_limit_min = Some(x.time_limit_min.map_or(t, |l| l.min(t)));
            }
            ModifyVerdict::Replan(Box::new(x))
        }
        None => ModifyVerdict::Accept,
    }
}

/// The re-planned job for an edit of its features, GPUs or node count;
/// `Ok(None)` when the edit keeps the Cell and its type feature.
fn replan_shape(job: &JobNow<'_>, edit: &JobEdit, ctx: &ModifyContext<'_>) -> Result<Option<Replanned>, ModifyVerdict> {
    let r = job.record;
    let d = &r.decision;
    let field = if edit.features.is_some() {
        EditField::Features
    } else if edit.tres_per_node.is_some() {
        EditField::Gres
    } else {
        EditField::NodeCount
    };
    if !job.pending {
        return Err(refuse(field, format!("a running DL job keeps its Cell {} (its plan was made for those GPUs)", d.cell)));
    }
    // The GPU type: a typed TresPerNode, else the one GPU type the new features name, else the current one.
    let gres = match edit.tres_per_node.as_deref() {
        Some(t) => match crate::slurm_text::gpu_request(Some(t)) {
            Some(g) => Some(g),
            None => return Err(refuse(EditField::Gres, format!("'{t}' asks for no GPUs; a DL job keeps a GPU request (TresPerNode=gres:gpu:N)"))),
        },
        None => None,
    };
    let feature_type = match edit.features.as_deref() {
        Some(f) => match named_types(f, ctx.nodes).as_slice() {
            [] => None,
            [one] => Some(one.to_string()),
            many => {
                return Err(refuse(
                    EditField::Features,
                    format!("'{f}' names several GPU types ({}); a DL job runs on one: name one of them", many.join(", ")),
                ))
            }
        },
        None => None,
    };
    let gpu_type = match (gres.as_ref().and_then(|g| g.gpu_type.clone()), feature_type) {
        (Some(a), Some(b)) if !a.eq_ignore_ascii_case(&b) => {
            return Err(refuse(EditField::Gres, format!("GPU type '{a}' conflicts with the GPU type '{b}' in Features; give one of them")))
        }
        (Some(a), _) => a.to_ascii_lowercase(),
        (None, Some(b)) => b,
        (None, None) => d.cell.gpu_type.clone(),
    };
    let nodes_now = d.nodes.max(1);
    let per_node = match &gres {
        Some(g) => match u32::try_from(g.count) {
            Ok(n) if n > 0 => n,
            _ => return Err(refuse(EditField::Gres, format!("{} GPUs per node is not a GPU count a Cell can have", g.count))),
        },
        None => d.cell.gpus / nodes_now,
    };
    let nodes = match (edit.min_nodes, edit.max_nodes) {
        // A range would let Slurm grow the job later (e.g. an edit of NumTasks) past its Cell's nodes.
        (Some(lo), Some(hi)) if lo != hi => {
            return Err(refuse(
                EditField::NodeCount,
                format!("{lo}-{hi} nodes: a DL job runs on exactly the nodes of its Cell ({nodes_now} now); give one node count (NumNodes=N)"),
            ))
        }
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => nodes_now,
    };
    if nodes == 0 {
        return Err(refuse(EditField::NodeCount, "0 nodes cannot hold a DL job's Cell"));
    }
    let Some(total) = per_node.checked_mul(nodes) else {
        let field = if edit.min_nodes.is_some() || edit.max_nodes.is_some() { EditField::NodeCount } else { field };
        return Err(refuse(field, format!("{per_node} GPUs per node on {nodes} nodes is not a GPU count a Cell can have")));
    };
    // The user's own features, without the GPU type the edit named (it is added back as the Cell's).
    let user_features = match edit.features.as_deref() {
        Some(f) => request::without_type_feature(Some(f), &gpu_type),
        None => request::without_type_feature(job.features, &d.cell.gpu_type),
    };
    let features = request::with_type_feature(user_features.as_deref(), &gpu_type);
    if gpu_type == d.cell.gpu_type && total == d.cell.gpus && nodes == nodes_now {
        // The same Cell: only the feature expression may need the type back.
        // The feature expression names one type now: an array's type set is gone.
        return Ok((edit.features.is_some() && edit.features.as_deref() != Some(features.as_str())).then(|| Replanned {
            record: DlRecord { types: Vec::new(), slowest_iter_s: None, ..r.clone() },
            rewrite: Rewrite { features, tres_per_node: crate::slurm_text::with_untyped_gpus(None, per_node, ctx.gres_prefix), nodes },
            time_limit_min: None,
            estimate: Estimate {
                cell: d.cell.clone(),
                nodes,
                gpus_per_node: per_node,
                plan: d.plan,
                iter_time_s: d.iter_s,
                mem_per_gpu_bytes: 0,
                source: d.source,
            },
        }));
    }
    let Some(node_size) = gpus_per_node_of(ctx.nodes, &gpu_type) else {
        return Err(refuse(field, format!("no node of this cluster has GPU type '{gpu_type}' (GPU types here: {})", super::cluster_types(ctx.nodes))));
    };
    if per_node > node_size {
        return Err(refuse(EditField::Gres, format!("{per_node} GPUs per node: the {gpu_type} nodes have {node_size}")));
    }
    let opts = match super::dl_options(job.env) {
        Ok(Some(o)) => o,
        _ => return Err(refuse(field, "the job's DL options no longer read; cancel it and resubmit")),
    };
    if let CellChoice::Pinned(c) = &opts.cell {
        return Err(refuse(field, format!("the job pins its Cell with --dl-cell={c}; cancel it and resubmit with another --dl-cell")));
    }
    if let PlanChoice::Pinned(p) = &opts.plan {
        return Err(refuse(field, format!("the job pins its plan with --dl-plan={p}; cancel it and resubmit with another --dl-plan")));
    }
    let Some(est) = ctx.est else {
        return Err(refuse(field, "cellsched cannot re-plan the job now (no valid cellsched.toml); try again later or cancel and resubmit"));
    };
    let spec = super::job_spec(&opts, est, job.env).map_err(|_| refuse(field, "the job's model no longer reads; cancel it and resubmit"))?;
    // One stage, and the current stage count when it divides the new GPUs: the faster plan wins.
    let mut stages = vec![1];
    if d.cell.stages > 1 && total % d.cell.stages == 0 {
        stages.push(d.cell.stages);
    }
    let mut best: Option<Estimate> = None;
    let mut why = String::new();
    for s in stages {
        let cell = match Cell::new(&gpu_type, total, s) {
            Ok(c) => c,
            Err(e) => return Err(refuse(field, e.to_string())),
        };
        match est.estimate(&spec, &cell, node_size) {
            Ok(e) if best.as_ref().map_or(true, |b| e.iter_time_s < b.iter_time_s) => best = Some(e),
            Ok(_) => {}
            Err(e) => why = e.to_string(),
        }
    }
    let Some(e) = best else {
        return Err(refuse(field, format!("{gpu_type}x{total} cannot run {} with global batch {}: {why}", spec.model.name, spec.global_batch)));
    };
    if e.nodes != nodes {
        return Err(refuse(
            EditField::NodeCount,
            format!("{total} {gpu_type} GPUs are placed on {} node(s) of {node_size} GPUs, not {nodes}; ask for NumNodes={} with {} GPUs per node", e.nodes, e.nodes, e.gpus_per_node),
        ));
    }
    let limit_min = r.limit_min.and(r.iters).and_then(|n| crate::declared::time_bound_min(n, e.iter_time_s, ctx.declared));
    let record = DlRecord {
        decision: e.to_decision(),
        fixed_gpus: Some(total),
        limit_min: limit_min.or(r.limit_min.filter(|_| r.iters.is_none())),
        plan_iter_s: Some(e.iter_time_s),
        replanned_from: Some(d.cell.clone()),
        moved_at: Some(ctx.now),
        // One Cell: an array's type set is gone.
        types: Vec::new(),
        slowest_iter_s: None,
        ..r.clone()
    };
    Ok(Some(Replanned {
        rewrite: Rewrite { features, tres_per_node: crate::slurm_text::with_untyped_gpus(None, e.gpus_per_node, ctx.gres_prefix), nodes: e.nodes },
        time_limit_min: limit_min,
        record,
        estimate: e,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;
    use crate::placement::node_gpus;

    fn est() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn cluster() -> Vec<NodeGpus> {
        [("a100-1", "a100", 4), ("v100-1", "v100", 8)]
            .iter()
            .flat_map(|(n, t, c)| node_gpus(n, Some(&format!("gpu:{t}:{c}")), Some(&format!("gpu:{t}:0")), true))
            .collect()
    }

    fn env() -> Vec<String> {
        vec!["CELLSCHED_DL_MODEL=gpt2".into(), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_ITERS=1000".into()]
    }

    /// A gpt2 job placed on a100x1 with a declared-work limit, as job_submit writes it.
    fn placed(est: &Estimator) -> DlRecord {
        let spec = crate::estimator::JobSpec { model: est.model_catalog().resolve("gpt2").unwrap(), global_batch: 32 };
        let e = est.estimate(&spec, &Cell::new("a100", 1, 1).unwrap(), 4).unwrap();
        let limit = crate::declared::time_bound_min(1000, e.iter_time_s, &DeclaredConfig::default());
        DlRecord { model: Some("gpt2".into()), batch: Some(32), iters: Some(1000), limit_min: limit, ..DlRecord::new(e.to_decision()) }
    }

    fn judge(r: &DlRecord, env: &[String], edit: &JobEdit, pending: bool, est: Option<&Estimator>) -> ModifyVerdict {
        let nodes = cluster();
        let declared = DeclaredConfig::default();
        let job = JobNow { record: r, env, features: Some("a100"), partition: Some("gpu"), pending };
        judge_edit(&job, edit, &ModifyContext { nodes: &nodes, est, declared: &declared, gres_prefix: "gres:", now: 1_800_000_000 })
    }

    fn refused_field(v: &ModifyVerdict) -> Option<EditField> {
        match v {
            ModifyVerdict::Refuse { field, .. } => Some(*field),
            _ => None,
        }
    }

    #[test]
    fn an_edit_to_eight_v100s_is_replanned_on_them() {
        let est = est();
        let r = placed(&est);
        let edit = JobEdit { features: Some("v100".into()), tres_per_node: Some("gres:gpu:8".into()), ..JobEdit::default() };
        let ModifyVerdict::Replan(x) = judge(&r, &env(), &edit, true, Some(&est)) else { panic!("not re-planned") };
        assert_eq!(x.record.decision.cell, Cell::new("v100", 8, x.record.decision.cell.stages).unwrap());
        assert_eq!(x.record.decision.plan.gpus(), 8, "the plan uses the 8 GPUs granted");
        assert_eq!(x.rewrite, Rewrite { features: "v100".into(), tres_per_node: "gres:gpu:8".into(), nodes: 1 });
        assert_eq!((x.record.fixed_gpus, x.record.replanned_from.clone(), x.record.moved_at), (Some(8), Some(r.decision.cell.clone()), Some(1_800_000_000)));
        assert_ne!(x.record.decision.iter_s, r.decision.iter_s, "the iteration time is the new Cell's");
        // The declared work bounds the limit on the new Cell.
        let want = crate::declared::time_bound_min(1000, x.record.decision.iter_s, &DeclaredConfig::default());
        assert_eq!((x.time_limit_min, x.record.limit_min), (want, want));
        // The record reads back as written.
        let back = DlRecord::parse(&x.record.to_string()).expect("reads back");
        assert_eq!((back.decision.cell, back.decision.plan, back.fixed_gpus), (x.record.decision.cell.clone(), x.record.decision.plan, Some(8)));
    }

    /// Probe round 3: an edit of an array with a type set names one Cell
    /// (or one type in its features): the set and its slowest time are dropped.
    #[test]
    fn an_edit_of_an_array_with_a_type_set_drops_the_set() {
        let est = est();
        let r = DlRecord { types: vec!["a100".into(), "v100".into()], slowest_iter_s: Some(9.0), ..placed(&est) };
        let nodes = cluster();
        let declared = DeclaredConfig::default();
        let ctx = ModifyContext { nodes: &nodes, est: Some(&est), declared: &declared, gres_prefix: "gres:", now: 1_800_000_000 };
        let e = env();
        let job = JobNow { record: &r, env: &e, features: Some("[a100|v100]"), partition: Some("gpu"), pending: true };
        for edit in [
            JobEdit { tres_per_node: Some("gres:gpu:4".into()), ..JobEdit::default() },
            JobEdit { features: Some("v100".into()), tres_per_node: Some("gres:gpu:8".into()), ..JobEdit::default() },
            JobEdit { features: Some("ib".into()), ..JobEdit::default() },
        ] {
            let ModifyVerdict::Replan(x) = judge_edit(&job, &edit, &ctx) else { panic!("{edit:?}: not re-planned") };
            assert!(x.record.types.is_empty() && x.record.slowest_iter_s.is_none(), "{edit:?}: {}", x.record);
            assert!(!x.rewrite.features.contains('['), "{edit:?}: {}", x.rewrite.features);
        }
    }

    /// Probe round 3: an update refused by Slurm after job_modify re-planned
    /// it leaves record and request apart; re-planning's pass brings them
    /// back together: the record follows a request that names a Cell, a
    /// request that names none is written back to the record's Cell.
    #[test]
    fn a_request_and_record_apart_are_reconciled() {
        let est = est();
        let r = placed(&est); // a100x1 on 1 node
        let nodes = cluster();
        let declared = DeclaredConfig::default();
        let ctx = ModifyContext { nodes: &nodes, est: Some(&est), declared: &declared, gres_prefix: "gres:", now: 1_800_000_000 };
        let e = env();
        let now = |features: &'static str| JobNow { record: &r, env: &e, features: Some(features), partition: Some("gpu"), pending: true };
        // In agreement: nothing to do.
        assert_eq!(reconcile(&now("a100"), Some("gres:gpu:1"), 1, &ctx), None);
        assert_eq!(reconcile(&now("ib&a100"), Some("gres:gpu:1"), 1, &ctx), None);
        // The request names v100x8 (the record stayed a100x1): the record follows it.
        let Some(Reconcile::Record(x)) = reconcile(&now("v100"), Some("gres:gpu:8"), 1, &ctx) else { panic!("not re-planned") };
        assert_eq!((x.record.decision.cell.gpu_type.as_str(), x.record.decision.cell.gpus), ("v100", 8));
        // Requests that name no Cell the job may have: written back to the record's.
        for (f, g, n) in [("a100|v100", "gres:gpu:1", 1), ("a100", "gres:gpu:16", 1), ("a100", "gres:gpu:a100:2", 1), ("a100", "gres:gpu:1", 2)] {
            let got = reconcile(&now(f), Some(g), n, &ctx);
            assert_eq!(got, Some(Reconcile::Request(Rewrite { features: "a100".into(), tres_per_node: "gres:gpu:1".into(), nodes: 1 })), "{f} {g} x{n}");
        }
        // An array with a type set: any of its types agrees; the set is written back.
        let set = DlRecord { types: vec!["a100".into(), "v100".into()], ..r.clone() };
        let arr = |features: &'static str| JobNow { record: &set, env: &e, features: Some(features), partition: Some("gpu"), pending: true };
        assert_eq!(reconcile(&arr("[a100|v100]"), Some("gres:gpu:1"), 1, &ctx), None);
        assert_eq!(reconcile(&arr("a100"), Some("gres:gpu:1"), 1, &ctx), None);
        let got = reconcile(&arr("[a100|v100]"), Some("gres:gpu:2"), 1, &ctx);
        let Some(Reconcile::Request(w)) = got.clone() else { panic!("{got:?}") };
        assert_eq!(w.features, "[a100|v100]");
    }

    #[test]
    fn a_typed_gres_edit_becomes_a_feature_and_an_untyped_count() {
        let est = est();
        let r = placed(&est);
        let edit = JobEdit { tres_per_node: Some("gres:gpu:v100:4".into()), ..JobEdit::default() };
        let ModifyVerdict::Replan(x) = judge(&r, &env(), &edit, true, Some(&est)) else { panic!("not re-planned") };
        assert_eq!((x.record.decision.cell.gpu_type.as_str(), x.record.decision.cell.gpus), ("v100", 4));
        assert_eq!(x.rewrite.tres_per_node, "gres:gpu:4");
        assert_eq!(x.rewrite.features, "v100");
    }

    #[test]
    fn a_node_count_edit_is_replanned_or_refused_when_no_cell_has_that_shape() {
        let est = est();
        let r = placed(&est);
        // 1 GPU per node on 2 nodes: 2 a100s fit one node, so the shape is refused.
        let v = judge(&r, &env(), &JobEdit { min_nodes: Some(2), max_nodes: Some(2), ..JobEdit::default() }, true, Some(&est));
        assert_eq!(refused_field(&v), Some(EditField::NodeCount), "{v:?}");
        // A non-GPU feature keeps the Cell and its type feature.
        let v = judge(&r, &env(), &JobEdit { features: Some("ib".into()), ..JobEdit::default() }, true, Some(&est));
        let ModifyVerdict::Replan(x) = v else { panic!("{v:?}") };
        assert_eq!((x.rewrite.features.as_str(), x.record.decision.clone()), ("ib&a100", r.decision.clone()));
        // The same Cell again: accepted as is.
        assert_eq!(judge(&r, &env(), &JobEdit { features: Some("a100".into()), ..JobEdit::default() }, true, Some(&est)), ModifyVerdict::Accept);
    }

    #[test]
    fn edits_that_cannot_be_honoured_are_refused_naming_the_field() {
        let est = est();
        let r = placed(&est);
        let cases = [
            (JobEdit { partition: Some("other".into()), ..JobEdit::default() }, true, EditField::Partition),
            (JobEdit { other_gpu_tres: Some("gres:gpu:8".into()), ..JobEdit::default() }, true, EditField::Gres),
            (JobEdit { features: Some("a10".into()), tres_per_node: Some("gres:gpu:a10:2".into()), ..JobEdit::default() }, true, EditField::Features),
            (JobEdit { features: Some("v100".into()), tres_per_node: Some("gres:gpu:a100:2".into()), ..JobEdit::default() }, true, EditField::Gres),
            (JobEdit { features: Some("a100|v100".into()), ..JobEdit::default() }, true, EditField::Features),
            (JobEdit { tres_per_node: Some("gres:gpu:16".into()), ..JobEdit::default() }, true, EditField::Gres),
            (JobEdit { tres_per_node: Some("gres:gpu:0".into()), ..JobEdit::default() }, true, EditField::Gres),
            (JobEdit { tres_per_node: Some("cpu=2".into()), ..JobEdit::default() }, true, EditField::Gres),
            (JobEdit { min_nodes: Some(u32::MAX), tres_per_node: Some("gres:gpu:4".into()), ..JobEdit::default() }, true, EditField::NodeCount),
            // Probe round 3: a node range keeping the Cell's count as its minimum (later grown by NumTasks=) is refused.
            (JobEdit { min_nodes: Some(1), max_nodes: Some(2), ..JobEdit::default() }, true, EditField::NodeCount),
            (JobEdit { min_nodes: Some(1), max_nodes: Some(4), tres_per_node: Some("gres:gpu:2".into()), ..JobEdit::default() }, true, EditField::NodeCount),
            (JobEdit { features: Some("v100".into()), ..JobEdit::default() }, false, EditField::Features),
        ];
        for (edit, pending, field) in cases {
            let v = judge(&r, &env(), &edit, pending, Some(&est));
            assert_eq!(refused_field(&v), Some(field), "{edit:?}: {v:?}");
            let ModifyVerdict::Refuse { message, .. } = v else { unreachable!() };
            assert!(message.starts_with(&format!("cellsched: {field}: ")), "{message}");
        }
        // The same partition is no change.
        assert_eq!(judge(&r, &env(), &JobEdit { partition: Some("gpu".into()), ..JobEdit::default() }, true, Some(&est)), ModifyVerdict::Accept);
        // No estimator (no valid config): a shape edit cannot be re-planned.
        let v = judge(&r, &env(), &JobEdit { features: Some("v100".into()), ..JobEdit::default() }, true, None);
        assert_eq!(refused_field(&v), Some(EditField::Features));
        // A pinned Cell or plan is not re-planned.
        for pin in ["CELLSCHED_DL_CELL=a100x1", "CELLSCHED_DL_PLAN=dp=1"] {
            let mut e = env();
            e.push(pin.into());
            let v = judge(&r, &e, &JobEdit { features: Some("v100".into()), ..JobEdit::default() }, true, Some(&est));
            assert_eq!(refused_field(&v), Some(EditField::Features), "{pin}: {v:?}");
        }
    }

    #[test]
    fn a_time_limit_may_be_lowered_but_not_raised_past_the_declared_work() {
        let est = est();
        let r = placed(&est);
        let b = r.limit_min.expect("declared work sets a limit");
        let at = |t: u32| judge(&r, &env(), &JobEdit { time_limit_min: Some(t), ..JobEdit::default() }, true, Some(&est));
        assert_eq!(at(b), ModifyVerdict::Accept);
        assert_eq!(at(1), ModifyVerdict::Accept);
        for t in [b + 1, 5 * 24 * 60, u32::MAX] {
            let v = at(t);
            assert_eq!(refused_field(&v), Some(EditField::TimeLimit), "{t}: {v:?}");
        }
        // Running jobs too.
        let v = judge(&r, &env(), &JobEdit { time_limit_min: Some(b + 1), ..JobEdit::default() }, false, Some(&est));
        assert_eq!(refused_field(&v), Some(EditField::TimeLimit));
        // Without declared work there is no cellsched limit to keep.
        let free = DlRecord { limit_min: None, iters: None, ..r.clone() };
        assert_eq!(judge(&free, &env(), &JobEdit { time_limit_min: Some(u32::MAX), ..JobEdit::default() }, true, Some(&est)), ModifyVerdict::Accept);
        // A re-plan with a time limit: bounded by the new Cell's limit, a lower one kept.
        let edit = JobEdit { features: Some("v100".into()), tres_per_node: Some("gres:gpu:8".into()), time_limit_min: Some(1), ..JobEdit::default() };
        let ModifyVerdict::Replan(x) = judge(&r, &env(), &edit, true, Some(&est)) else { panic!() };
        assert_eq!(x.time_limit_min, Some(1));
        let edit = JobEdit { time_limit_min: Some(u32::MAX), ..edit };
        assert_eq!(refused_field(&judge(&r, &env(), &edit, true, Some(&est))), Some(EditField::TimeLimit));
    }

    #[test]
    fn an_edit_prints_as_scontrol_words() {
        let e = JobEdit { features: Some("v100".into()), min_nodes: Some(2), time_limit_min: Some(u32::MAX), ..JobEdit::default() };
        assert_eq!(e.to_string(), "Features=v100 MinNodes=2 TimeLimit=UNLIMITED");
        assert_eq!(JobEdit::default().to_string(), "");
    }

    #[test]
    fn features_name_only_whole_gpu_type_words() {
        let nodes = cluster();
        assert_eq!(named_types("(ib|eth)&v100", &nodes), vec!["v100"]);
        assert_eq!(named_types("a1000", &nodes), Vec::<&str>::new());
        assert_eq!(named_types("a100&V100", &nodes), vec!["a100", "v100"]);
    }
}

//! Choosing a Cell for a submitted DL job (job_submit/cellsched's decision,
//! also called by `whatif` and the simulator's tests).
//!
//! Input: the job's `spank_job_env`, feature and GPU request strings, and a
//! snapshot of the nodes' GPUs. Output: leave the job stock, reject it with
//! a message (bad user input), or place it: a [`Decision`] plus, unless the
//! user's own typed `--gres` already says where it runs, a [`Rewrite`] to a
//! node feature and an untyped per-node GPU count.
//!
//! A DL job never runs with fewer GPUs than it asked for: an untyped
//! `--gres=gpu:N` is placed on exactly N GPUs (cellsched picks the type), a
//! pinned `--dl-cell`/`--dl-plan` is honoured or the job is refused, and when
//! cellsched cannot decide ([`fallback`]: no valid config, placement off, no
//! estimate) the user's own request is kept, a pinned Cell is written as a
//! plain request, and a DL job with no GPU request at all is refused with a
//! message that says what to add.
mod load;
mod modify;
mod replan;
mod request;
mod sizing;
mod wait;

pub use crate::slurm_text::{gpu_entries, gpu_request, with_untyped_gpus, without_gpus, GpuRequest, GRES_PREFIX_2205};
pub use load::LoadView;
pub use modify::{judge_edit, reconcile, EditField, JobEdit, JobNow, ModifyContext, ModifyVerdict, Reconcile, Replanned};
pub use replan::{in_cooldown, plan_moves, plan_moves_cached, Move, PendingDl, ReplanJob};
pub use request::{with_type_feature, with_type_set_feature, without_type_feature};
pub use sizing::{DeadlineWork, Sizable, SizingRule};
pub use wait::{corrects_wait, expected_queue_wait_s, uses_no_more_gpu_time, PlanWait};

use crate::config::PlacementConfig;
use crate::deadline::DeadlinePolicy;
use crate::declared::DeclaredConfig;
use crate::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use crate::job_env;
use crate::model::{is_model_file, model_from_wire, MODEL_SPEC_ENV_KEY};
use crate::options::{CellChoice, DlOptions, PlanChoice};
use crate::rank_cache::RankCache;
use crate::record::DlRecord;
use crate::{Cell, CoreError, Decision};
use std::collections::BTreeMap;
use std::sync::Arc;

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

/// GPUs of an available node, per type; unavailable nodes and untyped GPUs offer nothing.
pub fn node_gpus(node: &str, gres: Option<&str>, gres_used: Option<&str>, available: bool) -> Vec<NodeGpus> {
    if !available {
        return Vec::new();
    }
    let used = gpu_entries(gres_used.unwrap_or(""));
    gpu_entries(gres.unwrap_or(""))
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
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    /// The release's TRES GRES prefix for rewritten requests (`gres:` in
    /// 22.05, `gres/` from 23.02; the host passes its own).
    pub gres_prefix: &'static str,
    /// `spank_job_env` entries.
    pub env: Vec<String>,
    /// `--constraint` expression.
    pub features: Option<String>,
    /// `tres_per_node` (`--gres`, `--gpus-per-node`).
    pub tres_per_node: Option<String>,
    /// `tres_per_job` (`--gpus`).
    pub tres_per_job: Option<String>,
    /// `min_nodes` if the user set it.
    pub min_nodes: Option<u32>,
    /// The job is a component of a heterogeneous job.
    pub het_component: bool,
    /// The job is a job array (`--array`): its tasks may get a set of GPU
    /// types ([`array_type_set`]).
    pub array: bool,
    /// Submission time (Unix seconds), for `--dl-deadline`.
    pub now: i64,
    /// The submit host's local time minus UTC in seconds (`--dl-deadline`'s local times).
    pub utc_offset_s: i64,
}

impl Default for SubmitRequest {
    fn default() -> Self {
        SubmitRequest {
            gres_prefix: GRES_PREFIX_2205,
            env: Vec::new(),
            features: None,
            tres_per_node: None,
            tres_per_job: None,
            min_nodes: None,
            het_component: false,
            array: false,
            now: 0,
            utc_offset_s: 0,
        }
    }
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
    /// What is recorded in AdminComment (the record; its decision also in
    /// `CELLSCHED_DECISION`). The host adds `limit_min` when it bounds the time limit.
    pub record: DlRecord,
    /// `None` when the user's typed `--gres` is kept as is.
    pub rewrite: Option<Rewrite>,
    /// The user pinned the Cell (never re-planned).
    pub pinned: bool,
    /// With `--dl-explain`: the message shown to the user at submit
    /// ([`explanation`]: the chosen Cell and the runner-up of the same
    /// ranking, the best Cell on another GPU type or count).
    pub explanation: Option<String>,
    /// A message the user must see at submit whatever `--dl-explain` says
    /// (e.g. a deadline no Cell is predicted to meet).
    pub notice: Option<String>,
    /// Why this Cell, in a few words (also inside the explanation).
    pub why: String,
}

impl Placement {
    /// What to tell the user at submit: the notice, then the explanation.
    pub fn user_message(&self) -> Option<String> {
        match (&self.notice, &self.explanation) {
            (Some(n), Some(e)) => Some(format!("{n}\n{e}")),
            (Some(m), None) | (None, Some(m)) => Some(m.clone()),
            (None, None) => None,
        }
    }

    /// AdminComment text of the record.
    pub fn admin_comment(&self) -> String {
        self.record.to_string()
    }
}

/// The job's record at placement: `decision` plus the facts job_submit
/// knows at submit (model, global batch, declared iterations, the GPU count
/// the user fixed, the resolved deadline, the `--dl-elastic` opt-in) and,
/// for an elastic job, its model's measured start-to-first-iteration time
/// from the profile DB (`restart_s=`, [`Estimator::measured_first_iter_s`]).
pub fn dl_record(decision: Decision, job: &JobSpec, opts: &DlOptions, fixed_gpus: Option<u32>, deadline: Option<i64>, est: &Estimator) -> DlRecord {
    let restart_s = opts.elastic.and_then(|_| est.measured_first_iter_s(&job.model.name, &decision.cell.gpu_type));
    DlRecord {
        model: Some(job.model.name.clone()).filter(|m| crate::record::is_one_word(m)),
        batch: Some(u64::from(job.global_batch)),
        iters: opts.iters,
        fixed_gpus,
        deadline,
        elastic: opts.elastic,
        restart_s,
        ..DlRecord::new(decision)
    }
}

/// The time limit to give a job with `current` limit (minutes; `NO_VAL`
/// unset, `INFINITE` unlimited) that declared `iters` iterations of
/// `iter_s` seconds: `Some(bound)` when the declaration bounds it tighter.
pub fn bounded_limit(current: u32, iters: Option<u64>, iter_s: f64, cfg: &DeclaredConfig) -> Option<u32> {
    let bound = crate::declared::time_bound_min(iters?, iter_s, cfg)?;
    (current == 0 || current > bound).then_some(bound)
}

/// What to do with a submitted job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Leave the job as Slurm would; the reason is logged. Only returned
    /// when the job's own request already holds its GPUs (or it is no DL job).
    Stock(String),
    /// cellsched could not decide (reason logged): the user's pinned Cell is
    /// written as a plain request, with no decision recorded.
    Honour(String, Rewrite),
    /// Reject the submission with this message (bad user input).
    Reject(String),
    /// Place it.
    Place(Box<Placement>),
}

/// The job's validated DL options, `Ok(None)` if it has none
/// (`--dl-explain` alone does not make a DL job).
pub fn dl_options(env: &[String]) -> Result<Option<DlOptions>, CoreError> {
    if !job_env::has_dl_options(env) {
        return Ok(None);
    }
    let o = DlOptions::from_entries(env)?;
    if o.is_empty() {
        return Ok(None);
    }
    o.check_consistency()?;
    Ok(Some(o))
}

/// `1h02m`, `5m03s`, `12s`.
fn fmt_run(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The `--dl-explain` message: the chosen Cell and why, the runner-up,
/// each with its predicted seconds per iteration and, with declared
/// iterations, its predicted run time. Every number is labelled a prediction.
pub fn explanation(chosen: &Estimate, runner_up: Option<&Estimate>, iters: Option<u64>, why: &str) -> String {
    let one = |e: &Estimate| {
        let run = iters.map_or(String::new(), |n| format!(", run time {} for {n} iterations", fmt_run(n as f64 * e.iter_time_s)));
        format!("{} on {} node(s), predicted {:.4} s/iteration ({}){run}", e.cell, e.nodes, e.iter_time_s, e.source)
    };
    let mut msg = format!("cellsched: chose {} [{why}]", one(chosen));
    match runner_up {
        Some(r) => msg.push_str(&format!("; runner-up {}", one(r))),
        None => msg.push_str("; no runner-up"),
    }
    msg.push_str(". Times are the estimator's predictions; `cellsched whatif` predicts start and finish on the live queue.");
    msg
}

/// The estimator's view of the job, or the outcome that ends placement.
/// A user model file (`--dl-model=PATH.toml`) is never opened here: its
/// description comes from the job environment ([`MODEL_SPEC_ENV_KEY`],
/// written by the SPANK plugin at submit) and is validated again.
pub fn job_spec(opts: &DlOptions, est: &Estimator, env: &[String]) -> Result<JobSpec, Outcome> {
    let Some(model) = opts.model.as_deref() else {
        return Err(Outcome::Reject("cellsched: --dl-model is required with other --dl-* options".into()));
    };
    let spec = if is_model_file(model) {
        match job_env::lookup_entries(env, MODEL_SPEC_ENV_KEY) {
            Some(wire) => Some(model_from_wire(wire).map_err(|e| Outcome::Reject(format!("cellsched: --dl-model={model}: {e}")))?),
            None => {
                return Err(Outcome::Stock(format!(
                    "model file '{model}' came without its description (the SPANK plugin reads it at submit; is spank_cellsched.so in plugstack.conf on the submit host?)"
                )))
            }
        }
    } else {
        opts.check_model(|m| est.model_catalog().resolve(m)).map_err(|e| Outcome::Reject(format!("cellsched: {e}")))?
    };
    let Some(global_batch) = opts.batch else {
        return Err(Outcome::Reject(format!("cellsched: --dl-batch=N (global batch size) is required with --dl-model={model}")));
    };
    Ok(JobSpec { model: opts.trained_as(spec.expect("model is set")), global_batch })
}

fn gpus_per_node_of(nodes: &[NodeGpus], gpu_type: &str) -> Option<u32> {
    nodes.iter().filter(|n| n.gpu_type == gpu_type).map(|n| n.total).max()
}

/// The GPU types the cluster's nodes offer, sorted, for messages.
fn cluster_types(nodes: &[NodeGpus]) -> String {
    let mut t: Vec<&str> = nodes.iter().map(|n| n.gpu_type.as_str()).collect();
    t.sort_unstable();
    t.dedup();
    if t.is_empty() {
        "none".into()
    } else {
        t.join(", ")
    }
}

/// Refusal for a GPU type no node has, naming the types the cluster has.
fn missing_type(what: &str, gpu_type: &str, nodes: &[NodeGpus]) -> Outcome {
    Outcome::Reject(format!(
        "cellsched: {what}: no node of this cluster has GPU type '{gpu_type}' (GPU types here: {})",
        cluster_types(nodes)
    ))
}

/// The plain request for a pinned Cell: its type as the node feature and
/// its GPUs spread over as few nodes as hold them evenly.
fn pinned_rewrite(req: &SubmitRequest, cell: &Cell, node_size: u32) -> Result<Rewrite, Outcome> {
    let nodes = cell.gpus.div_ceil(node_size.max(1));
    if cell.gpus % nodes != 0 {
        return Err(Outcome::Reject(format!(
            "cellsched: cell {cell}: {} GPUs cannot be spread evenly over {nodes} node(s) of {node_size} {} GPUs",
            cell.gpus, cell.gpu_type
        )));
    }
    Ok(Rewrite {
        features: request::with_type_feature(req.features.as_deref(), &cell.gpu_type),
        tres_per_node: with_untyped_gpus(req.tres_per_node.as_deref(), cell.gpus / nodes, req.gres_prefix),
        nodes,
    })
}

/// What happens to a DL job when cellsched cannot decide (`why`: no valid
/// config, placement disabled, no estimate): bad options are still refused;
/// a GPU request of the user's own stays as it is; a pinned `--dl-cell`
/// becomes a plain request for that Cell; with no GPU request at all the job
/// is refused with a message saying what to add.
pub fn fallback(req: &SubmitRequest, nodes: &[NodeGpus], why: &str) -> Outcome {
    let opts = match submitted_options(req) {
        Ok(o) => o,
        Err(out) => return out,
    };
    if let CellChoice::Pinned(c) = &opts.cell {
        let Some(node_size) = gpus_per_node_of(nodes, &c.gpu_type) else {
            return missing_type(&format!("--dl-cell={c}"), &c.gpu_type, nodes);
        };
        return match pinned_rewrite(req, c, node_size) {
            Ok(w) => Outcome::Honour(format!("{why}; pinned cell {c} requested as is"), w),
            Err(out) => out,
        };
    }
    if gpu_request(req.tres_per_node.as_deref()).is_some() || gpu_request(req.tres_per_job.as_deref()).is_some() {
        return Outcome::Stock(format!("{why}; the job's own GPU request is kept"));
    }
    Outcome::Reject(format!(
        "cellsched cannot place this DL job right now ({why}) and it requests no GPUs: add --gres=gpu:TYPE:N \
         (or --gpus-per-node=N) or --dl-cell=TYPExN (GPU types here: {})",
        cluster_types(nodes)
    ))
}

/// The submitted job's validated DL options, or the outcome that ends
/// placement: stock for a job without them, a refusal for bad ones or for
/// DL options on a heterogeneous job.
fn submitted_options(req: &SubmitRequest) -> Result<DlOptions, Outcome> {
    let opts = match dl_options(&req.env) {
        Ok(None) => return Err(Outcome::Stock("no DL options".into())),
        Ok(Some(o)) => o,
        Err(e) => return Err(Outcome::Reject(format!("cellsched: {e}"))),
    };
    if req.het_component {
        return Err(Outcome::Reject(
            "cellsched: --dl-* options are not supported on heterogeneous jobs (one Cell and plan per job); \
             submit the DL part as its own job, or drop the --dl-* options"
                .into(),
        ));
    }
    Ok(opts)
}

/// Chooses the Cell of a submitted job (see the module doc).
pub fn place(req: &SubmitRequest, nodes: &[NodeGpus], cfg: &PlacementConfig, est: &Estimator) -> Outcome {
    place_cached(req, nodes, cfg, est, None)
}

/// [`place`], with Cell rankings from `ranks` (the cache of `est`) when given.
pub fn place_cached(req: &SubmitRequest, nodes: &[NodeGpus], cfg: &PlacementConfig, est: &Estimator, ranks: Option<&RankCache>) -> Outcome {
    place_under_load(req, nodes, cfg, est, ranks, None)
}

/// [`place_cached`], sizing against the load: `pending` holds the GPUs the
/// pending jobs wait for per type ([`LoadView::add_wanted`]); the free GPUs
/// come from `nodes`. A job then also grows into free GPUs nobody waits for
/// (`SizingRule::choose_under_load`). `None`: marginal value alone.
pub fn place_under_load(
    req: &SubmitRequest,
    nodes: &[NodeGpus],
    cfg: &PlacementConfig,
    est: &Estimator,
    ranks: Option<&RankCache>,
    pending: Option<&LoadView>,
) -> Outcome {
    let opts = match submitted_options(req) {
        Ok(o) => o,
        Err(out) => return out,
    };
    let job = match job_spec(&opts, est, &req.env) {
        Ok(j) => j,
        Err(Outcome::Stock(why)) => return fallback(req, nodes, &why),
        Err(out) => return out,
    };
    let dl = DlRequest { opts, job, per_node: gpu_request(req.tres_per_node.as_deref()), per_job: gpu_request(req.tres_per_job.as_deref()) };
    place_request(req, &dl, nodes, cfg, est, ranks, pending)
}

/// A DL job's request in typed form, what placement decides from: its
/// options, the estimator's view of the job and the GPUs it asked for.
/// job_submit reads it from the job descriptor's text ([`place_under_load`]);
/// `whatif` builds it directly.
#[derive(Debug, Clone)]
pub struct DlRequest {
    /// The validated `--dl-*` options.
    pub opts: DlOptions,
    /// Model and global batch.
    pub job: JobSpec,
    /// GPUs asked for per node (`--gres`, `--gpus-per-node`).
    pub per_node: Option<GpuRequest>,
    /// GPUs asked for per job (`--gpus`).
    pub per_job: Option<GpuRequest>,
}

/// Places the typed request `dl`; `req` gives the context (submission time,
/// node count, the user's features and GRES text to rewrite, the release's
/// GRES prefix). See [`place_under_load`].
pub fn place_request(
    req: &SubmitRequest,
    dl: &DlRequest,
    nodes: &[NodeGpus],
    cfg: &PlacementConfig,
    est: &Estimator,
    ranks: Option<&RankCache>,
    pending: Option<&LoadView>,
) -> Outcome {
    // A GPU type the user's own `--constraint` names is part of the request:
    // only nodes of the named types are placed on (never AND-ed with another type).
    let named: Vec<String> = req.features.as_deref().map(|f| modify::named_types(f, nodes).into_iter().map(str::to_string).collect()).unwrap_or_default();
    let of_named: Vec<NodeGpus>;
    let nodes: &[NodeGpus] = if named.is_empty() {
        nodes
    } else {
        of_named = nodes.iter().filter(|n| named.iter().any(|t| t.eq_ignore_ascii_case(&n.gpu_type))).cloned().collect();
        &of_named
    };
    let load = pending.filter(|_| cfg.load_sizing).map(|p| {
        let mut v = LoadView::from_nodes(nodes);
        v.add_wanted_of(p);
        v
    });
    let (opts, job) = (&dl.opts, &dl.job);
    let deadline = match opts.deadline.map(|d| d.resolve(req.now, req.utc_offset_s)) {
        None => None,
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => return Outcome::Reject(format!("cellsched: {e}")),
    };
    if deadline.is_some() && opts.iters.is_none() && cfg.deadline_policy == DeadlinePolicy::Strict {
        return Outcome::Reject(
            "cellsched: --dl-deadline needs --dl-iters=N here (placement.deadline_policy = strict): without the work declared no finish time can be predicted".into(),
        );
    }
    let user_gpus = dl.per_node.clone();
    let nodes_n = req.min_nodes.unwrap_or(1).max(1);
    // `--gpus=N` (per job) counts as a request for N GPUs in all.
    let job_gpus = dl.per_job.clone();
    // A typed request (per node, or per job) pins the type and the GPU count in all.
    let typed: Option<(String, u32, String)> = match (&user_gpus, &job_gpus) {
        (Some(GpuRequest { gpu_type: Some(t), count }), _) => Some((
            t.clone(),
            u32::try_from(*count).ok().and_then(|n| n.checked_mul(nodes_n)).unwrap_or(u32::MAX),
            format!("--gres=gpu:{t}:{count}"),
        )),
        (None, Some(GpuRequest { gpu_type: Some(t), count })) => {
            Some((t.clone(), u32::try_from(*count).unwrap_or(u32::MAX), format!("--gpus={t}:{count}")))
        }
        _ => None,
    };

    // Pinned by the user: a typed --gres or --dl-cell=TYPExN.
    let pinned_cell = match (&opts.cell, &typed) {
        (CellChoice::Pinned(c), Some((t, _, what))) if &c.gpu_type != t => {
            return Outcome::Reject(format!(
                "cellsched: --dl-cell={c} conflicts with the requested GPU type '{t}' in {what}; give one of them"
            ))
        }
        // The typed request is what Slurm grants: a pinned Cell of another size would be ranked and limited as a job it is not.
        (CellChoice::Pinned(c), Some((_, total, what))) if c.gpus != *total => {
            return Outcome::Reject(format!(
                "cellsched: --dl-cell={c} asks for {} GPUs but {what} requests {total} in all; give one of them",
                c.gpus
            ))
        }
        (CellChoice::Pinned(c), _) => Some((c.clone(), format!("--dl-cell={c}"))),
        (CellChoice::Auto, Some((t, total, what))) => {
            let stages = match &opts.plan {
                PlanChoice::Pinned(p) => p.pp,
                PlanChoice::Auto => 1,
            };
            match Cell::new(t, *total, stages) {
                Ok(c) => Some((c, what.clone())),
                Err(e) => return Outcome::Reject(format!("cellsched: {what}: {e}")),
            }
        }
        (CellChoice::Auto, None) => None,
    };
    let pinned_plan = match &opts.plan {
        PlanChoice::Pinned(p) => Some(*p),
        PlanChoice::Auto => None,
    };
    if let Some(p) = &pinned_plan {
        if pinned_cell.is_none() && p.gpus() > cfg.max_gpus {
            return Outcome::Reject(format!(
                "cellsched: --dl-plan={p}: dp*tp*pp = {} GPUs, the most a job may use is {} (placement.max_gpus)",
                p.gpus(),
                cfg.max_gpus
            ));
        }
    }
    if let Some((cell, what)) = pinned_cell {
        let Some(node_size) = gpus_per_node_of(nodes, &cell.gpu_type) else {
            return missing_type(&what, &cell.gpu_type, nodes);
        };
        if let Some(p) = &pinned_plan {
            if p.gpus() != cell.gpus || p.pp != cell.stages {
                return Outcome::Reject(format!(
                    "cellsched: --dl-plan={p} uses dp*tp*pp = {} GPUs in {} stage(s) but {what} gives {} GPUs in {}",
                    p.gpus(),
                    p.pp,
                    cell.gpus,
                    cell.stages
                ));
            }
        }
        let estimate = match pinned_plan {
            Some(p) => est.estimate_plan(&job, &cell, node_size, &p),
            None => est.estimate(&job, &cell, node_size),
        };
        let estimate = match estimate {
            Ok(e) => e,
            Err(e @ (CoreError::Infeasible(_) | CoreError::Invalid { .. })) => {
                return Outcome::Reject(format!("cellsched: cell {cell} cannot run {}: {e}", job.model.name))
            }
            Err(e) => {
                let why = format!("estimator error for pinned cell {cell}: {e}");
                return if typed.is_some() { Outcome::Stock(why) } else { fallback(req, nodes, &why) };
            }
        };
        if let DeadlineVerdict::Misses(msg) = deadline_verdict(&estimate, opts.iters, deadline, req.now) {
            if cfg.deadline_policy == DeadlinePolicy::Strict {
                return Outcome::Reject(format!("cellsched: {msg} (placement.deadline_policy = strict)"));
            }
        }
        let (kept, notice) = admitted_deadline(&estimate, opts.iters, deadline, req.now, cfg.deadline_policy);
        let rewrite = typed.is_none().then(|| rewrite_for(req, &estimate));
        let record = DlRecord { infeasible_deadline: deadline.filter(|_| kept.is_none()), ..dl_record(estimate.to_decision(), job, opts, None, kept, est) };
        let why = format!("pinned by {what}");
        let explanation = opts.explain.then(|| explanation(&estimate, None, opts.iters, &why));
        return Outcome::Place(Box::new(Placement { record, estimate, rewrite, pinned: true, explanation, notice, why }));
    }

    if !cfg.enabled {
        return fallback(req, nodes, "placement.enabled = false");
    }
    let free = offers(nodes, cfg, false);
    if free.iter().all(|o| est.gpu_catalog().get(&o.gpu_type).is_err()) {
        return fallback(req, nodes, "no allowed GPU type of the cluster is known to the estimator");
    }
    // An untyped --gres=gpu:N (per node, times the nodes asked for) fixes the
    // GPU count: cellsched picks only the type and shape.
    let want_gpus = match (&user_gpus, &job_gpus) {
        (Some(g), _) => Some(u32::try_from(g.count).unwrap_or(u32::MAX).saturating_mul(nodes_n)),
        (None, Some(g)) => Some(u32::try_from(g.count).unwrap_or(u32::MAX)),
        (None, None) => None,
    };
    let mut plan_err = String::new();
    // The best Cell and the runner-up (the next Cell of the same ranking on another GPU type or count).
    // With a deadline and declared work, only Cells predicted to finish in time count (`in_time`).
    let meets = |e: &Estimate| !matches!(deadline_verdict(e, opts.iters, deadline, req.now), DeadlineVerdict::Misses(_));
    let mut best = |offers: &[CellOffer], in_time: bool, load: Option<&LoadView>| -> Option<(Estimate, Option<Estimate>)> {
        match pinned_plan {
            Some(p) => best_for_plan(&job, &p, offers, est).map_err(|e| plan_err = e).ok().filter(|e| !in_time || meets(e)).map(|e| (e, None)),
            None => {
                let mut ranked = ranked_for(&job, offers, cfg, want_gpus, est, ranks);
                if in_time {
                    ranked.retain(|e| meets(e));
                }
                let first = ranked[choose_ranked_under_load(&ranked, cfg, want_gpus, load)?].clone();
                // The same rule's choice on another GPU type or count (a different stage count of the same GPUs is a plan detail).
                let others: Vec<Estimate> = ranked.into_iter().filter(|e| (&e.cell.gpu_type, e.cell.gpus) != (&first.cell.gpu_type, first.cell.gpus)).collect();
                let second = choose_ranked_under_load(&others, cfg, want_gpus, load).map(|i| others[i].clone());
                Some((first, second))
            }
        }
    };
    // Nothing fits in the free GPUs now: the best Cell of the whole cluster (re-planned later).
    // With a deadline: first the Cells predicted to meet it; when none can, the fastest Cell.
    let capacity = offers(nodes, cfg, true);
    let mut found = match best(&free, true, load.as_ref()) {
        // Slower than its Cell of the whole cluster: taken only when that is
        // predicted to finish first (re-planning's wait test, `PlanWait`). At
        // submit Slurm has no forecast of the job's start yet and the job
        // has waited nothing, so the test says wait (a forecast of "now");
        // re-planning moves it once backfill's forecast says waiting loses.
        // Deadline jobs take a free Cell in time.
        Some(b) if cfg.replan && cfg.replan_wait_test && deadline.is_none() => match best(&capacity, true, None) {
            Some(c) if b.0.iter_time_s > c.0.iter_time_s * (1.0 + 1e-9) => Some((
                c,
                "the best Cell in the GPUs free now is slower than the job's Cell of the whole cluster: it waits for that one until Slurm's forecast shows that waiting loses (placement.replan_wait_test)",
            )),
            _ => Some((b, "sized by marginal value in the GPUs free now")),
        },
        Some(b) => Some((b, "sized by marginal value in the GPUs free now")),
        None => best(&capacity, true, None).map(|b| (b, "nothing fits in the free GPUs now: best of the whole cluster, the job waits for it")),
    };
    if found.is_none() && deadline.is_some() && opts.iters.is_some() {
        // A pinned plan stays pinned: its fastest Cell, never another plan's.
        let fastest = match pinned_plan {
            Some(p) => best_for_plan(&job, &p, &capacity, est).ok(),
            None => ranked_for(&job, &capacity, cfg, want_gpus, est, ranks).into_iter().next(),
        };
        if let Some(f) = fastest {
            if let DeadlineVerdict::Misses(msg) = deadline_verdict(&f, opts.iters, deadline, req.now) {
                if cfg.deadline_policy == DeadlinePolicy::Strict {
                    return Outcome::Reject(format!("cellsched: {msg} on any Cell of this cluster (placement.deadline_policy = strict)"));
                }
            }
            found = Some(((f, None), "no Cell is predicted to meet the deadline: the fastest Cell of the whole cluster"));
        }
    }
    match found {
        Some(((estimate, runner_up), why)) => {
            let (kept, notice) = admitted_deadline(&estimate, opts.iters, deadline, req.now, cfg.deadline_policy);
            let mut record = DlRecord { infeasible_deadline: deadline.filter(|_| kept.is_none()), ..dl_record(estimate.to_decision(), job, opts, want_gpus, kept, est) };
            let mut rewrite = rewrite_for(req, &estimate);
            let mut why = why.to_string();
            // An array with no pinned plan, no deadline and no GPU type in the user's own features:
            // its tasks may start on every type that serves them about as well.
            let user_named_types = req.features.as_deref().is_some_and(|f| !modify::named_types(f, nodes).is_empty());
            if req.array && pinned_plan.is_none() && kept.is_none() && !user_named_types {
                let set = array_type_set(&job, &estimate, &capacity, cfg, est, ranks);
                if let (true, Some(features)) = (set.len() > 1, with_type_set_feature(req.features.as_deref(), &type_names(&set))) {
                    rewrite.features = features;
                    record.types = type_names(&set);
                    record.slowest_iter_s = set.iter().map(|(_, s)| *s).reduce(f64::max);
                    why = format!("{why}; array tasks may run on {} (each within placement.replan_max_slowdown of the best)", record.types.join(" or "));
                }
            }
            Outcome::Place(Box::new(Placement {
                record,
                rewrite: Some(rewrite),
                explanation: opts.explain.then(|| explanation(&estimate, runner_up.as_ref(), opts.iters, &why)),
                notice,
                estimate,
                pinned: pinned_plan.is_some(),
                why,
            }))
        }
        None if want_gpus.is_some() => Outcome::Stock(format!(
            "no Cell of exactly {} GPUs can run {} (batch {}); the job's own GPU request is kept",
            want_gpus.unwrap_or(0),
            job.model.name,
            job.global_batch
        )),
        None => match pinned_plan {
            Some(p) => Outcome::Reject(format!(
                "cellsched: --dl-plan={p} cannot run {} with global batch {} on any allowed GPU type of this cluster: {plan_err}",
                job.model.name, job.global_batch
            )),
            None => Outcome::Reject(format!(
                "cellsched: {} with global batch {} fits on no allowed GPU type with at most {} GPUs (placement.max_gpus)",
                job.model.name, job.global_batch, cfg.max_gpus
            )),
        },
    }
}

/// The deadline a placed job keeps and the notice for the user: a deadline
/// its Cell (the fastest one when none meets it) cannot meet even alone is
/// dropped and the job runs best effort ([`crate::deadline::admit`]), so an
/// infeasible deadline buys no urgency (the record keeps it as
/// `infeasible_deadline=`, which costs its user deadline urgency).
fn admitted_deadline(e: &Estimate, iters: Option<u64>, deadline: Option<i64>, now: i64, policy: DeadlinePolicy) -> (Option<i64>, Option<String>) {
    let verdict = deadline_verdict(e, iters, deadline, now);
    let (Some(d), Some(n), DeadlineVerdict::Misses(_)) = (deadline, iters, &verdict) else { return (deadline, verdict.notice()) };
    match crate::deadline::admit(d, now, Some(n as f64 * e.iter_time_s), policy) {
        crate::deadline::Admission::Kept => (deadline, verdict.notice()),
        crate::deadline::Admission::BestEffort(m) | crate::deadline::Admission::Refused(m) => (None, Some(m)),
    }
}

/// Whether a Cell's predicted run meets a job's deadline.
#[derive(Debug, Clone, PartialEq)]
pub enum DeadlineVerdict {
    /// No deadline.
    None,
    /// A deadline but no declared iterations: nothing to predict.
    Unchecked,
    /// Predicted to finish in time if it starts now.
    Meets,
    /// Predicted to finish late: the message says by how much.
    Misses(String),
}

impl DeadlineVerdict {
    /// The warning for the user, if any.
    pub fn notice(self) -> Option<String> {
        match self {
            DeadlineVerdict::Misses(m) => Some(format!("cellsched: warning: {m}; the job is placed anyway (placement.deadline_policy = warn)")),
            DeadlineVerdict::Unchecked => Some("cellsched: warning: --dl-deadline without --dl-iters cannot be checked; it is recorded and orders the job among deadline jobs".into()),
            DeadlineVerdict::None | DeadlineVerdict::Meets => None,
        }
    }
}

/// Whether `e` started `now` finishes `iters` iterations by `deadline`
/// (predicted: iterations × the estimate's seconds per iteration).
pub fn deadline_verdict(e: &Estimate, iters: Option<u64>, deadline: Option<i64>, now: i64) -> DeadlineVerdict {
    let Some(d) = deadline else { return DeadlineVerdict::None };
    let Some(n) = iters else { return DeadlineVerdict::Unchecked };
    let run = n as f64 * e.iter_time_s;
    let left = (d - now) as f64;
    if (sizing::DeadlineWork { iters: n as f64, left_s: left }).met_by(e.iter_time_s) {
        DeadlineVerdict::Meets
    } else {
        DeadlineVerdict::Misses(format!(
            "--dl-deadline is {} away but {n} iterations on {} are predicted to take {} (estimator prediction, if it started now)",
            fmt_run(left),
            e.cell,
            fmt_run(run)
        ))
    }
}

/// The feasible Cells of `job` in `offers`, fastest first: of exactly
/// `want_gpus` GPUs when the user fixed the count, else of at most the
/// sizing cap over the fewest GPUs the job fits on.
/// `ranks` (a cache of `est`'s rankings) answers when given.
pub fn ranked_for(job: &JobSpec, offers: &[CellOffer], cfg: &PlacementConfig, want_gpus: Option<u32>, est: &Estimator, ranks: Option<&RankCache>) -> Vec<Estimate> {
    let mut ranked = Vec::clone(&rank_cells(est, ranks, job, offers, cfg.max_gpus.max(want_gpus.unwrap_or(0))));
    if let Some(n) = want_gpus {
        ranked.retain(|e| e.cell.gpus == n);
    }
    ranked
}

/// `est.rank_cells(..)`, answered by `ranks` (the cache of `est`) when given.
pub fn rank_cells(est: &Estimator, ranks: Option<&RankCache>, job: &JobSpec, offers: &[CellOffer], max_gpus: u32) -> Arc<Vec<Estimate>> {
    match ranks {
        Some(c) => c.rank_cells(est, job, offers, max_gpus),
        None => Arc::new(est.rank_cells(job, offers, max_gpus)),
    }
}

/// The index of the Cell a job gets among `ranked` ([`ranked_for`]): the
/// fastest when the user fixed the GPU count, else the marginal-value
/// choice of [`sizing`].
pub fn choose_ranked(ranked: &[Estimate], cfg: &PlacementConfig, want_gpus: Option<u32>) -> Option<usize> {
    choose_ranked_under_load(ranked, cfg, want_gpus, None)
}

/// [`choose_ranked`] against a load view of the free GPUs
/// (`SizingRule::choose_under_load`; the job's own demand not in it).
pub fn choose_ranked_under_load(ranked: &[Estimate], cfg: &PlacementConfig, want_gpus: Option<u32>, load: Option<&LoadView>) -> Option<usize> {
    match want_gpus {
        Some(_) => (!ranked.is_empty()).then_some(0),
        None => sizing::SizingRule::from_config(cfg).choose_under_load(ranked, None, load),
    }
}

/// The fastest Cell that runs exactly the pinned plan `p` (dp*tp*pp GPUs in
/// pp stages) on one of `offers`, whose nodes must hold it; otherwise why
/// not (the estimator's reason for the last type tried).
fn best_for_plan(job: &JobSpec, p: &crate::Plan, offers: &[CellOffer], est: &Estimator) -> Result<Estimate, String> {
    let mut best: Option<Estimate> = None;
    let mut why = format!("no node group can hold {} GPUs", p.gpus());
    for o in offers {
        let Ok(cell) = Cell::new(&o.gpu_type, p.gpus(), p.pp) else { continue };
        let size = o.gpus_per_node.max(1);
        let nodes = cell.gpus.div_ceil(size);
        let per_node = cell.gpus / nodes;
        if cell.gpus % nodes != 0 || (o.free_gpus_per_node.iter().filter(|f| **f >= per_node).count() as u32) < nodes {
            continue;
        }
        match est.estimate_plan(job, &cell, size, p) {
            Ok(e) => {
                if best.as_ref().map_or(true, |b| e.iter_time_s < b.iter_time_s) {
                    best = Some(e);
                }
            }
            Err(e) => why = e.to_string(),
        }
    }
    best.ok_or(why)
}

/// The GPU types a job array placed on `chosen` may run its tasks on, with
/// each type's predicted seconds per iteration, `chosen`'s type first: the
/// allowed types whose nodes can hold the same shape (`chosen.nodes` nodes
/// of `chosen.gpus_per_node` GPUs, the untyped request every task shares)
/// and whose best Cell of that shape is at most `placement.replan_max_slowdown`
/// times slower per iteration than the best of them (the bound re-planning
/// moves a job by). Each task's plan is made on its node for the GPUs it
/// was granted (the SPANK plugin), so the set only widens where tasks start.
pub fn array_type_set(job: &JobSpec, chosen: &Estimate, capacity: &[CellOffer], cfg: &PlacementConfig, est: &Estimator, ranks: Option<&RankCache>) -> Vec<(String, f64)> {
    let (per_node, nodes) = (chosen.gpus_per_node, chosen.nodes);
    let mut set: Vec<(String, f64)> = vec![(chosen.cell.gpu_type.clone(), chosen.iter_time_s)];
    for o in capacity.iter().filter(|o| o.gpu_type != chosen.cell.gpu_type) {
        let hold = o.free_gpus_per_node.iter().filter(|n| **n >= per_node).count();
        if o.gpus_per_node < per_node || (hold as u64) < u64::from(nodes) {
            continue;
        }
        // Exactly the shape every task asks for: `nodes` nodes of `per_node` GPUs.
        let shape = [CellOffer { gpu_type: o.gpu_type.clone(), gpus_per_node: per_node, free_gpus_per_node: vec![per_node; nodes as usize] }];
        let best = rank_cells(est, ranks, job, &shape, chosen.cell.gpus)
            .iter()
            .filter(|e| e.cell.gpus == chosen.cell.gpus && e.nodes == nodes)
            .map(|e| e.iter_time_s)
            .reduce(f64::min);
        if let Some(s) = best {
            set.push((o.gpu_type.clone(), s));
        }
    }
    let fastest = set.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
    let bound = fastest * cfg.replan_max_slowdown.max(1.0);
    let first = set.remove(0);
    set.retain(|(_, s)| *s <= bound);
    set.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    set.insert(0, first);
    set
}

fn type_names(set: &[(String, f64)]) -> Vec<String> {
    set.iter().map(|(t, _)| t.clone()).collect()
}

/// The request rewrite for an estimate: feature = type, untyped count per node.
pub fn rewrite_for(req: &SubmitRequest, e: &Estimate) -> Rewrite {
    Rewrite {
        features: request::with_type_feature(req.features.as_deref(), &e.cell.gpu_type),
        tres_per_node: with_untyped_gpus(req.tres_per_node.as_deref(), e.gpus_per_node, req.gres_prefix),
        nodes: e.nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;

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

    /// An elastic job's record carries its model's measured cold start from
    /// the profile DB (`restart_s=`): on the chosen type when measured there,
    /// else from any type; a job without the opt-in never does.
    #[test]
    fn elastic_jobs_record_the_measured_first_iteration_time() {
        use crate::profile_db::{ProfileDb, ProfileRecord};
        let m = model();
        let row = |t: &str, first: f64| ProfileRecord { model: m.clone(), batch: 8, gpu_type: t.into(), nodes: 1, gpus_per_node: 1, iter_time_s: 0.2, plan: None, peak_mem_gib: None, first_iter_s: Some(first) };
        let mut db = ProfileDb::new();
        db.insert(row("a10", 30.0));
        let e = est().with_db(db.clone());
        let (cfg, c) = (PlacementConfig::default(), cluster(&[]));
        let env = |elastic: bool| {
            let mut v = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=8".into()];
            if elastic {
                v.push("CELLSCHED_DL_ELASTIC=USR1".into());
            }
            SubmitRequest { env: v, ..Default::default() }
        };
        let placed = |e: &Estimator, elastic: bool| match place(&env(elastic), &c, &cfg, e) {
            Outcome::Place(p) => p.record,
            o => panic!("{o:?}"),
        };
        let r = placed(&e, true);
        assert_eq!(r.restart_s, Some(30.0), "another type's measurement when the chosen type has none: {r}");
        assert!(r.to_string().contains("restart_s=30"), "{r}");
        assert_eq!(placed(&e, false).restart_s, None);
        db.insert(row(&r.decision.cell.gpu_type, 12.0));
        db.insert(ProfileRecord { batch: 16, ..row(&r.decision.cell.gpu_type, 14.0) });
        assert_eq!(placed(&est().with_db(db), true).restart_s, Some(13.0), "the median on the chosen type");
        assert_eq!(placed(&est(), true).restart_s, None, "no DB, nothing measured");
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
        let job = job_spec(&dl_options(&r.env).unwrap().unwrap(), &e, &r.env).unwrap();
        let ranked = e.rank_cells(&job, &offers(&c, &cfg, false), cfg.max_gpus);
        let expect = ranked[sizing::SizingRule::from_config(&cfg).choose(&ranked, None).unwrap()].clone();
        assert_eq!(p.estimate, expect);
        assert!(!p.pinned);
        let w = p.rewrite.unwrap();
        assert_eq!(w.features, format!("ib&{}", expect.cell.gpu_type));

        // A GPU type named in the user's own constraint is kept: only its nodes are placed on.
        for t in c.iter().map(|n| n.gpu_type.clone()).filter(|t| *t != expect.cell.gpu_type) {
            let named = SubmitRequest { features: Some(format!("ib&{t}")), ..r.clone() };
            let Outcome::Place(p) = place(&named, &c, &cfg, &e) else { panic!("not placed on {t}") };
            assert_eq!(p.estimate.cell.gpu_type, t);
            assert_eq!(p.rewrite.unwrap().features, format!("ib&{t}&{t}"));
        }
        assert_eq!(w.tres_per_node, format!("{}gpu:{}", GRES_PREFIX_2205, expect.gpus_per_node));
        assert_eq!(w.nodes, expect.nodes);

        // That type fully busy: the free types are slower, and at submit no
        // forecast says waiting loses, so the job keeps its Cell (the wait
        // test, re-planned later); with the wait test off, a free type.
        let busy: Vec<(&str, u32)> = c.iter().filter(|n| n.gpu_type == expect.cell.gpu_type).map(|n| (n.node.as_str(), n.total)).collect();
        let c2 = cluster(&busy);
        let Outcome::Place(p2) = place(&r, &c2, &cfg, &e) else { panic!("not placed") };
        assert_eq!(p2.estimate, expect);
        assert!(p2.why.contains("replan_wait_test"), "{}", p2.why);
        let no_wait = PlacementConfig { replan_wait_test: false, ..cfg.clone() };
        let Outcome::Place(p2) = place(&r, &c2, &no_wait, &e) else { panic!("not placed") };
        assert_ne!(p2.estimate.cell.gpu_type, expect.cell.gpu_type);

        // Allowed types restrict the choice; max_gpus bounds the count.
        let only = PlacementConfig { allowed_gpu_types: vec!["v100".into()], max_gpus: 4, ..Default::default() };
        if let Outcome::Place(p3) = place(&r, &c, &only, &e) {
            assert_eq!(p3.estimate.cell.gpu_type, "v100");
            assert!(p3.estimate.cell.gpus <= 4);
        }
    }

    #[test]
    fn dl_explain_names_the_chosen_cell_and_the_runner_up_of_the_same_ranking() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        let env = [format!("CELLSCHED_DL_MODEL={}", model()), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_ITERS=1000".into(), "CELLSCHED_DL_EXPLAIN=1".into()];
        let r = SubmitRequest { env: env.to_vec(), ..Default::default() };
        let Outcome::Place(p) = place(&r, &c, &cfg, &e) else { panic!("not placed") };
        let job = job_spec(&dl_options(&r.env).unwrap().unwrap(), &e, &r.env).unwrap();
        let ranked = e.rank_cells(&job, &offers(&c, &cfg, false), cfg.max_gpus);
        let first = &ranked[sizing::SizingRule::from_config(&cfg).choose(&ranked, None).unwrap()];
        let others: Vec<Estimate> = ranked.iter().filter(|x| (&x.cell.gpu_type, x.cell.gpus) != (&first.cell.gpu_type, first.cell.gpus)).cloned().collect();
        let second = &others[sizing::SizingRule::from_config(&cfg).choose(&others, None).expect("two Cells")];
        let msg = p.explanation.clone().expect("an explanation");
        assert!(msg.starts_with(&format!("cellsched: chose {} ", first.cell)), "{msg}");
        assert!(msg.contains(&format!("runner-up {} ", second.cell)) && msg.contains(&format!("{:.4} s/iteration", second.iter_time_s)), "{msg}");
        assert!(msg.contains("for 1000 iterations") && msg.contains("predictions"), "{msg}");
        // Without the flag: no message. The flag alone is no DL job.
        let quiet = SubmitRequest { env: env[..3].to_vec(), ..Default::default() };
        let Outcome::Place(q) = place(&quiet, &c, &cfg, &e) else { panic!("not placed") };
        assert_eq!(q.explanation, None);
        assert!(matches!(place(&req(&["CELLSCHED_DL_EXPLAIN=1"]), &c, &cfg, &e), Outcome::Stock(_)));
    }

    #[test]
    fn small_jobs_get_the_gpus_that_pay_not_the_fastest_cell() {
        // A batch-256 350M job with no GPU request: the fastest Cell is large
        // (8 A100 over the two nodes; at batch 64 one node's 4 are fastest
        // since gradient sync across nodes shares the node's network link),
        // the marginal rule stops where doubling no longer pays 1.5x.
        let (e, c) = (est(), cluster(&[]));
        let m = ModelCatalog::builtin().names().find(|n| n.contains("350M")).expect("a 350M model").to_string();
        let r = req(&[&format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=256"]);
        let cfg = PlacementConfig::default();
        let Outcome::Place(p) = place(&r, &c, &cfg, &e) else { panic!("not placed") };
        let job = job_spec(&dl_options(&r.env).unwrap().unwrap(), &e, &r.env).unwrap();
        let ranked = e.rank_cells(&job, &offers(&c, &cfg, false), cfg.max_gpus);
        assert!(p.estimate.cell.gpus < ranked[0].cell.gpus, "{} vs fastest {}", p.estimate.cell, ranked[0].cell);
        assert!(p.estimate.cell.gpus <= 4, "at most max_gpu_factor x the 1 GPU it fits on: {}", p.estimate.cell);
        // Every bigger Cell of the ranking fails the marginal test against the chosen one.
        for b in ranked.iter().filter(|b| b.cell.gpus > p.estimate.cell.gpus && b.cell.gpus <= 4) {
            let m = sizing::SizingRule::marginal_efficiency(p.estimate.cell.gpus, p.estimate.iter_time_s, b.cell.gpus, b.iter_time_s);
            assert!(m < cfg.min_marginal_efficiency, "{} would pay ({m})", b.cell);
        }
        // With the rule off (θ = 0, no cap beyond max_gpus) the old behaviour: the fastest Cell.
        let greedy = PlacementConfig { min_marginal_efficiency: 0.0, max_gpu_factor: 16.0, ..PlacementConfig::default() };
        let Outcome::Place(g) = place(&r, &c, &greedy, &e) else { panic!("not placed") };
        assert_eq!(g.estimate, ranked[0]);
    }

    #[test]
    fn deadlines_pick_a_cell_in_time_warn_or_refuse() {
        use crate::deadline::DeadlinePolicy;
        let (e, c) = (est(), cluster(&[]));
        let m = ModelCatalog::builtin().names().find(|n| n.contains("350M")).expect("a 350M model").to_string();
        let now = 1_800_000_000;
        let r = |extra: &[&str]| {
            let mut env = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=256".to_string()];
            env.extend(extra.iter().map(|s| s.to_string()));
            SubmitRequest { env, now, ..Default::default() }
        };
        let cfg = PlacementConfig::default();
        let strict = PlacementConfig { deadline_policy: DeadlinePolicy::Strict, ..PlacementConfig::default() };
        // Without a deadline: the sizing choice, its time per iteration.
        let Outcome::Place(base) = place(&r(&["CELLSCHED_DL_ITERS=1000"]), &c, &cfg, &e) else { panic!("not placed") };
        let (small, t_small) = (base.estimate.cell.clone(), base.estimate.iter_time_s);
        // A far deadline changes nothing but the recorded tag.
        let Outcome::Place(far) = place(&r(&["CELLSCHED_DL_ITERS=1000", "CELLSCHED_DL_DEADLINE=now+30d"]), &c, &cfg, &e) else { panic!() };
        assert_eq!(far.estimate.cell, small);
        assert_eq!(far.record.deadline, Some(now + 30 * 86_400), "{}", far.admin_comment());
        assert_eq!(far.notice, None);
        // A deadline the sizing choice misses but a faster Cell meets: that Cell.
        let job = job_spec(&dl_options(&r(&[]).env).unwrap().unwrap(), &e, &r(&[]).env).unwrap();
        let ranked = e.rank_cells(&job, &offers(&c, &cfg, false), cfg.max_gpus);
        let fastest = ranked[0].iter_time_s;
        assert!(fastest < t_small, "the test needs a faster Cell than the sizing choice");
        let iters = 1_000_000u64;
        let window = (iters as f64 * (fastest + t_small) / 2.0).ceil() as i64;
        let tight = r(&[&format!("CELLSCHED_DL_ITERS={iters}"), &format!("CELLSCHED_DL_DEADLINE=now+{window}")]);
        let tight_deadline = |q: &SubmitRequest| Some(q.now + window);
        let Outcome::Place(p) = place(&tight, &c, &cfg, &e) else { panic!("not placed") };
        assert!(p.estimate.iter_time_s * iters as f64 <= window as f64, "{} misses", p.estimate.cell);
        assert_eq!(p.notice, None);
        assert_eq!(p.record.deadline, tight_deadline(&tight), "a feasible deadline is kept");
        // A deadline no Cell meets: placed on the fastest without the deadline
        // (best effort: no urgency), or refused when strict.
        let hopeless = r(&[&format!("CELLSCHED_DL_ITERS={iters}"), "CELLSCHED_DL_DEADLINE=now+60"]);
        let Outcome::Place(w) = place(&hopeless, &c, &cfg, &e) else { panic!("not placed") };
        assert_eq!(w.estimate.iter_time_s, fastest);
        assert_eq!(w.record.deadline, None, "an infeasible deadline buys no urgency");
        assert!(w.record.infeasible_deadline.is_some_and(|d| d > 0), "the dropped deadline is kept as infeasible_deadline= (its user loses urgency)");
        assert_eq!(p.record.infeasible_deadline, None);
        let notice = w.user_message().expect("a notice");
        assert!(notice.contains("--dl-deadline") && notice.contains("fastest Cell") && notice.contains("best effort"), "{notice}");
        match place(&hopeless, &c, &strict, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("strict") && msg.contains("--dl-deadline"), "{msg}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // No declared work: recorded, warned (unchecked); strict refuses. Past deadlines are refused.
        let Outcome::Place(u) = place(&r(&["CELLSCHED_DL_DEADLINE=now+1h"]), &c, &cfg, &e) else { panic!() };
        assert!(u.notice.as_deref().is_some_and(|n| n.contains("--dl-iters")), "{:?}", u.notice);
        assert!(matches!(place(&r(&["CELLSCHED_DL_DEADLINE=now+1h"]), &c, &strict, &e), Outcome::Reject(m) if m.contains("--dl-iters")));
        let past = SubmitRequest { env: r(&["CELLSCHED_DL_DEADLINE=2020-01-01"]).env, now, ..Default::default() };
        assert!(matches!(place(&past, &c, &cfg, &e), Outcome::Reject(m) if m.contains("future")));
        assert!(matches!(place(&r(&["CELLSCHED_DL_DEADLINE=soon"]), &c, &cfg, &e), Outcome::Reject(m) if m.contains("--dl-deadline") || m.contains("CELLSCHED_DL_DEADLINE")));
        // A pinned plan no Cell can finish in time keeps its plan (told it runs best effort), never another plan's Cell.
        let pinned = r(&[&format!("CELLSCHED_DL_ITERS={iters}"), "CELLSCHED_DL_DEADLINE=now+60", "CELLSCHED_DL_PLAN=dp=4,tp=1,pp=1,zero=1,ckpt=on"]);
        let Outcome::Place(pp) = place(&pinned, &c, &cfg, &e) else { panic!("pinned plan not placed") };
        assert_eq!((pp.record.decision.plan.dp, pp.record.decision.plan.tp, pp.record.decision.plan.pp, pp.record.decision.cell.gpus), (4, 1, 1, 4));
        assert!(pp.notice.as_deref().is_some_and(|n| n.contains("best effort")) && pp.record.deadline.is_none(), "{:?}", pp.notice);
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
        assert_eq!(p.record.decision.cell, "v100x8".parse().unwrap());
        assert_eq!(p.rewrite.unwrap().tres_per_node, format!("{}gpu:8", GRES_PREFIX_2205));

        // Typed --gres: decision recorded, request untouched.
        let env2 = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=32".into()];
        let r2 = SubmitRequest { env: env2, tres_per_node: Some("gres:gpu:a100:4".into()), ..Default::default() };
        let Outcome::Place(p2) = place(&r2, &c, &cfg, &e) else { panic!("not placed") };
        assert!(p2.pinned && p2.rewrite.is_none());
        assert_eq!(p2.record.decision.cell.gpu_type, "a100");

        // Conflicting pins are rejected with a message naming both.
        let r3 = SubmitRequest { tres_per_node: Some("gres:gpu:a100:4".into()), env, ..Default::default() };
        match place(&r3, &c, &cfg, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("v100x8") && msg.contains("a100"), "{msg}"),
            other => panic!("{other:?}"),
        }

        // Probe round 3: a typed request of another GPU count than the pinned Cell's is refused
        // (the job would hold the typed GPUs while ranked and time-limited as the Cell).
        let one = vec![format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_CELL=a100x1".into()];
        for (per_node, per_job, nodes) in [(Some("gres:gpu:a100:4"), None, None), (None, Some("gres:gpu:a100:8"), None), (Some("gres:gpu:a100:1"), None, Some(2))] {
            let r = SubmitRequest { env: one.clone(), tres_per_node: per_node.map(Into::into), tres_per_job: per_job.map(Into::into), min_nodes: nodes, ..Default::default() };
            match place(&r, &c, &cfg, &e) {
                Outcome::Reject(msg) => assert!(msg.contains("--dl-cell=a100x1") && msg.contains("in all"), "{msg}"),
                other => panic!("{per_node:?} {per_job:?} x{nodes:?}: {other:?}"),
            }
        }
        // The same count typed is the same request.
        let same = SubmitRequest { env: one, tres_per_node: Some("gres:gpu:a100:1".into()), ..Default::default() };
        assert!(matches!(place(&same, &c, &cfg, &e), Outcome::Place(p) if p.record.decision.cell.gpus == 1));
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
        assert_eq!(text, format!("{} model={canonical} batch=32 iters=500", p.record.decision.to_admin_comment()));
        // The decision still parses, unchanged, with the tags after it.
        assert_eq!(Decision::parse_admin_comment(&text), Decision::parse_admin_comment(&p.record.decision.to_admin_comment()));
        assert!(Decision::parse_admin_comment(&text).is_some());
        // No declared iterations: no iters tag.
        let no_iters = [format!("CELLSCHED_DL_MODEL={m}"), "CELLSCHED_DL_BATCH=8".into()];
        let Outcome::Place(q) = place(&req(&no_iters.iter().map(String::as_str).collect::<Vec<_>>()), &cluster(&[]), &PlacementConfig::default(), &est())
        else {
            panic!("not placed")
        };
        assert!(q.admin_comment().ends_with(&format!(" model={canonical} batch=8")), "{}", q.admin_comment());
    }

    #[test]
    fn disabled_placement_leaves_requests_alone_and_refuses_gpu_less_dl_jobs() {
        let cfg = PlacementConfig { enabled: false, ..Default::default() };
        let env = [format!("CELLSCHED_DL_MODEL={}", model()), "CELLSCHED_DL_BATCH=32".into()];
        let r = SubmitRequest { env: env.to_vec(), ..Default::default() };
        assert!(matches!(place(&r, &cluster(&[]), &cfg, &est()), Outcome::Reject(m) if m.contains("placement.enabled = false")));
        let own = SubmitRequest { tres_per_node: Some("gres:gpu:4".into()), ..r };
        assert!(matches!(place(&own, &cluster(&[]), &cfg, &est()), Outcome::Stock(_)));
    }

    /// Issue 31 item 4: an array's tasks share one request, so it names
    /// every GPU type whose Cell of the same shape is within the re-planning
    /// slowdown bound of the best; other jobs, pinned plans and deadlines keep one type.
    #[test]
    fn arrays_get_every_type_that_serves_their_shape_within_the_bound() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        let env = dl_env(&["CELLSCHED_DL_ITERS=1000"]);
        let plain = SubmitRequest { env: env.clone(), tres_per_node: Some("gres:gpu:4".into()), ..Default::default() };
        let array = SubmitRequest { array: true, ..plain.clone() };
        let Outcome::Place(one) = place(&plain, &c, &cfg, &e) else { panic!("not placed") };
        let Outcome::Place(p) = place(&array, &c, &cfg, &e) else { panic!("not placed") };
        assert!(one.record.types.is_empty(), "{}", one.record);
        assert_eq!(p.record.decision, one.record.decision, "the decision is the same; only the type set is added");
        let types = p.record.types.clone();
        assert!(types.len() >= 2, "a 4-GPU gpt job fits a100, v100 and a10 nodes: {}", p.record);
        assert_eq!(types[0], p.record.decision.cell.gpu_type, "the decision's type first");
        let w = p.rewrite.clone().unwrap();
        assert_eq!(w.features, format!("[{}]", types.join("|")));
        assert_eq!((w.tres_per_node.as_str(), w.nodes), ("gres:gpu:4", 1), "one untyped request every type honours");
        // Each type's own best Cell of that shape is within the bound, and the slowest is recorded for the time limit.
        let job = job_spec(&dl_options(&env).unwrap().unwrap(), &e, &env).unwrap();
        let per_type: Vec<f64> = types.iter().map(|t| e.estimate(&job, &Cell::new(t, 4, 1).unwrap(), 4).unwrap().iter_time_s).collect();
        let best = per_type.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!(per_type.iter().all(|s| *s <= best * cfg.replan_max_slowdown * (1.0 + 1e-9)), "{per_type:?}");
        let slowest = p.record.slowest_iter_s.expect("slowest_iter_s with a type set");
        assert!(slowest >= p.record.decision.iter_s && (p.record.work_iter_s() - slowest).abs() < 1e-12);
        assert!(p.why.contains("array tasks may run on"), "{}", p.why);
        assert_eq!(DlRecord::parse(&p.admin_comment()).unwrap().types, types, "the record carries the set");
        // A tight bound keeps only types as fast as the best.
        let tight = PlacementConfig { replan_max_slowdown: 1.0, ..cfg.clone() };
        let Outcome::Place(t) = place(&array, &c, &tight, &e) else { panic!("not placed") };
        assert!(t.record.types.len() < types.len(), "{}", t.record);
        // A type whose nodes cannot hold the shape is left out: 8 GPUs as 2 nodes x 4 fit the
        // a100 and v100 groups (2 nodes each), not the one a10 node.
        let eight = SubmitRequest { tres_per_node: Some("gres:gpu:8".into()), ..array.clone() };
        let Outcome::Place(x) = place(&eight, &c, &cfg, &e) else { panic!("not placed") };
        let shape = (x.estimate.nodes, x.estimate.gpus_per_node);
        assert!(!x.record.types.iter().any(|t| t == "a10"), "{}", x.record);
        if shape == (2, 4) {
            assert!(x.record.types.iter().any(|t| t == "v100"), "v100 nodes hold 2 x 4: {}", x.record);
        }
        // Pinned plans, user brackets and deadlines keep one type.
        let pinned = SubmitRequest { env: dl_env(&["CELLSCHED_DL_PLAN=dp=4,tp=1,pp=1"]), array: true, ..Default::default() };
        let bracket = SubmitRequest { features: Some("[rack1|rack2]".into()), ..array.clone() };
        let typed_feature = SubmitRequest { features: Some("ib&v100".into()), ..array.clone() };
        let deadline = SubmitRequest { env: dl_env(&["CELLSCHED_DL_ITERS=10", "CELLSCHED_DL_DEADLINE=now+30d"]), now: 1_800_000_000, array: true, ..Default::default() };
        for r in [pinned, bracket, deadline, typed_feature] {
            let Outcome::Place(x) = place(&r, &c, &cfg, &e) else { panic!("not placed: {r:?}") };
            assert!(x.record.types.is_empty(), "{r:?}: {}", x.record);
        }
    }

    fn dl_env(extra: &[&str]) -> Vec<String> {
        let mut v = vec![format!("CELLSCHED_DL_MODEL={}", model()), "CELLSCHED_DL_BATCH=32".to_string()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    #[test]
    fn a_pinned_type_the_cluster_lacks_is_refused_with_the_types_it_has() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        for r in [
            SubmitRequest { env: dl_env(&["CELLSCHED_DL_CELL=h100x4"]), ..Default::default() },
            SubmitRequest { env: dl_env(&[]), tres_per_node: Some("gres:gpu:h100:4".into()), ..Default::default() },
            SubmitRequest { env: dl_env(&[]), tres_per_job: Some("gres:gpu:h100:4".into()), ..Default::default() },
        ] {
            for out in [place(&r, &c, &cfg, &e), fallback(&r, &c, "no valid cellsched.toml")] {
                match out {
                    Outcome::Reject(msg) => assert!(msg.contains("'h100'") && msg.contains("a10, a100, v100"), "{msg}"),
                    // The typed --gres keeps the user's own request when cellsched cannot decide.
                    Outcome::Stock(why) if r.env.len() == 2 => assert!(why.contains("kept"), "{why}"),
                    other => panic!("{r:?}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn pinned_plans_are_honoured_or_refused() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        let r = SubmitRequest { env: dl_env(&["CELLSCHED_DL_PLAN=dp=4,tp=1,pp=1,zero=1,ckpt=on"]), ..Default::default() };
        let out = place(&r, &c, &cfg, &e);
        let Outcome::Place(p) = out else { panic!("not placed: {out:?}") };
        assert_eq!((p.record.decision.plan.dp, p.record.decision.plan.tp, p.record.decision.plan.pp), (4, 1, 1));
        assert_eq!(p.record.decision.cell.gpus, 4);
        assert!(p.pinned, "a pinned plan is never re-planned");
        let w = p.rewrite.unwrap();
        let per_node: u32 = w.tres_per_node.rsplit([':', '=']).next().unwrap().parse().unwrap_or_else(|_| panic!("{w:?}"));
        assert_eq!(w.nodes * per_node, 4, "{w:?}");

        // A plan that does not fit in memory anywhere is refused with the reason.
        let oom = SubmitRequest { env: dl_env(&["CELLSCHED_DL_PLAN=dp=1,tp=1,pp=1"]), ..Default::default() };
        match place(&oom, &c, &cfg, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("cannot run") && msg.contains("GiB"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // More GPUs than a job may use.
        let big = SubmitRequest { env: dl_env(&["CELLSCHED_DL_PLAN=dp=32,tp=1,pp=1"]), ..Default::default() };
        match place(&big, &c, &cfg, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("32 GPUs") && msg.contains("most a job may use is 16"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // A plan that does not match a typed request.
        let clash = SubmitRequest { tres_per_node: Some("gres:gpu:a100:4".into()), env: dl_env(&["CELLSCHED_DL_PLAN=dp=2,tp=1,pp=1"]), ..Default::default() };
        match place(&clash, &c, &cfg, &e) {
            Outcome::Reject(msg) => assert!(msg.contains("dp*tp*pp = 2") && msg.contains("4 GPUs"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // With a pinned Cell that matches, the decision carries the pinned plan.
        let both = SubmitRequest { env: dl_env(&["CELLSCHED_DL_CELL=v100x8x2", "CELLSCHED_DL_PLAN=dp=4,tp=1,pp=2,zero=1,ckpt=on"]), ..Default::default() };
        let out = place(&both, &c, &cfg, &e);
        let Outcome::Place(q) = out else { panic!("not placed: {out:?}") };
        assert_eq!((q.record.decision.plan.dp, q.record.decision.plan.tp, q.record.decision.plan.pp, q.record.decision.cell.gpus), (4, 1, 2, 8));
    }

    #[test]
    fn an_untyped_gpu_count_is_honoured_exactly() {
        let (e, cfg, c) = (est(), PlacementConfig::default(), cluster(&[]));
        for (per_node, per_job, want) in [(Some("gres:gpu:2"), None, 2), (None, Some("gres:gpu:4"), 4), (Some("gres:gpu:1"), None, 1)] {
            let r = SubmitRequest { env: dl_env(&[]), tres_per_node: per_node.map(Into::into), tres_per_job: per_job.map(Into::into), ..Default::default() };
            match place(&r, &c, &cfg, &e) {
                Outcome::Place(p) => {
                    assert_eq!(p.record.decision.cell.gpus, want, "{r:?}");
                    assert_eq!(DlRecord::parse(&p.admin_comment()).unwrap().fixed_gpus, Some(want), "{}", p.admin_comment());
                }
                Outcome::Stock(why) => assert!(why.contains("kept"), "{why}"),
                other => panic!("{r:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn when_cellsched_cannot_decide_the_request_is_kept_or_the_job_refused() {
        let c = cluster(&[]);
        let pinned = SubmitRequest { env: dl_env(&["CELLSCHED_DL_CELL=a100x8"]), features: Some("ib".into()), ..Default::default() };
        match fallback(&pinned, &c, "no valid cellsched.toml") {
            Outcome::Honour(why, w) => {
                assert!(why.contains("no valid cellsched.toml"), "{why}");
                assert_eq!(w, Rewrite { features: "ib&a100".into(), tres_per_node: format!("{}gpu:4", GRES_PREFIX_2205), nodes: 2 });
            }
            other => panic!("{other:?}"),
        }
        let none = SubmitRequest { env: dl_env(&[]), ..Default::default() };
        match fallback(&none, &c, "no valid cellsched.toml") {
            Outcome::Reject(msg) => assert!(msg.contains("--gres") && msg.contains("no valid cellsched.toml"), "{msg}"),
            other => panic!("{other:?}"),
        }
        let own = SubmitRequest { env: dl_env(&[]), tres_per_node: Some("gres:gpu:2".into()), ..Default::default() };
        assert!(matches!(fallback(&own, &c, "x"), Outcome::Stock(_)));
        // Placement disabled by the admin: same rules.
        let off = PlacementConfig { enabled: false, ..Default::default() };
        assert!(matches!(place(&none, &c, &off, &est()), Outcome::Reject(_)));
        assert!(matches!(place(&own, &c, &off, &est()), Outcome::Stock(_)));
        // Bad options are refused either way.
        let bad = SubmitRequest { env: vec!["CELLSCHED_DL_BATCH=8".into()], ..Default::default() };
        assert!(matches!(fallback(&bad, &c, "x"), Outcome::Reject(_)));
        // Not a DL job: untouched.
        assert!(matches!(fallback(&req(&["FOO=1"]), &c, "x"), Outcome::Stock(_)));
    }

    #[test]
    fn heterogeneous_components_with_dl_options_are_refused() {
        let r = SubmitRequest { env: dl_env(&[]), het_component: true, ..Default::default() };
        for out in [place(&r, &cluster(&[]), &PlacementConfig::default(), &est()), fallback(&r, &cluster(&[]), "x")] {
            match out {
                Outcome::Reject(msg) => assert!(msg.contains("heterogeneous"), "{msg}"),
                other => panic!("{other:?}"),
            }
        }
        let plain = SubmitRequest { env: vec!["FOO=1".into()], het_component: true, ..Default::default() };
        assert!(matches!(place(&plain, &cluster(&[]), &PlacementConfig::default(), &est()), Outcome::Stock(_)));
    }

    #[test]
    fn user_model_files_are_placed_from_their_forwarded_description() {
        let spec = crate::model::parse_model_toml(
            "family = \"gpt\"\nlayers = 12\nhidden = 768\nheads = 12\nseq_len = 512\nvocab = 50000\n",
            "small.toml",
            "small",
        )
        .unwrap();
        let env = vec![
            "CELLSCHED_DL_MODEL=/home/u/small.toml".to_string(),
            "CELLSCHED_DL_BATCH=16".into(),
            format!("{MODEL_SPEC_ENV_KEY}={}", crate::model::model_to_wire(&spec)),
        ];
        let r = SubmitRequest { env: env.clone(), ..Default::default() };
        let Outcome::Place(p) = place(&r, &cluster(&[]), &PlacementConfig::default(), &est()) else { panic!("not placed") };
        assert!(p.record.model.as_deref().is_some_and(|m| m.starts_with("user:small@")), "{}", p.admin_comment());
        // Without the description (no SPANK plugin at submit) the file is never opened here.
        let r2 = SubmitRequest { env: env[..2].to_vec(), ..Default::default() };
        match place(&r2, &cluster(&[]), &PlacementConfig::default(), &est()) {
            Outcome::Reject(m) => assert!(m.contains("without its description") && m.contains("--gres"), "{m}"),
            other => panic!("{other:?}"),
        }
        // A forged, invalid description is refused.
        let mut bad = env.clone();
        bad[2] = format!("{MODEL_SPEC_ENV_KEY}={{\"family\":\"gpt\",\"layers\":0}}");
        assert!(matches!(place(&SubmitRequest { env: bad, ..Default::default() }, &cluster(&[]), &PlacementConfig::default(), &est()), Outcome::Reject(_)));
    }

    #[test]
    fn declared_iterations_bound_the_time_limit() {
        let cfg = DeclaredConfig::default();
        let b = crate::declared::time_bound_min(100, 0.5, &cfg).unwrap();
        // Unset (0 here, NO_VAL in the plugin), unlimited or longer limits are lowered; shorter ones kept.
        assert_eq!(bounded_limit(0, Some(100), 0.5, &cfg), Some(b));
        assert_eq!(bounded_limit(u32::MAX, Some(100), 0.5, &cfg), Some(b));
        assert_eq!(bounded_limit(b + 1, Some(100), 0.5, &cfg), Some(b));
        assert_eq!(bounded_limit(b, Some(100), 0.5, &cfg), None);
        assert_eq!(bounded_limit(0, None, 0.5, &cfg), None, "nothing declared, nothing bounded");
        let off = DeclaredConfig { policy: crate::declared::OverrunPolicy::Off, ..cfg };
        assert_eq!(bounded_limit(0, Some(100), 0.5, &off), None);
        // Placements carry the declared iterations.
        let env = [format!("CELLSCHED_DL_MODEL={}", model()), "CELLSCHED_DL_BATCH=32".into(), "CELLSCHED_DL_ITERS=7".into()];
        let Outcome::Place(p) = place(&SubmitRequest { env: env.to_vec(), ..Default::default() }, &cluster(&[]), &PlacementConfig::default(), &est()) else { panic!() };
        assert_eq!(p.record.iters, Some(7));
    }
}

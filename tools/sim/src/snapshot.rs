//! Snapshots of a live cluster for "what if I submitted this job now?"
//! (`cellsched whatif`): the nodes with their GPUs, the running jobs with
//! their predicted remaining time, and the pending jobs in priority order,
//! run forward in the [`crate::engine`] from that state.
//!
//! Parsing reads the text of Slurm's own commands with explicit formats
//! ([`SINFO_FORMAT`], [`SQUEUE_FORMAT`], AdminComment lines of
//! `scontrol show job`); running them is the caller's business. DL facts
//! (Cell, seconds per iteration, model, batch, declared iterations) come
//! only from AdminComment, written by job_submit/cellsched; the user's
//! Comment is never read.
//!
//! Every time here is a **prediction**: the estimator's seconds per
//! iteration times the declared (or limit-derived) iterations, and running
//! jobs' remaining time from the same or from their time limit.
use crate::cluster::{ClusterSpec, ClusterState, GroupSpec};
use crate::engine::{Sim, SimConfig};
use crate::error::SimError;
use crate::policy::{CellschedOptions, CellschedPolicy};
use crate::times::TimeCache;
use crate::trace::TraceJob;
use cellsched_core::slurm_text::hostlist_contains;
use cellsched_core::placement::gpu_entries;
use cellsched_core::record::DlRecord;
use std::collections::HashMap;

/// `sinfo -N -h -O` format the node parser expects (fields end in `|`).
pub const SINFO_FORMAT: &str = "NodeList:|,Gres:|,GresUsed:|,StateLong:|";
/// `squeue -h -O` format the job parser expects (fields end in `|`).
pub const SQUEUE_FORMAT: &str =
    "JobID:|,StateCompact:|,NodeList:|,NumNodes:|,tres-alloc:|,tres-per-node:|,tres-per-job:|,Feature:|,TimeLimit:|,TimeUsed:|,PriorityLong:|";

/// Model name given to jobs the knowledge cannot time (non-DL jobs): the
/// engine runs them as stock Slurm would (requested type and count, their time limit).
const STOCK_MODEL: &str = "(not a DL job)";

/// One node with GPUs of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapNode {
    /// Node name.
    pub name: String,
    /// GPU type (GRES type).
    pub gpu_type: String,
    /// GPUs on the node.
    pub gpus: u32,
}

/// How a running job's remaining time was predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RemainingFrom {
    /// Declared iterations x predicted seconds per iteration (AdminComment) − elapsed.
    Declared,
    /// Time limit − elapsed (no declared work, or the job ran past it).
    TimeLimit,
    /// Neither known (unlimited job): [`Snapshot::default_remaining_s`].
    Default,
}

/// A job holding GPUs now.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapRunning {
    /// Slurm job id.
    pub id: String,
    /// Nodes it holds GPUs on.
    pub nodes: Vec<String>,
    /// GPU type.
    pub gpu_type: String,
    /// GPUs on each of its nodes.
    pub gpus_per_node: u32,
    /// Predicted seconds until it ends.
    pub remaining_s: f64,
    /// Where the prediction comes from.
    pub remaining_from: RemainingFrom,
}

/// A job waiting for GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapPending {
    /// Slurm job id.
    pub id: String,
    /// Catalog model of a DL job (`None`: not a DL job, timed by its limit).
    pub model: Option<String>,
    /// Global batch (DL jobs).
    pub batch: u32,
    /// Iterations the scheduler plans with (declared, else limit / iter_s).
    pub iters: u64,
    /// GPU type of its request (DL jobs: the Cell cellsched recorded).
    pub gpu_type: String,
    /// GPUs in all.
    pub gpus: u32,
    /// Time limit, seconds.
    pub limit_s: f64,
}

/// The state of a cluster at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Nodes that can run jobs.
    pub nodes: Vec<SnapNode>,
    /// Running jobs.
    pub running: Vec<SnapRunning>,
    /// Pending jobs, highest priority first.
    pub pending: Vec<SnapPending>,
    /// Jobs or nodes left out, with the reason.
    pub skipped: Vec<String>,
}

/// A job as Slurm lists it (`squeue` with [`SQUEUE_FORMAT`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueJob {
    /// Job id.
    pub id: String,
    /// Compact state (`R`, `PD`, `CG`, ...).
    pub state: String,
    /// Node list expression.
    pub nodelist: String,
    /// Node count.
    pub num_nodes: u32,
    /// Allocated (running) or requested TRES, `gres/gpu:a100=4`.
    pub tres_alloc: String,
    /// `--gres` per node, `gres:gpu:a100:2`.
    pub tres_per_node: String,
    /// `--gpus` per job.
    pub tres_per_job: String,
    /// `--constraint`.
    pub features: String,
    /// Time limit, seconds (`None`: unlimited or not set).
    pub limit_s: Option<f64>,
    /// Time used, seconds.
    pub used_s: f64,
    /// Priority.
    pub priority: u64,
}

/// Seconds in a Slurm duration (`[D-]HH:MM:SS`, `MM:SS`, `M`); `None` for
/// `UNLIMITED`, `NOT_SET`, `N/A`, `INVALID` and anything unparsable.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest.split(':').map(|p| p.parse::<u64>().ok()).collect::<Option<_>>()?;
    let (h, m, sec) = match (parts.as_slice(), days > 0) {
        ([h, m, s], _) => (*h, *m, *s),
        ([m, s], false) => (0, *m, *s),
        ([h, m], true) => (*h, *m, 0),
        ([m], false) => (0, *m, 0),
        ([h], true) => (*h, 0, 0),
        _ => return None,
    };
    Some((days * 86400 + h * 3600 + m * 60 + sec) as f64)
}

fn typed_gpus(s: &str) -> Option<(String, u32)> {
    gpu_entries(s).into_iter().find_map(|(t, n)| Some((t?, n)))
}

fn fields(line: &str) -> Vec<&str> {
    line.trim_end_matches(['\n', '\r']).split('|').map(str::trim).collect()
}

/// Nodes from `sinfo -N -h -O` [`SINFO_FORMAT`] output: one entry per
/// node and GPU type; nodes not in a usable state (down, drained, failing,
/// powered off) or without typed GPUs are left out and named in `skipped`.
pub fn parse_sinfo(text: &str, skipped: &mut Vec<String>) -> Vec<SnapNode> {
    let mut out: Vec<SnapNode> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f = fields(line);
        if f.len() < 5 {
            skipped.push(format!("sinfo line '{line}': expected 4 fields, each ending in '|'"));
            continue;
        }
        let (name, gres, state) = (f[0], f[1], f[3].to_ascii_lowercase());
        if out.iter().any(|n| n.name == name) {
            continue; // listed once per partition
        }
        let bad = ["down", "drain", "fail", "maint", "powered_down", "power_down", "powering", "future", "inval", "unk"];
        if bad.iter().any(|b| state.contains(b)) || state.ends_with('*') || state.ends_with('~') {
            skipped.push(format!("node {name}: state {state}"));
            continue;
        }
        let typed: Vec<(String, u32)> = gpu_entries(gres).into_iter().filter_map(|(t, n)| Some((t?, n))).collect();
        if typed.is_empty() {
            continue; // no typed GPUs: nothing cellsched places there
        }
        for (t, n) in typed.into_iter().filter(|(_, n)| *n > 0) {
            out.push(SnapNode { name: name.to_string(), gpu_type: t, gpus: n });
        }
    }
    out
}

/// Jobs from `squeue -h -O` [`SQUEUE_FORMAT`] output; unparsable lines are named in `skipped`.
pub fn parse_squeue(text: &str, skipped: &mut Vec<String>) -> Vec<QueueJob> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f = fields(line);
        if f.len() < 12 {
            skipped.push(format!("squeue line '{line}': expected 11 fields, each ending in '|'"));
            continue;
        }
        let opt = |s: &str| if s == "N/A" || s == "(null)" { String::new() } else { s.to_string() };
        out.push(QueueJob {
            id: f[0].to_string(),
            state: f[1].to_string(),
            nodelist: opt(f[2]),
            num_nodes: f[3].parse().unwrap_or(1).max(1),
            tres_alloc: opt(f[4]),
            tres_per_node: opt(f[5]),
            tres_per_job: opt(f[6]),
            features: opt(f[7]),
            limit_s: parse_duration(f[8]),
            used_s: parse_duration(f[9]).unwrap_or(0.0),
            priority: f[10].parse().unwrap_or(0),
        });
    }
    out
}

impl Snapshot {
    /// Remaining time assumed for a running job with neither declared work nor a time limit.
    pub const DEFAULT_REMAINING_S: f64 = 86400.0;

    /// Builds a snapshot from parsed `sinfo`/`squeue` output and the jobs'
    /// AdminComments. Running jobs' remaining time: declared iterations x
    /// predicted seconds per iteration − elapsed, else time limit − elapsed
    /// (never below 0). Pending jobs keep Slurm's order: priority, then job
    /// id. DL jobs keep the Cell cellsched recorded; other jobs their typed
    /// GPU request (an untyped one takes the type named in `--constraint`,
    /// else the first type with enough GPUs per node). Jobs without GPUs are ignored.
    pub fn build(nodes: Vec<SnapNode>, jobs: &[QueueJob], comments: &HashMap<String, String>, mut skipped: Vec<String>) -> Snapshot {
        let mut running = Vec::new();
        let mut pending: Vec<(u64, u64, SnapPending)> = Vec::new();
        let types: Vec<&str> = {
            let mut t: Vec<&str> = nodes.iter().map(|n| n.gpu_type.as_str()).collect();
            t.dedup();
            t
        };
        for j in jobs {
            let dl = comments.get(&j.id).and_then(|c| DlRecord::parse(c));
            let limit = j.limit_s.filter(|l| *l > 0.0);
            match j.state.as_str() {
                "R" | "CG" | "S" => {
                    let Some((ty, total)) = typed_gpus(&j.tres_alloc) else { continue };
                    let held: Vec<String> =
                        nodes.iter().filter(|n| n.gpu_type == ty && hostlist_contains(&j.nodelist, &n.name)).map(|n| n.name.clone()).collect();
                    if held.is_empty() {
                        skipped.push(format!("running job {}: none of its nodes ({}) is a usable {ty} node", j.id, j.nodelist));
                        continue;
                    }
                    let per_node = total / j.num_nodes.max(1);
                    let declared = dl.as_ref().and_then(|d| Some(d.iters? as f64 * d.decision.iter_s - j.used_s)).filter(|r| *r > 0.0);
                    let (remaining_s, remaining_from) = match (declared, limit) {
                        // Slurm ends a job at its time limit, whatever it declared.
                        (Some(r), Some(l)) if l - j.used_s < r => ((l - j.used_s).max(0.0), RemainingFrom::TimeLimit),
                        (Some(r), _) => (r, RemainingFrom::Declared),
                        (None, Some(l)) => ((l - j.used_s).max(0.0), RemainingFrom::TimeLimit),
                        (None, None) => (Self::DEFAULT_REMAINING_S, RemainingFrom::Default),
                    };
                    running.push(SnapRunning { id: j.id.clone(), nodes: held, gpu_type: ty, gpus_per_node: per_node.max(1), remaining_s, remaining_from });
                }
                "PD" => {
                    let limit_s = limit.unwrap_or(Self::DEFAULT_REMAINING_S);
                    let p = match dl.filter(|d| d.model.is_some() && d.batch.is_some()) {
                        Some(d) => {
                            let iter_s = d.decision.iter_s.max(1e-9);
                            SnapPending {
                                id: j.id.clone(),
                                iters: d.iters.unwrap_or_else(|| (limit_s / iter_s).ceil().max(1.0) as u64),
                                model: d.model,
                                batch: d.batch.and_then(|b| u32::try_from(b).ok()).unwrap_or(1),
                                gpu_type: d.decision.cell.gpu_type.clone(),
                                gpus: d.decision.cell.gpus,
                                limit_s,
                            }
                        }
                        None => {
                            let per_node = gpu_entries(&j.tres_per_node);
                            let per_job = gpu_entries(&j.tres_per_job);
                            let (ty, gpus) = match (per_node.first(), per_job.first()) {
                                (Some((t, n)), _) => (t.clone(), n * j.num_nodes),
                                (None, Some((t, n))) => (t.clone(), *n),
                                (None, None) => continue, // no GPUs
                            };
                            let ty = ty
                                .or_else(|| types.iter().find(|t| j.features.split(['&', '|', ',']).any(|f| f.trim() == **t)).map(|t| t.to_string()))
                                .or_else(|| {
                                    let per = gpus / j.num_nodes.max(1);
                                    nodes.iter().find(|n| n.gpus >= per).map(|n| n.gpu_type.clone())
                                });
                            let Some(gpu_type) = ty else {
                                skipped.push(format!("pending job {}: no node type holds its {gpus} GPUs", j.id));
                                continue;
                            };
                            SnapPending { id: j.id.clone(), model: None, batch: 1, iters: 1, gpu_type, gpus, limit_s }
                        }
                    };
                    let id: u64 = j.id.split(['_', '+']).next().and_then(|s| s.parse().ok()).unwrap_or(u64::MAX);
                    pending.push((j.priority, id, p));
                }
                _ => {}
            }
        }
        pending.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        Snapshot { nodes, running, pending: pending.into_iter().map(|p| p.2).collect(), skipped }
    }

    /// The GPU types of the nodes, in first-seen order.
    pub fn gpu_types(&self) -> Vec<String> {
        let mut t: Vec<String> = Vec::new();
        for n in &self.nodes {
            if !t.contains(&n.gpu_type) {
                t.push(n.gpu_type.clone());
            }
        }
        t
    }

    /// Free GPUs per node now (all GPUs minus those the running jobs hold), in node order.
    pub fn free_per_node(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .map(|n| {
                let used: u32 = self.running.iter().filter(|r| r.gpu_type == n.gpu_type && r.nodes.contains(&n.name)).map(|r| r.gpus_per_node).sum();
                n.gpus.saturating_sub(used)
            })
            .collect()
    }

    /// The simulator's cluster: one group per (GPU type, GPUs per node), and
    /// each node's (group, index in group), in node order.
    pub fn cluster_spec(&self) -> Result<(ClusterSpec, Vec<(usize, u32)>), SimError> {
        let mut groups: Vec<GroupSpec> = Vec::new();
        let mut at = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let g = match groups.iter().position(|g| g.gpu_type == n.gpu_type && g.gpus_per_node == n.gpus) {
                Some(g) => g,
                None => {
                    groups.push(GroupSpec { gpu_type: n.gpu_type.clone(), nodes: 0, gpus_per_node: n.gpus, inter_node_gbps: None });
                    groups.len() - 1
                }
            };
            at.push((g, groups[g].nodes));
            groups[g].nodes += 1;
        }
        if groups.is_empty() {
            return Err(SimError::invalid("snapshot", "no nodes", "at least one usable node with typed GPUs"));
        }
        Ok((ClusterSpec { groups }, at))
    }

    /// Runs the snapshot forward under the cellsched policy with `job`
    /// submitted now (after every pending job), pinned to its requested
    /// type and count when `pin`. Returns the job's predicted (start,
    /// finish) in seconds from now; `None` if the policy can never run it.
    pub fn predict(&self, times: &mut TimeCache, job: &NewJob, pin: bool, opts: &CellschedOptions) -> Result<Option<(f64, f64)>, SimError> {
        let (spec, at) = self.cluster_spec()?;
        let mut trace: Vec<TraceJob> = Vec::with_capacity(self.running.len() + self.pending.len() + 1);
        let tj = |id: &str, model: &str, iters: u64, batch: u32, gpus: u32, ty: &str, limit_s: f64| TraceJob {
            job_id: id.to_string(),
            submission_time: 0.0,
            num_iteration: iters.max(1),
            model_name: model.to_string(),
            deadline: limit_s,
            batch_size: batch.max(1),
            num_gpu: gpus.max(1),
            gpu_type: ty.to_string(),
            user: None,
            freeze: None,
            due_s: None,
            elastic: false,
        };
        for r in &self.running {
            trace.push(tj(&r.id, STOCK_MODEL, 1, 1, r.gpus_per_node * r.nodes.len() as u32, &r.gpu_type, r.remaining_s));
        }
        for p in &self.pending {
            trace.push(tj(&p.id, p.model.as_deref().unwrap_or(STOCK_MODEL), p.iters, p.batch, p.gpus, &p.gpu_type, p.limit_s));
        }
        trace.push(tj(NEW_JOB_ID, &job.model, job.iters, job.batch, job.gpus, &job.gpu_type, 0.0));
        let new = trace.len() - 1;
        let cfg = SimConfig { knowledge: "estimator (prediction)".into(), ..Default::default() };
        let mut sim = Sim::new(cfg, ClusterState::new(&spec), &trace, times);
        for (i, r) in self.running.iter().enumerate() {
            let idx: Vec<usize> = r.nodes.iter().filter_map(|n| self.nodes.iter().position(|x| &x.name == n && x.gpu_type == r.gpu_type)).collect();
            let group = at[idx[0]].0;
            let in_group: Vec<u32> = idx.iter().filter(|&&k| at[k].0 == group).map(|&k| at[k].1).collect();
            sim.seed_running(i, group, &in_group, r.gpus_per_node, r.remaining_s).map_err(|e| {
                SimError::invalid(format!("running job {}", r.id), e.to_string(), "GPUs that the snapshot's nodes have free")
            })?;
        }
        if pin {
            sim.pin_request(new);
        }
        let mut policy = CellschedPolicy::new(opts.clone())?;
        sim.run(&mut policy, None);
        let j = sim.job(new);
        Ok(match (j.first_start, j.finish) {
            (Some(s), Some(f)) => Some((s, f)),
            _ => None,
        })
    }
}

/// Job id the inserted job gets in the simulated trace.
pub const NEW_JOB_ID: &str = "(whatif)";

/// The job a what-if question asks about.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Catalog model.
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// Iterations the scheduler plans with.
    pub iters: u64,
    /// GPU type of the Cell (the requested type when pinned; a hint otherwise).
    pub gpu_type: String,
    /// GPUs of the Cell (the most the policy may give it when not pinned).
    pub gpus: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::times::LinearTimes;
    use cellsched_core::record::admin_comments_of_scontrol;

    const SINFO: &str = "a10-1|gpu:a10:4|gpu:a10:0(IDX:N/A)|idle|\n\
        a100-1|gpu:a100:4|gpu:a100:4(IDX:0-3)|allocated|\n\
        a100-2|gpu:a100:4|gpu:a100:4(IDX:0-3)|allocated|\n\
        v100-1|gpu:v100:8|gpu:v100:0(IDX:N/A)|idle|\n\
        v100-2|gpu:v100:8|gpu:v100:0(IDX:N/A)|idle|\n\
        v100-3|gpu:v100:8|gpu:v100:0(IDX:N/A)|drained|\n";

    fn squeue() -> String {
        [
            "11|R|a100-1|1|cpu=1,node=1,billing=1,gres/gpu=4,gres/gpu:a100=4|gres:gpu:a100:4|N/A|(null)|10:00|1:00|1|",
            "12|R|a100-2|1|cpu=1,node=1,gres/gpu=4,gres/gpu:a100=4|gres:gpu:4|N/A|(null)|1:00:00|0:10|5|",
            "13|PD||1|cpu=1,node=1|gres:gpu:a100:2|N/A|(null)|5:00|0:00|3|",
            "14|PD||1|cpu=1,node=1|N/A|N/A|(null)|5:00|0:00|9|",
        ]
        .join("\n")
    }

    fn comments() -> HashMap<String, String> {
        admin_comments_of_scontrol(
            "JobId=11 JobName=wrap\n   JobState=RUNNING\nJobId=12 JobName=wrap\n   AdminComment=cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.5 src=datasheet model=m batch=8 iters=200\n   Comment=cellsched: cell=v100x8x1 nodes=1 iter_s=0.001 iters=1\n",
        )
    }

    fn snap() -> Snapshot {
        let mut skipped = Vec::new();
        let nodes = parse_sinfo(SINFO, &mut skipped);
        let jobs = parse_squeue(&squeue(), &mut skipped);
        Snapshot::build(nodes, &jobs, &comments(), skipped)
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10:00"), Some(600.0));
        assert_eq!(parse_duration("1:00:00"), Some(3600.0));
        assert_eq!(parse_duration("2-01:00:05"), Some(2.0 * 86400.0 + 3605.0));
        assert_eq!(parse_duration("1-02"), Some(86400.0 + 7200.0));
        assert_eq!(parse_duration("UNLIMITED"), None);
        assert_eq!(parse_duration("NOT_SET"), None);
    }

    #[test]
    fn snapshot_reads_nodes_running_and_pending_jobs() {
        let s = snap();
        assert_eq!(s.nodes.len(), 5, "{:?}", s.nodes);
        assert!(s.skipped.iter().any(|m| m.contains("v100-3") && m.contains("drained")), "{:?}", s.skipped);
        // 11: no AdminComment: limit 600 - 60 used. 12: declared 200 x 0.5 - 10.
        assert_eq!(s.running.len(), 2);
        assert_eq!((s.running[0].remaining_s, s.running[0].remaining_from), (540.0, RemainingFrom::TimeLimit));
        assert_eq!((s.running[1].remaining_s, s.running[1].remaining_from), (90.0, RemainingFrom::Declared));
        // 14 asks for no GPUs: ignored. 13 keeps its typed request.
        assert_eq!(s.pending.len(), 1);
        assert_eq!((s.pending[0].gpu_type.as_str(), s.pending[0].gpus, s.pending[0].model.as_ref()), ("a100", 2, None));
        assert_eq!(s.free_per_node(), vec![4, 0, 0, 8, 8]);
        let short = "12|R|a100-2|1|gres/gpu:a100=4|N/A|N/A|(null)|1:00|0:10|5|";
        let s2 = Snapshot::build(s.nodes.clone(), &parse_squeue(short, &mut Vec::new()), &comments(), Vec::new());
        assert_eq!((s2.running[0].remaining_s, s2.running[0].remaining_from), (50.0, RemainingFrom::TimeLimit), "the limit ends it first");
        let mut sk = Vec::new();
        assert!(parse_squeue("12|R|a100-2|1|gres/gpu:a100=4|1:00:00|0:10|5|", &mut sk).is_empty());
        assert!(sk[0].contains("expected 11 fields"), "{sk:?}");
        // The Comment's forged decision was never read.
        assert_eq!(DlRecord::parse(&comments()["12"]).unwrap().iters, Some(200));
    }

    #[test]
    fn predictions_follow_the_busy_and_free_types() {
        let s = snap();
        // m: 1 s/iter on one a100, 2 s/iter on one v100 (linear in GPUs).
        let mut t = TimeCache::new(Box::new(LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0)));
        let job = |ty: &str, gpus| NewJob { model: "m".into(), batch: 8, iters: 100, gpu_type: ty.into(), gpus };
        // Requested GPU counts at most (the sizing cap of the plugins' defaults would grow the job).
        let o = CellschedOptions { max_gpu_factor: 1.0, ..Default::default() };
        // v100x4: free now, 100 x 0.5 s.
        assert_eq!(s.predict(&mut t, &job("v100", 4), true, &o).unwrap(), Some((0.0, 50.0)));
        // a100x4: the first a100 node frees up when job 12 is predicted to end (90 s);
        // job 13 (2 a100 GPUs, limit 300 s) waits ahead of it in the queue but
        // A-SRPT runs the shorter new job (25 s) first.
        let (start, finish) = s.predict(&mut t, &job("a100", 4), true, &o).unwrap().unwrap();
        assert_eq!((start, finish), (90.0, 115.0));
        // Unpinned with up to 4 GPUs, cellsched takes the free v100 now.
        assert_eq!(s.predict(&mut t, &job("a100", 4), false, &o).unwrap(), Some((0.0, 50.0)));
        // A type the cluster lacks can never run.
        assert_eq!(s.predict(&mut t, &job("h100", 4), true, &o).unwrap(), None);
    }

    #[test]
    fn a_running_job_on_gpus_the_nodes_lack_is_an_error() {
        let mut s = snap();
        s.running[0].gpus_per_node = 8;
        let mut t = TimeCache::new(Box::new(LinearTimes::new(0.0).with("m", "a100", 1.0)));
        let j = NewJob { model: "m".into(), batch: 8, iters: 1, gpu_type: "a100".into(), gpus: 1 };
        let e = s.predict(&mut t, &j, true, &CellschedOptions::default()).unwrap_err().to_string();
        assert!(e.contains("running job 11"), "{e}");
    }
}

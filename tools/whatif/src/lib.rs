//! cellsched-whatif: where and when would a DL job run if submitted now?
//! The logic of `cellsched whatif` (the CLI only parses and prints).
//!
//! Reads the live cluster with Slurm's own commands (`sinfo`, `squeue` with
//! explicit formats, AdminComments from `scontrol show job`), builds a
//! [`Snapshot`], and for each feasible Cell of the job (the best few per GPU
//! type, `Estimator::rank_cells`) runs the simulator forward with the job
//! pinned to that Cell: predicted start, finish, seconds per iteration and
//! GPU-hours. The Cell cellsched would choose now is job_submit/cellsched's
//! own decision (`cellsched_core::placement::place` on the snapshot): the
//! Cell sized by marginal value in the free GPUs of the allowed types (with
//! an untyped GPU count: the fastest of exactly that count), else the one
//! of the whole cluster, where it waits.
//! Every number is a prediction (estimator + declared iterations).
use cellsched_core::config::{resolve_config_path, Config, PlacementConfig, CONFIG_ENV};
use cellsched_core::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use cellsched_core::model::{Precision, Runtime};
use cellsched_core::options::DlOptions;
use cellsched_core::placement::{self, DlRequest, GpuRequest, NodeGpus, Outcome, SubmitRequest};
use cellsched_core::profile_db::ProfileDb;
use cellsched_sim::core_times::CoreTimes;
use cellsched_sim::policy::CellschedOptions;
use cellsched_sim::snapshot::{self, NewJob, Snapshot};
use cellsched_sim::TimeCache;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

mod error;
pub use error::WhatifError;

/// Results of this crate.
pub type Result<T> = std::result::Result<T, WhatifError>;

/// The job asked about.
#[derive(Debug, Clone)]
pub struct Request {
    /// Model name or alias.
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// Declared iterations.
    pub iters: Option<u64>,
    /// Typed request: (type, GPUs in all).
    pub typed: Option<(String, u32)>,
    /// Untyped GPU count in all.
    pub want_gpus: Option<u32>,
    /// `--dl-runtime`: the runtime the job trains with (None: the model's).
    pub runtime: Option<Runtime>,
    /// `--dl-precision`: the job's training precision (None: the model's).
    pub precision: Option<Precision>,
}

/// One feasible Cell with its predictions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The estimate (Cell, nodes, plan, predicted seconds per iteration, source).
    pub estimate: Estimate,
    /// Predicted start, seconds from now (`None`: never runs in the simulation).
    pub start_s: Option<f64>,
    /// Predicted finish, seconds from now (only with declared iterations).
    pub finish_s: Option<f64>,
    /// Predicted GPU-hours (only with declared iterations).
    pub gpu_hours: Option<f64>,
    /// cellsched would choose this Cell now.
    pub chosen: bool,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// Canonical model name.
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// Declared iterations.
    pub iters: Option<u64>,
    /// Iterations the simulation planned with (declared, else the ordering default).
    pub planned_iters: u64,
    /// Cells, fastest first.
    pub rows: Vec<Row>,
    /// Why cellsched chooses the chosen Cell (or why none).
    pub why: String,
    /// Running and pending jobs in the snapshot.
    pub running: usize,
    /// Pending jobs in the snapshot.
    pub pending: usize,
    /// What the numbers are.
    pub knowledge: String,
    /// Jobs or nodes the snapshot left out.
    pub skipped: Vec<String>,
}

/// The snapshot's nodes as job_submit/cellsched sees them (free = not held by a running job).
pub fn node_gpus(snap: &Snapshot) -> Vec<NodeGpus> {
    snap.nodes
        .iter()
        .zip(snap.free_per_node())
        .map(|(n, free)| NodeGpus { node: n.name.clone(), gpu_type: n.gpu_type.clone(), total: n.gpus, free })
        .collect()
}

/// Free (or, with `capacity`, all) GPUs per allowed type, one entry per
/// node: job_submit/cellsched's own `placement::offers`.
pub fn offers(snap: &Snapshot, cfg: &PlacementConfig, capacity: bool) -> Vec<CellOffer> {
    placement::offers(&node_gpus(snap), cfg, capacity)
}

/// The Cell job_submit/cellsched would choose now and why: its own
/// `placement::place` on the snapshot, or why none.
pub fn choose(snap: &Snapshot, est: &Estimator, cfg: &PlacementConfig, job: &JobSpec, req: &Request) -> (Option<Estimate>, String) {
    let opts = DlOptions { model: Some(job.model.name.clone()), batch: Some(job.global_batch), iters: req.iters, runtime: req.runtime, precision: req.precision, ..DlOptions::NONE };
    let per_job = match (&req.typed, req.want_gpus) {
        (Some((t, n)), _) => Some(GpuRequest { gpu_type: Some(t.clone()), count: u64::from(*n) }),
        (None, Some(n)) => Some(GpuRequest { gpu_type: None, count: u64::from(n) }),
        (None, None) => None,
    };
    let dl = DlRequest { opts, job: job.clone(), per_node: None, per_job };
    match placement::place_request(&SubmitRequest::default(), &dl, &node_gpus(snap), cfg, est, None, None) {
        Outcome::Place(p) => (Some(p.estimate), p.why),
        Outcome::Stock(why) => (None, format!("cellsched leaves the job as submitted: {why}")),
        Outcome::Honour(why, _) => (None, format!("cellsched cannot decide ({why}): the job keeps its own request")),
        Outcome::Reject(msg) => (None, format!("sbatch would refuse it: {msg}")),
    }
}

fn same_shape(a: &Estimate, b: &Estimate) -> bool {
    a.cell.gpu_type == b.cell.gpu_type && a.cell.gpus == b.cell.gpus && a.nodes == b.nodes
}

/// The job as `req` describes it: its model resolved in `est`'s catalog and
/// trained as `--dl-runtime`/`--dl-precision` say (placement's rule,
/// [`DlOptions::trained_as`]). The simulation's estimator must know the
/// model under that name ([`Estimator::with_model`]).
pub fn job(est: &Estimator, req: &Request) -> Result<JobSpec> {
    let model = est.model_catalog().resolve(&req.model).map_err(WhatifError::Core)?;
    let training = DlOptions { runtime: req.runtime, precision: req.precision, ..DlOptions::NONE };
    Ok(JobSpec { model: training.trained_as(model), global_batch: req.batch })
}

/// Answers the question on a snapshot: `est` ranks and chooses, `times`
/// (the same knowledge, knowing [`job`]'s model) times the simulation.
pub fn answer(snap: &Snapshot, est: &Estimator, times: &mut TimeCache, cfg: &Config, req: &Request, per_type: usize) -> Result<Answer> {
    let job = job(est, req)?;
    let (chosen, mut why) = choose(snap, est, &cfg.placement, &job, req);
    // With the wait test, job_submit places a job whose best free Cell is
    // slower on its Cell of the whole cluster; its next re-planning pass
    // moves it to the free one if waiting is predicted to lose (decided
    // below on the simulated start of the chosen Cell).
    let free_choice = (cfg.placement.replan && cfg.placement.replan_wait_test)
        .then(|| choose(snap, est, &PlacementConfig { replan_wait_test: false, ..cfg.placement.clone() }, &job, req).0)
        .flatten()
        .filter(|f| chosen.as_ref().is_some_and(|c| !same_shape(c, f) && f.iter_time_s > c.iter_time_s));
    // Candidates: the whole cluster's Cells (one per shape, fastest plan), best few per type.
    let mut cands: Vec<Estimate> = Vec::new();
    if req.typed.is_none() {
        let max = cfg.placement.max_gpus.max(req.want_gpus.unwrap_or(0));
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for e in est.rank_cells(&job, &offers(snap, &cfg.placement, true), max) {
            if req.want_gpus.is_some_and(|n| e.cell.gpus != n) || cands.iter().any(|c| same_shape(c, &e)) {
                continue;
            }
            let k = per.entry(e.cell.gpu_type.clone()).or_default();
            if *k < per_type {
                *k += 1;
                cands.push(e);
            }
        }
    }
    if let Some(f) = &free_choice {
        if !cands.iter().any(|e| same_shape(e, f)) {
            cands.push(f.clone());
        }
    }
    if let Some(c) = &chosen {
        if !cands.iter().any(|e| same_shape(e, c)) {
            cands.push(c.clone());
        }
    }
    // Iterations the simulation plans with: declared, else what the ordering assumes.
    let planned_iters = |iter_s: f64| match req.iters {
        Some(n) => n,
        None => (cfg.ordering.default_remaining_s / iter_s.max(1e-9)).ceil().max(1.0) as u64,
    };
    // The forecast follows job_submit's re-planning rule: a pending job moves
    // to a free Cell within replan_max_slowdown, with the wait test when on.
    let mut opts = CellschedOptions {
        replan: cfg.placement.replan,
        max_slowdown: cfg.placement.replan_max_slowdown,
        wait_test: cfg.placement.replan_wait_test,
        declared: cfg.declared.clone(),
        ..Default::default()
    };
    opts.asrpt.aging_bound_s = cfg.ordering.aging_bound_s;
    let mut rows = Vec::with_capacity(cands.len());
    for e in cands {
        let iters = planned_iters(e.iter_time_s);
        let nj = NewJob { model: job.model.name.clone(), batch: req.batch, iters, gpu_type: e.cell.gpu_type.clone(), gpus: e.cell.gpus };
        let pred = snap.predict(times, &nj, true, &opts).map_err(WhatifError::Sim)?;
        let is_chosen = chosen.as_ref().is_some_and(|c| same_shape(c, &e));
        rows.push(Row {
            start_s: pred.map(|p| p.0),
            finish_s: pred.filter(|_| req.iters.is_some()).map(|p| p.1),
            gpu_hours: req.iters.map(|n| n as f64 * e.iter_time_s * e.cell.gpus as f64 / 3600.0),
            chosen: is_chosen,
            estimate: e,
        });
    }
    if let (Some(f), Some(c)) = (free_choice, chosen) {
        let start_of = |e: &Estimate| rows.iter().find(|r| same_shape(&r.estimate, e)).and_then(|r| r.start_s);
        // The re-planning pass's test (core), with the simulated start of the chosen Cell as the forecast.
        let wait = placement::PlanWait {
            plan_free_at_s: 0.0,
            queue_ahead_s: start_of(&c).unwrap_or(f64::INFINITY),
            waited_s: 0.0,
            rem_plan_s: planned_iters(c.iter_time_s) as f64 * c.iter_time_s,
        };
        // A new job has waited nothing, so the waited-time correction (and
        // with it whether the free Cell's type is contended) changes nothing.
        let takes = wait.takes_slower_cell(0.0, (f.cell.gpus, f.iter_time_s), (c.cell.gpus, c.iter_time_s), false, true);
        if f.iter_time_s <= c.iter_time_s * cfg.placement.replan_max_slowdown && takes {
            why = format!(
                "placed on {} at submit (the best Cell of the whole cluster, busy now); its first re-planning pass moves it to {} in the GPUs free now, slower per iteration but predicted to finish first (placement.replan_wait_test)",
                c.cell, f.cell
            );
            for r in rows.iter_mut() {
                r.chosen = same_shape(&r.estimate, &f);
            }
        }
    }
    rows.sort_by(|a, b| a.estimate.iter_time_s.total_cmp(&b.estimate.iter_time_s));
    let planned = rows.iter().find(|r| r.chosen).or(rows.first()).map_or(0, |r| planned_iters(r.estimate.iter_time_s));
    let knowledge = match req.iters {
        Some(n) => format!("PREDICTIONS: estimator seconds per iteration x {n} declared iterations; running jobs end after their declared work or at their time limit, whichever comes first; pending jobs in priority order, A-SRPT as the plugins run it"),
        None => format!("PREDICTIONS: estimator seconds per iteration; no --dl-iters, so the queue position assumes {} s of work (ordering.default_remaining_s) and no finish is predicted", cfg.ordering.default_remaining_s),
    };
    Ok(Answer {
        model: job.model.name.clone(),
        batch: req.batch,
        iters: req.iters,
        planned_iters: planned,
        rows,
        why,
        running: snap.running.len(),
        pending: snap.pending.len(),
        knowledge,
        skipped: snap.skipped.clone(),
    })
}

/// The plugins' config and an estimator built from it as job_submit/cellsched builds it.
pub fn load_config(path: Option<&PathBuf>) -> Result<(Config, String)> {
    let path = match path {
        Some(p) => p.clone(),
        None => resolve_config_path(None, std::env::var(CONFIG_ENV).ok().as_deref(), std::env::var("SLURM_CONF").ok().as_deref()),
    };
    if !path.exists() {
        return Ok((Config::default(), format!("{} not found: built-in defaults", path.display())));
    }
    Ok((Config::load(&path).map_err(WhatifError::Core)?, path.display().to_string()))
}

/// An estimator from the config's GPU catalog and profile DB.
pub fn estimator(cfg: &Config) -> Result<(Estimator, Option<ProfileDb>)> {
    let a = Estimator::from_config(&cfg.estimator, None);
    if let Some(p) = a.problems.first() {
        return Err(WhatifError::Estimator(p.clone()));
    }
    Ok((a.estimator, a.db))
}

fn slurm(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| WhatifError::Slurm { command: prog.to_string(), msg: format!("cannot run it ({e}); is Slurm on PATH and SLURM_CONF set?") })?;
    if !out.status.success() {
        return Err(WhatifError::Slurm { command: format!("{prog} {}", args.join(" ")), msg: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads the live cluster into a snapshot.
pub fn read_cluster(partition: Option<&str>) -> Result<Snapshot> {
    let mut sinfo = vec!["-N", "-h", "-O", snapshot::SINFO_FORMAT];
    let mut squeue = vec!["-h", "-t", "PD,R,CG,S", "-O", snapshot::SQUEUE_FORMAT];
    if let Some(p) = partition {
        sinfo.extend(["-p", p]);
        squeue.extend(["-p", p]);
    }
    let mut skipped = Vec::new();
    let nodes = snapshot::parse_sinfo(&slurm("sinfo", &sinfo)?, &mut skipped);
    let jobs = snapshot::parse_squeue(&slurm("squeue", &squeue)?, &mut skipped);
    // AdminComment (written by job_submit/cellsched) is on its own line of
    // the multi-line form; the user's Comment is never read.
    let comments = if jobs.is_empty() { Default::default() } else { cellsched_core::record::admin_comments_of_scontrol(&slurm("scontrol", &["show", "job"])?) };
    Ok(Snapshot::build(nodes, &jobs, &comments, skipped))
}

/// A synthetic snapshot for the benchmark: 8 a100 nodes (4 GPUs), 8 v100
/// nodes (8), 4 a10 nodes (4), every GPU held by a running job, and
/// `pending` waiting jobs (two thirds DL jobs of catalog models, the rest
/// plain GPU jobs), seeded.
pub fn synthetic(pending: usize, seed: u64) -> Snapshot {
    use cellsched_sim::rng::Rng;
    use cellsched_sim::snapshot::{RemainingFrom, SnapNode, SnapPending, SnapRunning};
    let mut rng = Rng::new(seed);
    let mut nodes = Vec::new();
    for (t, n, g) in [("a100", 8, 4), ("v100", 8, 8), ("a10", 4, 4)] {
        for k in 1..=n {
            nodes.push(SnapNode { name: format!("{t}-{k}"), gpu_type: t.into(), gpus: g });
        }
    }
    let running = nodes
        .iter()
        .map(|n| SnapRunning {
            id: format!("r-{}", n.name),
            nodes: vec![n.name.clone()],
            gpu_type: n.gpu_type.clone(),
            gpus_per_node: n.gpus,
            remaining_s: rng.range(60.0, 7200.0),
            remaining_from: RemainingFrom::Declared,
        })
        .collect();
    let models = ["gpt__125M", "gpt__350M", "bert__340M", "gpt__1.3B"];
    let types = [("a100", 4u32), ("v100", 8), ("a10", 4)];
    let pending = (0..pending)
        .map(|i| {
            let (t, per) = types[(rng.next_u64() % 3) as usize];
            let gpus = [1, 2, 4, 8][(rng.next_u64() % 4) as usize].min(per * 2);
            let dl = i % 3 != 2;
            SnapPending {
                id: format!("{}", 1000 + i),
                model: dl.then(|| models[(rng.next_u64() % models.len() as u64) as usize].to_string()),
                batch: [16, 32, 64][(rng.next_u64() % 3) as usize],
                iters: if dl { 100 + rng.next_u64() % 20_000 } else { 1 },
                gpu_type: t.into(),
                gpus,
                limit_s: rng.range(600.0, 86400.0),
            }
        })
        .collect();
    Snapshot { nodes, running, pending, skipped: Vec::new() }
}

/// Wall-clock seconds of [`answer`] on a [`synthetic`] snapshot of
/// `pending` waiting jobs (built-in estimator, default config), one per run,
/// sorted, with the snapshot and the last answer: what `cellsched bench
/// whatif` prints.
pub fn time_answers(pending: usize, runs: usize) -> Result<(Vec<f64>, Snapshot, Answer)> {
    let snap = synthetic(pending, 1);
    let cfg = Config::default();
    let req = Request { model: "gpt__1.3B".into(), batch: 32, iters: Some(5000), typed: None, want_gpus: None, runtime: None, precision: None };
    let mut times_s = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        // A fresh estimator and cache each run: nothing is warm from the previous one.
        let (est, db) = estimator(&cfg)?;
        let (est2, _) = estimator(&cfg)?;
        let mut times = TimeCache::new(Box::new(CoreTimes::from_estimator(est2, db)));
        let t0 = std::time::Instant::now();
        let a = answer(&snap, &est, &mut times, &cfg, &req, 3)?;
        times_s.push(t0.elapsed().as_secs_f64());
        last = Some(a);
    }
    times_s.sort_by(f64::total_cmp);
    Ok((times_s, snap, last.expect("at least one run")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::gpu::GpuCatalog;
    use cellsched_core::model::ModelCatalog;
    use cellsched_sim::snapshot::{SnapNode, SnapPending, SnapRunning, RemainingFrom};

    fn node(name: &str, t: &str, g: u32) -> SnapNode {
        SnapNode { name: name.into(), gpu_type: t.into(), gpus: g }
    }

    /// The local test cluster with both a100 nodes busy for 10 minutes.
    fn busy_a100() -> Snapshot {
        let nodes = vec![node("a100-1", "a100", 4), node("a100-2", "a100", 4), node("v100-1", "v100", 8), node("v100-2", "v100", 8), node("a10-1", "a10", 4)];
        let running = ["a100-1", "a100-2"]
            .iter()
            .enumerate()
            .map(|(i, n)| SnapRunning { id: format!("{}", i + 1), nodes: vec![n.to_string()], gpu_type: "a100".into(), gpus_per_node: 4, remaining_s: 600.0, remaining_from: RemainingFrom::TimeLimit })
            .collect();
        Snapshot { nodes, running, pending: Vec::new(), skipped: Vec::new() }
    }

    fn est() -> Estimator {
        Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
    }

    fn times() -> TimeCache {
        TimeCache::new(Box::new(CoreTimes::from_estimator(est(), None)))
    }

    fn req(gpus: Option<u32>) -> Request {
        Request { model: "gpt__125M".into(), batch: 16, iters: Some(2000), typed: None, want_gpus: gpus, runtime: None, precision: None }
    }

    #[test]
    fn busy_a100_start_later_than_free_v100_and_the_choice_is_a_free_cell() {
        let s = busy_a100();
        let a = answer(&s, &est(), &mut times(), &Config::default(), &req(Some(4)), 3).unwrap();
        let on = |t: &str| a.rows.iter().find(|r| r.estimate.cell.gpu_type == t).unwrap_or_else(|| panic!("no {t} row: {a:?}"));
        let (a100, v100) = (on("a100"), on("v100"));
        assert!(a100.start_s.unwrap() >= 600.0 - 1e-6, "{a100:?}");
        assert_eq!(v100.start_s, Some(0.0));
        let chosen = a.rows.iter().find(|r| r.chosen).expect("a chosen Cell");
        assert_ne!(chosen.estimate.cell.gpu_type, "a100", "a100 is busy: {a:?}");
        assert_eq!(chosen.estimate.cell.gpus, 4);
        assert!(a.why.contains("free now"), "{}", a.why);
        // Waiting 600 s for the a100s loses against the v100s' slower 2000
        // iterations: placed on a100 at submit, moved by re-planning.
        assert!(a.why.contains("re-planning pass moves it"), "{}", a.why);
        // Much more work: the v100s' loss outgrows the wait, and it waits for the a100s.
        let long = Request { iters: Some(200_000), ..req(Some(4)) };
        let al = answer(&s, &est(), &mut times(), &Config::default(), &long, 3).unwrap();
        let chosen_l = al.rows.iter().find(|r| r.chosen).expect("a chosen Cell");
        assert_eq!(chosen_l.estimate.cell.gpu_type, "a100", "{al:?}");
        assert!(al.why.contains("replan_wait_test"), "{}", al.why);
        // Finish = start + iterations x predicted seconds per iteration; GPU-hours likewise.
        for r in &a.rows {
            let (s, f) = (r.start_s.unwrap(), r.finish_s.unwrap());
            assert!((f - s - 2000.0 * r.estimate.iter_time_s).abs() < 1e-6 * f.max(1.0), "{r:?}");
            assert!((r.gpu_hours.unwrap() - 2000.0 * r.estimate.iter_time_s * 4.0 / 3600.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_choice_matches_the_plugin_rule_and_waits_when_nothing_is_free() {
        let mut s = busy_a100();
        let (e, cfg) = (est(), PlacementConfig::default());
        let job = JobSpec { model: ModelCatalog::builtin().resolve("gpt__125M").unwrap(), global_batch: 16 };
        // The plugin's rule at submit: the free offers are slower than the
        // whole cluster's choice, so that one (the wait test; re-planning
        // moves the job later if waiting loses, see `answer`).
        let (c, why) = choose(&s, &e, &cfg, &job, &req(None));
        let whole = e.rank_cells(&job, &offers(&s, &cfg, true), cfg.max_gpus);
        assert_eq!(c.unwrap(), whole[cellsched_core::placement::SizingRule::from_config(&cfg).choose(&whole, None).unwrap()]);
        assert!(why.contains("replan_wait_test"), "{why}");
        // Without the wait test: the sizing choice on the free offers.
        let no_wait = PlacementConfig { replan_wait_test: false, ..cfg.clone() };
        let (c, _) = choose(&s, &e, &no_wait, &job, &req(None));
        let ranked = e.rank_cells(&job, &offers(&s, &no_wait, false), cfg.max_gpus);
        assert_eq!(c.unwrap(), ranked[cellsched_core::placement::SizingRule::from_config(&no_wait).choose(&ranked, None).unwrap()]);
        // Everything busy: the best Cell of the whole cluster, with the reason.
        for n in ["v100-1", "v100-2", "a10-1"] {
            let g = s.nodes.iter().find(|x| x.name == n).unwrap().gpus;
            let t = s.nodes.iter().find(|x| x.name == n).unwrap().gpu_type.clone();
            s.running.push(SnapRunning { id: n.into(), nodes: vec![n.into()], gpu_type: t, gpus_per_node: g, remaining_s: 60.0, remaining_from: RemainingFrom::Declared });
        }
        let (c, why) = choose(&s, &e, &cfg, &job, &req(None));
        let ranked = e.rank_cells(&job, &offers(&s, &cfg, true), cfg.max_gpus);
        assert_eq!(c.unwrap(), ranked[cellsched_core::placement::SizingRule::from_config(&cfg).choose(&ranked, None).unwrap()]);
        assert!(why.contains("waits"), "{why}");
        // A typed request pins the Cell.
        let pinned = Request { typed: Some(("v100".into(), 8)), ..req(None) };
        let a = answer(&s, &e, &mut times(), &Config::default(), &pinned, 3).unwrap();
        assert_eq!(a.rows.len(), 1);
        assert_eq!(a.rows[0].estimate.cell.to_string(), "v100x8x1");
        assert!(a.rows[0].chosen && a.rows[0].start_s.unwrap() >= 60.0 - 1e-6, "{a:?}");
    }

    #[test]
    fn the_queue_ahead_delays_the_start_in_a_srpt_order() {
        let v100x8 = |iters| Request { typed: Some(("v100".into(), 8)), iters: Some(iters), ..req(None) };
        let mut s = busy_a100();
        let a0 = answer(&s, &est(), &mut times(), &Config::default(), &v100x8(200_000), 3).unwrap();
        assert_eq!(a0.rows[0].start_s, Some(0.0));
        let work = a0.rows[0].finish_s.unwrap();
        assert!(work > 60.0, "the test needs a job longer than the queued ones: {work}");
        // Two shorter jobs (typed, not DL: timed by their limit) wait for
        // v100: A-SRPT runs them first, on both nodes, so the job waits 60 s.
        for id in ["7", "8"] {
            s.pending.push(SnapPending { id: id.into(), model: None, batch: 1, iters: 1, gpu_type: "v100".into(), gpus: 8, limit_s: 60.0 });
        }
        let a = answer(&s, &est(), &mut times(), &Config::default(), &v100x8(200_000), 3).unwrap();
        assert_eq!(a.rows[0].start_s, Some(60.0), "{a:?}");
        // Longer queued jobs go after it: it starts now.
        for p in &mut s.pending {
            p.limit_s = 100.0 * work;
        }
        let a = answer(&s, &est(), &mut times(), &Config::default(), &v100x8(200_000), 3).unwrap();
        assert_eq!(a.rows[0].start_s, Some(0.0), "{a:?}");
    }

    /// `--dl-precision`/`--dl-runtime` reach the estimate: the same job in
    /// fp32 is slower on every Cell than in the catalog's fp16, a DDP job
    /// gets only data-parallel plans, and the answer names the job's own
    /// model description.
    #[test]
    fn training_options_change_the_estimates() {
        let s = busy_a100();
        let base = answer(&s, &est(), &mut times(), &Config::default(), &req(Some(4)), 3).unwrap();
        let fp32 = Request { precision: Some(Precision::Fp32), runtime: Some(Runtime::Ddp), ..req(Some(4)) };
        let mut sim = TimeCache::new(Box::new(CoreTimes::from_estimator(est().with_model(job(&est(), &fp32).unwrap().model), None)));
        let a = answer(&s, &est(), &mut sim, &Config::default(), &fp32, 3).unwrap();
        assert!(a.model.starts_with("user:gpt__125M@"), "{}", a.model);
        assert!(a.rows.iter().any(|r| r.start_s == Some(0.0)), "the simulation times the described job: {a:?}");
        for r in &a.rows {
            let e = &r.estimate;
            assert!(e.plan.tp == 1 && e.plan.pp == 1 && e.plan.zero_stage == 0, "DDP runs data parallel only: {e:?}");
            if let Some(b) = base.rows.iter().find(|b| same_shape(&b.estimate, e)) {
                assert!(e.iter_time_s > b.estimate.iter_time_s, "{e:?} vs {:?}", b.estimate);
            }
        }
    }

    #[test]
    fn synthetic_queue_is_answered_and_queues_delay_every_cell() {
        let s = synthetic(300, 7);
        assert_eq!(s.pending.len(), 300);
        let r = Request { model: "gpt__1.3B".into(), batch: 32, iters: Some(5000), typed: None, want_gpus: None, runtime: None, precision: None };
        let a = answer(&s, &est(), &mut times(), &Config::default(), &r, 2).unwrap();
        assert!(a.rows.len() >= 3, "{a:?}");
        // Every GPU is busy: nothing starts now.
        assert!(a.rows.iter().all(|r| r.start_s.is_some_and(|t| t > 0.0)), "{a:?}");
        assert!(a.why.contains("waits"), "{}", a.why);
        // The queue ahead is simulated: without it every Cell starts no later, and some sooner.
        let empty = Snapshot { pending: Vec::new(), ..s.clone() };
        let b = answer(&empty, &est(), &mut times(), &Config::default(), &r, 2).unwrap();
        let start = |a: &Answer, c: &Estimate| a.rows.iter().find(|r| same_shape(&r.estimate, c)).and_then(|r| r.start_s).unwrap();
        assert!(b.rows.iter().all(|r| start(&b, &r.estimate) <= start(&a, &r.estimate) + 1e-6));
        assert!(b.rows.iter().any(|r| start(&b, &r.estimate) + 1.0 < start(&a, &r.estimate)), "{a:?} vs {b:?}");
    }

}

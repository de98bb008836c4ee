use super::*;
use crate::gpu::GpuCatalog;
use crate::model::ModelCatalog;
use crate::placement::node_gpus;

fn est() -> Estimator {
    Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
}

fn spec() -> JobSpec {
    JobSpec { model: ModelCatalog::builtin().resolve("gpt__350M").unwrap(), global_batch: 32 }
}

/// 2 × a100 (4 GPUs), 2 × v100 (8 GPUs); `used` GPUs per node.
fn cluster(used: &[(&str, u32)]) -> Vec<NodeGpus> {
    [("a100-1", "a100", 4), ("a100-2", "a100", 4), ("v100-1", "v100", 8), ("v100-2", "v100", 8)]
        .iter()
        .flat_map(|(n, t, c)| {
            let u = used.iter().find(|(x, _)| x == n).map(|(_, u)| *u).unwrap_or(0);
            node_gpus(n, Some(&format!("gpu:{t}:{c}")), Some(&format!("gpu:{t}:{u}")), true)
        })
        .collect()
}

/// The estimate of `spec()` on `gpus` a100s on one node.
fn on_a100(e: &Estimator, gpus: u32) -> Decision {
    let offers = placement::offers(&cluster(&[]), &PlacementConfig { allowed_gpu_types: vec!["a100".into()], ..Default::default() }, false);
    e.rank_cells(&spec(), &offers, 16).into_iter().find(|x| x.cell.gpus == gpus && x.nodes == 1).expect("an a100 Cell").to_decision()
}

const NOW: i64 = 1_800_000_000;

fn running(id: u32, d: Decision, node: &str, remaining_s: f64) -> RunningElastic {
    let cfg = ElasticConfig::default();
    let record = DlRecord { elastic: Some(ElasticSignal::USR1), iters: Some(100_000), limit_min: Some(9_999), ..DlRecord::new(d) };
    let cost = RestartCost::of(&record, &spec(), &cfg);
    RunningElastic { id, record, job: spec(), features: Some("ib".into()), nodes: vec![node.into()], started_at: NOW - 3_600, remaining_s, cost }
}

fn waiting(id: u32, d: Decision, run_s: f64) -> WaitingJob {
    WaitingJob { id, decision: d, run_s, wait_s: None }
}

fn run(r: &[RunningElastic], w: &[WaitingJob], nodes: &[NodeGpus], cfg: &ElasticConfig) -> Vec<Reconfig> {
    let e = est();
    let placement = PlacementConfig::default();
    let declared = DeclaredConfig::default();
    let mut chooser = PlacementChooser { est: &e, ranks: None, placement: &placement };
    decide(r, w, nodes, &DecideContext { cfg, placement: &placement, declared: &declared, now: NOW }, &mut chooser)
}

#[test]
fn a_long_job_on_one_gpu_grows_into_idle_gpus_within_its_bounds() {
    let e = est();
    let d = on_a100(&e, 1);
    let r = running(1, d.clone(), "a100-1", 200_000.0);
    let nodes = cluster(&[("a100-1", 1)]);
    let cfg = ElasticConfig::default();
    let out = run(std::slice::from_ref(&r), &[], &nodes, &cfg);
    assert_eq!(out.len(), 1, "{out:?}");
    let Reconfig::Grow { id, to, gain_s } = &out[0] else { panic!("not a grow: {out:?}") };
    assert_eq!(*id, 1);
    assert!(to.to.cell.gpus > 1 && to.to.iter_time_s < d.iter_s, "{to:?}");
    assert!(*gain_s >= cfg.min_gain * r.cost.total_s());
    assert_eq!(to.gres, format!("gpu:{}", to.to.gpus_per_node));
    assert_eq!(to.features, format!("ib&{}", to.to.cell.gpu_type));
    // The record after it: new decision, the reconfiguration counted, the opt-in kept.
    let rec = DlRecord::parse(&out[0].admin_comment()).unwrap();
    assert_eq!((rec.decision.cell.clone(), rec.restarts, rec.reconf_at, rec.elastic), (to.to.cell.clone(), 1, Some(NOW), Some(ElasticSignal::USR1)));
    assert_eq!((rec.replanned_from.clone(), rec.moved_at, rec.reconfs_in_hour(NOW)), (Some(d.cell.clone()), Some(NOW), 1));
    // A short remainder does not pay for the restart.
    assert!(run(&[running(1, d.clone(), "a100-1", 60.0)], &[], &nodes, &cfg).is_empty());
    // Bounds: off, too soon after the start, too many this hour, a signal pending.
    assert!(run(std::slice::from_ref(&r), &[], &nodes, &ElasticConfig { enabled: false, ..cfg.clone() }).is_empty());
    assert!(run(&[RunningElastic { started_at: NOW - 599, ..r.clone() }], &[], &nodes, &cfg).is_empty());
    let twice = RunningElastic { record: r.record.reconfigured(NOW - 3_000).reconfigured(NOW - 2_000), ..r.clone() };
    assert!(run(std::slice::from_ref(&twice), &[], &nodes, &cfg).is_empty());
    let once = RunningElastic { record: r.record.reconfigured(NOW - 3_650), ..r.clone() };
    assert_eq!(run(std::slice::from_ref(&once), &[], &nodes, &cfg).len(), 1, "an hour-old reconfiguration no longer counts");
    let signalled = RunningElastic { record: r.record.reconfigured(NOW - 10), started_at: NOW - 1_000, ..r.clone() };
    assert!(run(std::slice::from_ref(&signalled), &[], &nodes, &cfg).is_empty(), "signal pending");
}

#[test]
fn a_grow_must_pay_with_the_new_cells_time_made_grow_margin_longer() {
    let e = est();
    let d = on_a100(&e, 1);
    let nodes = cluster(&[("a100-1", 1)]);
    let r = running(1, d.clone(), "a100-1", 200_000.0);
    let cfg = ElasticConfig { grow_margin: 0.0, ..ElasticConfig::default() };
    let Some(Reconfig::Grow { to, gain_s, .. }) = run(std::slice::from_ref(&r), &[], &nodes, &cfg).pop() else { panic!("no grow without a margin") };
    let speedup = d.iter_s / to.to.iter_time_s;
    assert!(speedup > 1.0 && gain_s > 0.0);
    // The gain is computed on the pessimistic time: lower with a margin.
    let small = ElasticConfig { grow_margin: (speedup - 1.0) / 4.0, ..cfg.clone() };
    let Some(Reconfig::Grow { gain_s: g_small, .. }) = run(std::slice::from_ref(&r), &[], &nodes, &small).pop() else { panic!("a small margin still grows") };
    let pess = to.to.iter_time_s * (1.0 + small.grow_margin);
    assert!((g_small - (r.remaining_s - r.remaining_s * pess / d.iter_s - r.cost.total_s())).abs() < 1e-6 && g_small < gain_s);
    // A margin as large as the predicted speed-up: the grow is not taken.
    let wide = ElasticConfig { grow_margin: (speedup - 1.0).min(1.0), ..cfg.clone() };
    if speedup - 1.0 <= 1.0 {
        assert!(run(std::slice::from_ref(&r), &[], &nodes, &wide).is_empty(), "speed-up {speedup} within the margin");
    }
    assert_eq!(ElasticConfig::default().grow_margin, 0.2);
}

#[test]
fn jobs_without_the_opt_in_are_never_touched() {
    let e = est();
    let d = on_a100(&e, 4);
    let mut r = running(1, on_a100(&e, 1), "a100-1", 200_000.0);
    r.record.elastic = None;
    let mut big = running(2, d.clone(), "a100-2", 200_000.0);
    big.record.elastic = None;
    let nodes = cluster(&[("a100-1", 1), ("a100-2", 4), ("v100-1", 8), ("v100-2", 8)]);
    let w = [waiting(9, d, 10.0)];
    assert!(run(&[r, big], &w, &nodes, &ElasticConfig::default()).is_empty());
}

#[test]
fn a_much_shorter_pending_job_preempts_a_long_one() {
    let e = est();
    let d = on_a100(&e, 4);
    // Every GPU busy: the long job on a100-1, others on the rest.
    let nodes = cluster(&[("a100-1", 4), ("a100-2", 4), ("v100-1", 8), ("v100-2", 8)]);
    let r = running(1, d.clone(), "a100-1", 20_000.0);
    let cfg = ElasticConfig::default();
    let out = run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 600.0)], &nodes, &cfg);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(&out[0], Reconfig::Preempt { id: 1, for_job: 7, .. }), "{out:?}");
    assert_eq!(out[0].for_job(), Some(7));
    assert!(out[0].target().is_none());
    let rec = DlRecord::parse(&out[0].admin_comment()).unwrap();
    assert_eq!((rec.decision.to_admin_comment(), rec.restarts, rec.reconf_at), (d.to_admin_comment(), 1, Some(NOW)));
    // Not much shorter (A-SRPT ratio), or preemption off: no.
    assert!(run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 10_001.0)], &nodes, &cfg).is_empty());
    assert!(run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 600.0)], &nodes, &ElasticConfig { preempt_ratio: 0.0, ..cfg.clone() }).is_empty());
    // The pending job would start soon anyway (backfill's forecast): no.
    let soon = WaitingJob { wait_s: Some(120.0), ..waiting(7, d.clone(), 600.0) };
    assert!(run(std::slice::from_ref(&r), &[soon], &nodes, &cfg).is_empty());
    // The pending job's Cell needs another type: the a100 job is not preempted for it.
    let v = WaitingJob { decision: Decision { cell: crate::Cell::new("v100", 8, 1).unwrap(), ..d.clone() }, ..waiting(8, d, 600.0) };
    assert!(run(std::slice::from_ref(&r), &[v], &nodes, &cfg).is_empty());
}

#[test]
fn a_running_job_shrinks_so_a_pending_job_can_start() {
    let e = est();
    let d = on_a100(&e, 4);
    // The elastic job holds a100-1, a100-2 has 2 GPUs free, v100s busy; the
    // pending job wants a100x4 and is long (no preemption): the running job
    // shrinks onto a100-2's two GPUs and the pending job takes a100-1.
    let nodes = cluster(&[("a100-1", 4), ("a100-2", 2), ("v100-1", 8), ("v100-2", 8)]);
    let r = running(1, d.clone(), "a100-1", 50_000.0);
    let cfg = ElasticConfig::default();
    let out = run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 40_000.0)], &nodes, &cfg);
    assert_eq!(out.len(), 1, "{out:?}");
    let Reconfig::Move { id: 1, to, for_job: Some(7), gain_s } = &out[0] else { panic!("not a move: {out:?}") };
    assert_eq!((to.to.cell.gpu_type.as_str(), to.to.cell.gpus, to.gres.as_str()), ("a100", 2, "gpu:2"));
    let slowdown = to.to.iter_time_s / d.iter_s;
    let want = 50_000.0 - r.cost.save_s - (50_000.0 * slowdown - 50_000.0 + r.cost.total_s());
    assert!((gain_s - want).abs() < 1e-6 && *gain_s >= cfg.min_gain * r.cost.total_s(), "{gain_s} vs {want}");
    // Its new time limit follows the declared iterations on the new Cell.
    assert_eq!(to.time_limit_min, crate::declared::time_bound_min(100_000, to.to.iter_time_s, &DeclaredConfig::default()));
    // A min_gain no move reaches: none.
    assert!(run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 40_000.0)], &nodes, &ElasticConfig { min_gain: 1000.0, ..cfg.clone() }).is_empty());
    // Shrinking a job with little left costs more than the pending job gains.
    assert!(run(&[running(1, d.clone(), "a100-1", 30.0)], &[waiting(7, d, 40_000.0)], &nodes, &cfg).is_empty());
}

#[test]
fn one_action_per_job_and_gpus_are_set_aside() {
    let e = est();
    let d = on_a100(&e, 4);
    let nodes = cluster(&[("a100-1", 4), ("a100-2", 4), ("v100-1", 8), ("v100-2", 8)]);
    let r = running(1, d.clone(), "a100-1", 20_000.0);
    // Two short jobs want the same GPUs: only the first (priority order) gets them.
    let out = run(std::slice::from_ref(&r), &[waiting(7, d.clone(), 600.0), waiting(8, d.clone(), 300.0)], &nodes, &ElasticConfig::default());
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].for_job(), Some(7));
    // Two running jobs, one pending job: one of them is reconfigured for it.
    let r2 = running(2, d.clone(), "a100-2", 30_000.0);
    let out = run(&[r, r2], &[waiting(7, d, 600.0)], &nodes, &ElasticConfig::default());
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].id(), 2, "the one with more time left gains most");
}

#[test]
fn growth_leaves_gpus_a_pending_job_waits_for() {
    let e = est();
    let small = on_a100(&e, 1);
    let big = on_a100(&e, 4);
    // a100-2 free, but a pending job (that cannot be helped: long, no
    // elastic job on its type to move) waits for... its own a100x4 fits
    // there and starts; the running job may then only grow on a100-1's rest.
    let nodes = cluster(&[("a100-1", 1), ("v100-1", 8), ("v100-2", 8)]);
    let r = running(1, small.clone(), "a100-1", 200_000.0);
    let out = run(std::slice::from_ref(&r), &[waiting(7, big.clone(), 40_000.0)], &nodes, &ElasticConfig::default());
    for rc in &out {
        let t = rc.target().unwrap();
        assert!(t.to.cell.gpus <= 4 && t.to.nodes == 1, "{rc:?}");
    }
    // A pending job that wants every free a100 and cannot start blocks growth on a100.
    let w = WaitingJob { decision: Decision { cell: crate::Cell::new("a100", 8, 1).unwrap(), nodes: 2, ..big }, ..waiting(8, small, 40_000.0) };
    let nodes = cluster(&[("a100-1", 1), ("a100-2", 1), ("v100-1", 8), ("v100-2", 8)]);
    let out = run(std::slice::from_ref(&r), &[w], &nodes, &ElasticConfig::default());
    assert!(out.iter().all(|rc| !matches!(rc, Reconfig::Grow { .. })), "{out:?}");
}


/// A job signalled in its current run whose action was lost (slurmctld
/// restarted) is carried through on its own record: requeued once, with
/// the restart counted; a signal of an earlier run, or a job without the
/// opt-in, is not.
#[test]
fn a_signal_interrupted_by_a_restart_is_carried_through() {
    let e = est();
    let rec = DlRecord { elastic: Some(crate::signal::ElasticSignal::USR1), reconf_at: Some(5_000), ..DlRecord::new(on_a100(&e, 1)) };
    let (action, at) = resume_after_restart(3, &rec, 4_000).expect("signalled in this run");
    assert_eq!((action.id(), at, action.kind(), action.target().is_none(), action.for_job()), (3, 5_000, "resume", true, None));
    let after = DlRecord::parse(&action.admin_comment()).expect("record");
    assert_eq!((after.restarts, after.reconf_at, after.reconfs_h.clone()), (rec.restarts + 1, Some(5_000), vec![5_000]));
    // The run that started after the signal (the requeued one) is not signalled.
    assert!(resume_after_restart(3, &rec, 5_000).is_none());
    assert!(resume_after_restart(3, &rec, 6_000).is_none());
    assert!(resume_after_restart(3, &DlRecord { elastic: None, ..rec.clone() }, 4_000).is_none());
    assert!(resume_after_restart(3, &DlRecord { reconf_at: None, ..rec }, 4_000).is_none());
}

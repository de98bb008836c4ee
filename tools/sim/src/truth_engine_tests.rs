//! Truth vs knowledge in the engine, hand-computable.
use crate::truth::*;
use crate::times::IterTimeSource;
use std::rc::Rc;
use crate::engine::{Sim, SimConfig};
use crate::testutil::{cluster, job};
use crate::policy::{self, CellschedOptions, Policy};
use crate::times::{LinearTimes, TimeCache};
use crate::{Metrics, TraceJob};

fn point(model: &str, ty: &str, t: f64) -> TruthPoint {
    TruthPoint { model: model.into(), batch: 32, gpu_type: ty.into(), nodes: 1, gpus_per_node: 1, iter_time_s: (t > 0.0).then_some(t) }
}

fn two_types() -> crate::cluster::ClusterState {
    cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 1\n")
}

/// Truth: `m` takes 1 s/iter on a100 and 2 s on v100 (one GPU each).
fn truth(missing: TruthMissing, fallback: Option<LinearTimes>) -> Truth {
    let mut t = TruthTable::default();
    t.insert(point("m", "a100", 1.0));
    t.insert(point("m", "v100", 2.0));
    Truth::new(t, fallback.map(|f| Rc::new(f) as Rc<dyn IterTimeSource>), missing)
}

fn run(p: &mut dyn Policy, jobs: &[TraceJob], knowledge: LinearTimes, truth: Option<Truth>, cfg: SimConfig) -> (Metrics, Vec<Option<f64>>, Vec<String>) {
    let mut cache = TimeCache::new(Box::new(knowledge));
    let mut sim = Sim::new(cfg, two_types(), jobs, &mut cache).with_truth(truth);
    let m = sim.run(p, None);
    let jct = sim.jobs().iter().map(|j| j.finish.map(|f| f - j.spec.submission_time)).collect();
    let planned = sim.jobs().iter().map(|j| j.planned.as_ref().map_or(String::new(), |p| p.0.clone())).collect();
    (m, jct, planned)
}

fn cfg() -> SimConfig {
    SimConfig { preempt_overhead_s: 0.0, oom_startup_s: 60.0, ..SimConfig::default() }
}

fn cellsched() -> Box<dyn Policy> {
    policy::build("cellsched", &CellschedOptions::default()).unwrap()
}

#[test]
fn wrong_knowledge_changes_decisions_not_the_clock() {
    let jobs = [job("a", 0.0, 100, 1, "a100", 0.0)];
    let right = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0);
    // A profile DB claiming v100 is 10x faster than it really is.
    let wrong = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 0.2);
    let (m, jct, plan) = run(cellsched().as_mut(), &jobs, right, Some(truth(TruthMissing::Skip, None)), cfg());
    assert_eq!((jct[0], plan[0].as_str()), (Some(100.0), "a100"));
    assert_eq!((m.truth_stats.predictions, m.truth_stats.median_ape_pct), (1, 0.0));
    let (m, jct, plan) = run(cellsched().as_mut(), &jobs, wrong.clone(), Some(truth(TruthMissing::Skip, None)), cfg());
    // The decision follows the knowledge (v100) but the job runs at v100's true speed.
    assert_eq!((jct[0], plan[0].as_str()), (Some(200.0), "v100"));
    assert!((m.truth_stats.median_ape_pct - 90.0).abs() < 1e-6 && (m.truth_stats.bias_pct + 90.0).abs() < 1e-6, "{:?}", m.truth_stats);
    // Oracle mode: the clock believes the knowledge (the upper bound it is labelled as).
    let (m, jct, _) = run(cellsched().as_mut(), &jobs, wrong, None, cfg());
    assert_eq!(jct[0], Some(20.0));
    assert!(m.truth.starts_with("oracle"), "{}", m.truth);
}

#[test]
fn every_policy_runs_on_truth_time() {
    // The knowledge is off by 3x everywhere; the clock is not.
    let k = LinearTimes::new(0.0).with("m", "a100", 3.0).with("m", "v100", 6.0);
    for name in policy::names() {
        let mut p = policy::build(name, &CellschedOptions::default()).unwrap();
        let jobs = [job("a", 0.0, 50, 1, "v100", 0.0)];
        let (m, jct, _) = run(p.as_mut(), &jobs, k.clone(), Some(truth(TruthMissing::Skip, None)), cfg());
        let want = if name == "cellsched" || name == "gavel" { 50.0 } else { 100.0 };
        assert_eq!(jct[0], Some(want), "{name}");
        assert_eq!(m.finished, 1, "{name}");
    }
}

#[test]
fn no_fit_fails_after_startup_and_requeues_without_that_cell() {
    // Knowledge: v100 is fastest. Truth: m does not fit on v100.
    let mut t = TruthTable::default();
    t.insert(point("m", "a100", 1.0));
    t.insert(point("m", "v100", 0.0));
    let truth = Truth::new(t, None, TruthMissing::Skip);
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 0.5);
    let jobs = [job("a", 0.0, 100, 1, "v100", 0.0)];
    let (m, jct, plan) = run(cellsched().as_mut(), &jobs, k.clone(), Some(truth.clone()), cfg());
    // 60 s lost on v100, then a100 at truth speed.
    assert_eq!((jct[0], plan[0].as_str()), (Some(160.0), "a100"));
    assert_eq!((m.truth_stats.oom_failures, m.truth_stats.failed_jobs), (1, 0));
    // Stock Slurm with the same request fails once and has nowhere else to go.
    let mut slurm = policy::build("slurm", &CellschedOptions::default()).unwrap();
    let (m, jct, _) = run(slurm.as_mut(), &jobs, k, Some(truth), cfg());
    assert_eq!(jct[0], None);
    assert_eq!((m.truth_stats.oom_failures, m.truth_stats.failed_jobs, m.unfinished), (1, 1, 1));
}

#[test]
fn missing_truth_estimate_is_counted_and_skip_replans() {
    // Truth knows m only on v100; knowledge says a100 is fastest.
    let mut t = TruthTable::default();
    t.insert(point("m", "v100", 2.0));
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0);
    let fb = LinearTimes::new(0.0).with("m", "a100", 1.5);
    let jobs = [job("a", 0.0, 100, 1, "a100", 0.0)];
    let est = Truth::new(t.clone(), Some(Rc::new(fb)), TruthMissing::Estimate);
    let (m, jct, _) = run(cellsched().as_mut(), &jobs, k.clone(), Some(est), cfg());
    assert_eq!(jct[0], Some(150.0));
    assert_eq!((m.truth_stats.missing_starts, m.truth_stats.missing_job_s, m.truth_stats.predictions), (1, 150.0, 0));
    let skip = Truth::new(t, None, TruthMissing::Skip);
    let (m, jct, plan) = run(cellsched().as_mut(), &jobs, k, Some(skip), cfg());
    assert_eq!((jct[0], plan[0].as_str()), (Some(200.0), "v100"));
    assert_eq!((m.truth_stats.skipped_starts, m.truth_stats.missing_starts), (1, 0));
}

#[test]
fn skipped_requests_fail_without_blocking_fifo() {
    // Truth has no v100 point: with `skip`, the v100 requests fail (no
    // other Cell for a requested-shape policy) and FIFO goes on to the rest.
    let mut t = TruthTable::default();
    t.insert(point("m", "a100", 1.0));
    let truth = Truth::new(t, None, TruthMissing::Skip);
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0);
    let jobs: Vec<TraceJob> = (0..40).map(|n| job(&n.to_string(), n as f64, 10, 1, if n % 2 == 0 { "v100" } else { "a100" }, 0.0)).collect();
    for name in policy::names() {
        let mut p = policy::build(name, &CellschedOptions::default()).unwrap();
        let (m, _, _) = run(p.as_mut(), &jobs, k.clone(), Some(truth.clone()), cfg());
        // The first refusal fails its job; later v100 requests are refused at
        // arrival by the knowledge that learnt the Cell is unusable (never_fit counts both).
        let want = if name == "cellsched" || name == "gavel" { (40, 0, 0) } else { (20, 1, 20) };
        assert_eq!((m.finished, m.truth_stats.failed_jobs, m.never_fit), want, "{name}: {:?}", m.truth_stats);
    }
}

#[test]
fn unknown_models_run_stock_under_every_policy() {
    // moe__27b is unknown to the knowledge: requested type and count, truth time.
    let mut t = TruthTable::default();
    t.insert(point("m", "a100", 1.0));
    t.insert(point("moe__27b", "v100", 3.0));
    let truth = Truth::new(t, None, TruthMissing::Skip);
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0);
    for name in policy::names() {
        let mut p = policy::build(name, &CellschedOptions::default()).unwrap();
        let mut moe = job("x", 0.0, 10, 1, "v100", 100.0);
        moe.model_name = "moe__27B".into();
        let jobs = [moe, job("a", 1.0, 10, 1, "a100", 0.0)];
        let (m, jct, _) = run(p.as_mut(), &jobs, k.clone(), Some(truth.clone()), cfg());
        assert_eq!(jct, vec![Some(30.0), Some(10.0)], "{name}");
        assert_eq!((m.truth_stats.stock_jobs, m.truth_stats.predictions), (1, 1), "{name}");
    }
}

#[test]
fn predicted_iterations_order_jobs_but_the_clock_uses_the_true_count() {
    // One a100. A holds it until 10; B (100 true iterations) and C (5)
    // wait. The predictor swaps them (B: 3, C: 50): A-SRPT runs B first,
    // at its true length: B 10..110, C 110..115.
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0);
    let jobs = [job("a", 0.0, 10, 1, "a100", 0.0), job("b", 1.0, 100, 1, "a100", 0.0), job("c", 2.0, 5, 1, "a100", 0.0)];
    let mut cache = TimeCache::new(Box::new(k));
    let one = cluster("[[group]]\ngpu_type = \"a100\"\nnodes = 1\ngpus_per_node = 1\n");
    let mut t = TruthTable::default();
    t.insert(point("m", "a100", 1.0));
    let mut sim = Sim::new(cfg(), one, &jobs, &mut cache).with_truth(Some(Truth::new(t, None, TruthMissing::Skip))).with_known_iters(&[None, Some(3.0), Some(50.0)]);
    sim.run(cellsched().as_mut(), None);
    let jct: Vec<f64> = sim.jobs().iter().map(|j| j.finish.unwrap() - j.spec.submission_time).collect();
    assert_eq!(jct, vec![10.0, 109.0, 113.0]);
}

#[test]
fn noisy_declared_iterations_change_plans_not_the_clock() {
    let k = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0);
    let jobs: Vec<TraceJob> = (0..20).map(|n| job(&n.to_string(), n as f64, 10 + n, 1, "a100", 0.0)).collect();
    let noisy = SimConfig { iter_noise: 1.0, seed: 7, ..cfg() };
    let mut cache = TimeCache::new(Box::new(k));
    let mut sim = Sim::new(noisy, two_types(), &jobs, &mut cache).with_truth(Some(truth(TruthMissing::Skip, None)));
    let m = sim.run(cellsched().as_mut(), None);
    assert_eq!(m.finished, 20);
    assert!(sim.jobs().iter().any(|j| j.iters() != j.true_iters()), "noise must change the known counts");
    // Each run lasts its true iterations at the true speed of the type it ran on.
    let runs = sim.jobs().iter().map(|j| (j.finish.unwrap() - j.first_start.unwrap()) / j.true_iters()).collect::<Vec<_>>();
    assert!(runs.iter().all(|r| (r - 1.0).abs() < 1e-9 || (r - 2.0).abs() < 1e-9), "{runs:?}");
    let k1 = crate::engine::known_iters(1000, 1.0, 7, 3);
    assert!(k1 != 1000.0 && k1 >= 1.0);
    assert_eq!(crate::engine::known_iters(1000, 0.0, 7, 3), 1000.0);
}

/// `SimConfig::launch_s`: every run holds its GPUs that much longer than
/// its work (FIFO on one a100: B waits for A's work and launch).
#[test]
fn launch_time_holds_the_gpus_beyond_the_work() {
    let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 0.0, 50, 1, "a100", 0.0)];
    let times = || LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 2.0);
    let (_, jct, _) = run(policy::build("fifo", &CellschedOptions::default()).unwrap().as_mut(), &jobs, times(), None, cfg());
    assert_eq!(jct, vec![Some(100.0), Some(150.0)]);
    let (m, jct, _) = run(policy::build("fifo", &CellschedOptions::default()).unwrap().as_mut(), &jobs, times(), None, SimConfig { launch_s: 5.0, ..cfg() });
    assert_eq!(jct, vec![Some(105.0), Some(160.0)]);
    assert!((m.gpu_hours - 160.0 / 3600.0).abs() < 1e-5, "{}", m.gpu_hours);
}

/// `learn_after_s`: the knowledge claims v100 is 10x faster than it is; the
/// first job is placed there, and once it has run 10 s its measured time is
/// knowledge: the second job, arriving later, takes the a100 (truly
/// faster). Without learning, both go to v100. Each simulation starts from
/// the knowledge as given.
#[test]
fn a_measured_run_becomes_knowledge_when_learning() {
    let jobs = [job("a", 0.0, 100, 1, "a100", 0.0), job("b", 50.0, 100, 1, "a100", 0.0)];
    let wrong = LinearTimes::new(0.0).with("m", "a100", 1.0).with("m", "v100", 0.2);
    let (_, _, plan) = run(cellsched().as_mut(), &jobs, wrong.clone(), Some(truth(TruthMissing::Skip, None)), cfg());
    assert_eq!((plan[0].as_str(), plan[1].as_str()), ("v100", "v100"));
    let learning = SimConfig { learn_after_s: Some(10.0), ..cfg() };
    let (m, jct, plan) = run(cellsched().as_mut(), &jobs, wrong.clone(), Some(truth(TruthMissing::Skip, None)), learning.clone());
    assert_eq!((plan[0].as_str(), plan[1].as_str()), ("v100", "a100"));
    assert_eq!((jct[0], jct[1]), (Some(200.0), Some(100.0)));
    assert_eq!(m.truth_stats.predictions, 2);
    // Oracle mode (no truth table): nothing to learn.
    let (_, _, plan) = run(cellsched().as_mut(), &jobs, wrong, None, learning);
    assert_eq!((plan[0].as_str(), plan[1].as_str()), ("v100", "v100"));
}

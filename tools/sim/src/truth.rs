//! The simulated clock's source of truth: measured iteration times, kept
//! apart from what the scheduler knows ([`crate::times`]).
//!
//! A truth table is a CSV with the profile DB's columns
//! `model,batch,gpu_type,nodes,gpus_per_node,iter_time_s` (extra columns
//! such as `plan` are ignored; lines starting with `#` are comments). An
//! `iter_time_s` <= 0 means the configuration was tried and does not fit in
//! memory. Decisions never read it: the engine looks up the true iteration
//! time of the GPUs a policy granted only to run the clock.
//!
//! A point the table lacks is handled per [`TruthMissing`]:
//! - `estimate`: the core estimator calibrated on the whole truth table (its
//!   measured points override exact matches, its single-GPU points calibrate
//!   the rest) stands in, and the run counts how many starts and job-seconds used it;
//! - `skip`: the Cell is not used (the start is refused at no cost and the
//!   scheduler's knowledge loses that Cell for the job's model and batch),
//!   counted.
use crate::error::SimError;
use crate::times::{CellChoice, IterTimeSource, Offer};
use std::collections::HashMap;
use std::rc::Rc;

/// What to do when truth has no point for a Cell a policy chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruthMissing {
    /// Use the estimator calibrated on the truth table, and count it.
    Estimate,
    /// Do not use the Cell (refused at no cost), and count it.
    Skip,
}

impl std::str::FromStr for TruthMissing {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s.to_ascii_lowercase().as_str() {
            "estimate" => Ok(TruthMissing::Estimate),
            "skip" => Ok(TruthMissing::Skip),
            _ => Err(SimError::invalid("--truth-missing", s, "estimate or skip")),
        }
    }
}

impl TruthMissing {
    /// Text form.
    pub fn as_str(&self) -> &'static str {
        match self {
            TruthMissing::Estimate => "estimate",
            TruthMissing::Skip => "skip",
        }
    }
}

/// One measured point of a truth table.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthPoint {
    /// Model name as written (lower-cased).
    pub model: String,
    /// Global batch.
    pub batch: u32,
    /// GPU type (lower-cased).
    pub gpu_type: String,
    /// Nodes.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// Seconds per iteration; `None`: does not fit in memory.
    pub iter_time_s: Option<f64>,
}

type Key = (String, u32, String, u32, u32);

/// Measured iteration times, by (model, batch, GPU type, nodes, GPUs per node).
#[derive(Debug, Clone, Default)]
pub struct TruthTable {
    points: Vec<TruthPoint>,
    index: HashMap<Key, Option<f64>>,
    /// Where the table came from (for labels).
    pub origin: String,
}

const COLUMNS: [&str; 6] = ["model", "batch", "gpu_type", "nodes", "gpus_per_node", "iter_time_s"];

impl TruthTable {
    /// An empty table labelled `origin`.
    pub fn new(origin: &str) -> Self {
        TruthTable { origin: origin.to_string(), ..Default::default() }
    }

    /// Parses table text; `origin` names the source in errors (file:line, field).
    pub fn parse(text: &str, origin: &str) -> Result<Self, SimError> {
        let mut rd = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let headers = rd.headers().map_err(|e| SimError::input(origin, Some(1), "header", e.to_string()))?.clone();
        let header_line = text.lines().position(|l| !l.starts_with('#')).map_or(1, |p| p + 1);
        let mut idx = [0usize; 6];
        for (i, name) in COLUMNS.iter().enumerate() {
            idx[i] = headers.iter().position(|h| h.eq_ignore_ascii_case(name)).ok_or_else(|| {
                SimError::input(origin, Some(header_line), name, format!("missing column (header must include {})", COLUMNS.join(",")))
            })?;
        }
        let mut t = TruthTable { origin: origin.to_string(), ..Default::default() };
        for rec in rd.records() {
            let rec = rec.map_err(|e| SimError::input(origin, e.position().map(|p| p.line() as usize), "record", e.to_string()))?;
            let line = rec.position().map(|p| p.line() as usize);
            let get = |i: usize| -> Result<&str, SimError> {
                match rec.get(idx[i]) {
                    Some(v) if !v.is_empty() => Ok(v),
                    _ => Err(SimError::input(origin, line, COLUMNS[i], "is empty")),
                }
            };
            let pos_int = |i: usize| -> Result<u32, SimError> {
                let v = get(i)?;
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| SimError::input(origin, line, COLUMNS[i], format!("'{v}' is not a positive integer")))
            };
            let model = get(0)?.to_ascii_lowercase();
            let batch = pos_int(1)?;
            let gpu_type = get(2)?.to_ascii_lowercase();
            let nodes = pos_int(3)?;
            let gpus_per_node = pos_int(4)?;
            let v = get(5)?;
            let x: f64 = v
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite())
                .ok_or_else(|| SimError::input(origin, line, "iter_time_s", format!("'{v}' is not a finite number of seconds (<= 0: does not fit)")))?;
            let iter_time_s = (x > 0.0).then_some(x);
            t.insert(TruthPoint { model, batch, gpu_type, nodes, gpus_per_node, iter_time_s });
        }
        Ok(t)
    }

    /// Reads a truth table file.
    pub fn load(path: &str) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io { path: path.to_string(), source })?;
        Self::parse(&text, path)
    }

    /// Adds (or replaces) a point.
    pub fn insert(&mut self, p: TruthPoint) {
        let key = (p.model.clone(), p.batch, p.gpu_type.clone(), p.nodes, p.gpus_per_node);
        if self.index.insert(key, p.iter_time_s).is_some() {
            self.points.retain(|q| !(q.model == p.model && q.batch == p.batch && q.gpu_type == p.gpu_type && q.nodes == p.nodes && q.gpus_per_node == p.gpus_per_node));
        }
        self.points.push(p);
    }

    /// `Some(Some(s))`: measured seconds; `Some(None)`: does not fit; `None`: not in the table.
    pub fn lookup(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<Option<f64>> {
        self.index.get(&(model.to_ascii_lowercase(), batch, gpu_type.to_ascii_lowercase(), nodes, gpus_per_node)).copied()
    }

    /// All points, in file order.
    pub fn points(&self) -> &[TruthPoint] {
        &self.points
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The measured (fitting) points as a profile DB, optionally only single-GPU ones.
    pub fn to_profile_db(&self, single_gpu_only: bool) -> cellsched_core::profile_db::ProfileDb {
        let mut db = cellsched_core::profile_db::ProfileDb::new();
        for p in &self.points {
            let Some(t) = p.iter_time_s else { continue };
            if single_gpu_only && p.nodes * p.gpus_per_node != 1 {
                continue;
            }
            db.insert(cellsched_core::profile_db::ProfileRecord {
                model: p.model.clone(),
                batch: p.batch,
                gpu_type: p.gpu_type.clone(),
                nodes: p.nodes,
                gpus_per_node: p.gpus_per_node,
                iter_time_s: t,
                plan: None,
                peak_mem_gib: None,
            });
        }
        db
    }

    /// Writes the table as CSV (fitting points with their seconds, others as 0).
    pub fn write_csv<W: std::io::Write>(&self, mut out: W, comment: &str) -> std::io::Result<()> {
        for l in comment.lines() {
            writeln!(out, "# {l}")?;
        }
        writeln!(out, "{}", COLUMNS.join(","))?;
        for p in &self.points {
            writeln!(out, "{},{},{},{},{},{}", p.model, p.batch, p.gpu_type, p.nodes, p.gpus_per_node, p.iter_time_s.map_or("0".to_string(), |t| format!("{t:.6}")))?;
        }
        Ok(())
    }
}

/// What truth says about one Cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TruthAnswer {
    /// Measured seconds per iteration.
    Measured(f64),
    /// Measured: does not fit in memory.
    NoFit,
    /// Not in the table; the fallback's estimate, if there is one (`estimate` mode).
    Missing(Option<f64>),
}

/// The clock's source: a truth table plus the fallback for missing points.
#[derive(Clone)]
pub struct Truth {
    table: Rc<TruthTable>,
    fallback: Option<Rc<dyn IterTimeSource>>,
    /// How missing points are handled.
    pub missing: TruthMissing,
}

impl Truth {
    /// Truth from `table`; `fallback` answers missing points in `estimate` mode.
    pub fn new(table: TruthTable, fallback: Option<Rc<dyn IterTimeSource>>, missing: TruthMissing) -> Self {
        Truth { table: Rc::new(table), fallback, missing }
    }

    /// The table.
    pub fn table(&self) -> &TruthTable {
        &self.table
    }

    /// What truth says about `model` at `batch` on `nodes` x `gpus_per_node` GPUs of `gpu_type`.
    pub fn answer(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> TruthAnswer {
        match self.table.lookup(model, batch, gpu_type, nodes, gpus_per_node) {
            Some(Some(t)) => TruthAnswer::Measured(t),
            Some(None) => TruthAnswer::NoFit,
            None => TruthAnswer::Missing(match (self.missing, &self.fallback) {
                (TruthMissing::Estimate, Some(f)) => f.iter_time(model, batch, gpu_type, nodes, gpus_per_node),
                _ => None,
            }),
        }
    }

    /// A label such as `bench/truth/gavel.csv (741 points; missing: estimate)`.
    pub fn label(&self) -> String {
        format!("{} ({} points; missing: {})", self.table.origin, self.table.len(), self.missing.as_str())
    }
}

/// Truth as an [`IterTimeSource`] (measured point, else the fallback;
/// "does not fit" is `None`), e.g. to derive users' time limits from true
/// run times when converting traces.
pub struct TruthTimes(pub Truth);

impl IterTimeSource for TruthTimes {
    fn iter_time(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
        match self.0.answer(model, batch, gpu_type, nodes, gpus_per_node) {
            TruthAnswer::Measured(t) => Some(t),
            TruthAnswer::NoFit => None,
            TruthAnswer::Missing(f) => f,
        }
    }
    fn rank_cells(&self, model: &str, batch: u32, offers: &[Offer], max_gpus: u32) -> Vec<CellChoice> {
        // Fewest-node shapes of every GPU count on each offer.
        let mut out = Vec::new();
        for o in offers {
            for gpus in 1..=max_gpus {
                let nodes = gpus.div_ceil(o.gpus_per_node);
                if gpus % nodes != 0 {
                    continue;
                }
                let k = gpus / nodes;
                if o.free_gpus_per_node.iter().filter(|&&f| f >= k).count() < nodes as usize {
                    continue;
                }
                if let Some(t) = self.iter_time(model, batch, &o.gpu_type, nodes, k) {
                    out.push(CellChoice { gpu_type: o.gpu_type.clone(), gpus, nodes, gpus_per_node: k, iter_s: t });
                }
            }
        }
        crate::times::sort_choices(&mut out);
        out
    }
    fn check_model(&self, model: &str) -> Result<(), SimError> {
        let m = model.to_ascii_lowercase();
        if self.0.table.points.iter().any(|p| p.model == m) {
            return Ok(());
        }
        match &self.0.fallback {
            Some(f) => f.check_model(model),
            None => Err(SimError::invalid("model", model, "a model of the truth table")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\n";

    #[test]
    fn parses_comments_no_fit_and_lookup() {
        let t = TruthTable::parse(&format!("# source: test\n{H}resnet50,64,V100,1,1,0.25\n# gap\ngpt__1.3B,64,v100,1,1,0\n"), "t.csv").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup("resnet50", 64, "v100", 1, 1), Some(Some(0.25)));
        assert_eq!(t.lookup("GPT__1.3b", 64, "v100", 1, 1), Some(None));
        assert_eq!(t.lookup("resnet50", 64, "v100", 1, 2), None);
        let db = t.to_profile_db(true);
        assert_eq!(db.len(), 1);
        let mut buf = Vec::new();
        t.write_csv(&mut buf, "source: test").unwrap();
        let again = TruthTable::parse(std::str::from_utf8(&buf).unwrap(), "u.csv").unwrap();
        assert_eq!(again.points(), t.points());
        let tr = Truth::new(t, None, TruthMissing::Skip);
        assert_eq!(tr.answer("resnet50", 64, "v100", 1, 1), TruthAnswer::Measured(0.25));
        assert_eq!(tr.answer("gpt__1.3b", 64, "v100", 1, 1), TruthAnswer::NoFit);
        assert_eq!(tr.answer("resnet50", 64, "k80", 1, 1), TruthAnswer::Missing(None));
    }

    #[test]
    fn bad_files_name_file_line_and_field() {
        let cases = [
            (format!("{H}a,1,v100,1,1,0.1\nb,-4,v100,1,1,0.1\n"), "t.csv:3", "batch", "-4"),
            (format!("{H}a,4,v100,1,1,NaN\n"), "t.csv:2", "iter_time_s", "NaN"),
            (format!("{H}a,4,v100,1,1,inf\n"), "t.csv:2", "iter_time_s", "inf"),
            (format!("{H}a,4,,1,1,0.1\n"), "t.csv:2", "gpu_type", "empty"),
            (format!("{H}a,4,v100,x,1,0.1\n"), "t.csv:2", "nodes", "x"),
            ("# c\nmodel,batch,gpu,nodes,gpus_per_node,iter_time_s\n".to_string(), "t.csv:2", "gpu_type", "missing column"),
            (format!("{H}a,4,v100,1\n"), "t.csv:2", "gpus_per_node", "empty"),
        ];
        for (text, at, field, what) in cases {
            let e = TruthTable::parse(&text, "t.csv").unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(field) && e.contains(what), "{e}\n{text}");
        }
        assert!("bogus".parse::<TruthMissing>().unwrap_err().to_string().contains("bogus"));
    }
}

#[cfg(test)]
mod engine_tests {
    //! Truth vs knowledge in the engine, hand-computable.
    use super::*;
    use crate::engine::{Sim, SimConfig};
    use crate::policy::testutil::{cluster, job};
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
        for name in policy::POLICY_NAMES {
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
        for name in policy::POLICY_NAMES {
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
        for name in policy::POLICY_NAMES {
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
}

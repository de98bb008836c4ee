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
use crate::times::{TimedCell, IterTimeSource};
use cellsched_core::estimator::CellOffer;
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

impl TruthPoint {
    /// The point as a profile DB record; `None` for a point that does not fit.
    fn record(&self) -> Option<cellsched_core::profile_db::ProfileRecord> {
        Some(cellsched_core::profile_db::ProfileRecord {
            model: self.model.clone(),
            batch: self.batch,
            gpu_type: self.gpu_type.clone(),
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            iter_time_s: self.iter_time_s?,
            plan: None,
            peak_mem_gib: None,
            first_iter_s: None,
        })
    }
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
        let text = std::fs::read_to_string(path).map_err(|error| SimError::Io { path: path.to_string(), error })?;
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
            if single_gpu_only && p.nodes * p.gpus_per_node != 1 {
                continue;
            }
            if let Some(r) = p.record() {
                db.insert(r);
            }
        }
        db
    }

    /// The table without the multi-GPU points of weak-scaling series that
    /// contradict themselves (more GPUs at the same per-GPU batch faster:
    /// [`cellsched_core::estimator::weak_scaling_contradictions`], the rule
    /// `bench estimator` flags them by), named `origin`; with the number of
    /// points left out.
    pub fn without_contradictions(&self, origin: &str) -> (TruthTable, usize) {
        let measured: Vec<(usize, cellsched_core::profile_db::ProfileRecord)> = self.points.iter().enumerate().filter_map(|(i, p)| Some((i, p.record()?))).collect();
        let keyed: Vec<(&str, &cellsched_core::profile_db::ProfileRecord)> = measured.iter().map(|(_, r)| (r.model.as_str(), r)).collect();
        let drop: Vec<usize> = cellsched_core::estimator::weak_scaling_contradictions(&keyed).into_iter().map(|k| measured[k].0).collect();
        let mut kept = TruthTable::new(origin);
        for (i, p) in self.points.iter().enumerate() {
            if !drop.contains(&i) {
                kept.insert(p.clone());
            }
        }
        (kept, drop.len())
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
    fn rank_cells(&self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Vec<TimedCell> {
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
                    out.push(TimedCell { gpu_type: o.gpu_type.clone(), gpus, nodes, gpus_per_node: k, iter_s: t });
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

    /// A series where 8 GPUs beat 4 at the same per-GPU batch loses its
    /// multi-GPU points; its single-GPU point, monotone series and
    /// points that do not fit stay.
    #[test]
    fn contradicting_series_lose_their_multi_gpu_points() {
        let text = format!(
            "{H}lm,8,v100,1,1,0.10\nlm,32,v100,1,4,0.30\nlm,64,v100,1,8,0.12\ncnn,8,v100,1,1,0.10\ncnn,32,v100,1,4,0.12\ncnn,64,v100,1,8,0.13\nbig,64,k80,1,1,0\n"
        );
        let t = TruthTable::parse(&text, "t.csv").unwrap();
        let (kept, dropped) = t.without_contradictions("kept.csv");
        assert_eq!((dropped, kept.len(), kept.origin.as_str()), (2, 5, "kept.csv"));
        assert_eq!(kept.lookup("lm", 8, "v100", 1, 1), Some(Some(0.10)));
        assert_eq!((kept.lookup("lm", 32, "v100", 1, 4), kept.lookup("lm", 64, "v100", 1, 8)), (None, None));
        assert_eq!(kept.lookup("cnn", 64, "v100", 1, 8), Some(Some(0.13)));
        assert_eq!(kept.lookup("big", 64, "k80", 1, 1), Some(None));
    }

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

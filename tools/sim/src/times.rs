//! Iteration times and Cell ranking behind one small trait, so the event
//! engine and the policies do not depend on where times come from: the core's
//! ProfileDb + Estimator in production ([`crate::core_times`]), a linear
//! table in unit tests ([`LinearTimes`]). [`TimeCache`] memoizes lookups so
//! that 100k-job traces stay fast.
use crate::error::SimError;
pub use cellsched_core::estimator::CellOffer;
use std::collections::HashMap;
use std::rc::Rc;

/// A feasible Cell with its shape and predicted iteration time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedCell {
    /// GPU type.
    pub gpu_type: String,
    /// Total GPUs.
    pub gpus: u32,
    /// Nodes spanned.
    pub nodes: u32,
    /// GPUs on each node.
    pub gpus_per_node: u32,
    /// Seconds per iteration.
    pub iter_s: f64,
}

/// Where iteration times come from.
pub trait IterTimeSource {
    /// Seconds per iteration of `model` at global batch `batch` on `nodes`
    /// nodes x `gpus_per_node` GPUs of `gpu_type`; `None` if infeasible
    /// (e.g. does not fit in memory) or unknown.
    fn iter_time(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64>;
    /// Feasible Cells within `offers` using at most `max_gpus` GPUs,
    /// fastest first (ties: fewer GPU-seconds, then fewer nodes).
    fn rank_cells(&self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Vec<TimedCell>;
    /// Errors (naming close names) if the model is unknown.
    fn check_model(&self, model: &str) -> Result<(), SimError>;
    /// Whether the answer for this Cell is a measured point of the knowledge
    /// (a profile DB row) rather than an estimate; prediction error is
    /// reported separately for such points (they are not held out).
    fn is_measured(&self, _model: &str, _batch: u32, _gpu_type: &str, _nodes: u32, _gpus_per_node: u32) -> bool {
        false
    }
    /// Number of layers of `model` (for freezing schedules); 0 if unknown.
    fn num_layers(&self, _model: &str) -> u32 {
        0
    }
    /// The knowledge's measured cold start to the end of the first
    /// iteration of `model` (the profile DB's `first_iter_s`), as the
    /// plugins record it for elastic jobs; `None` when not measured.
    fn measured_first_iter_s(&self, _model: &str, _gpu_type: &str) -> Option<f64> {
        None
    }
    /// This knowledge with `learned` measurements added as profile-DB rows
    /// and recalibrated on them, as the plugins' estimator is once a site
    /// imports its jobs' measured times (`cellsched profile import`): the
    /// rows answer their own Cells and move the calibration of every other
    /// Cell. `None` when the source has nothing to recalibrate (only the
    /// learnt Cells themselves change, [`TimeCache::learn`]).
    fn with_learned(&self, _learned: &[Measured]) -> Option<Box<dyn IterTimeSource>> {
        None
    }
}

/// One measured run's iteration time on its Cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Model name.
    pub model: String,
    /// Global batch size.
    pub batch: u32,
    /// GPU type.
    pub gpu_type: String,
    /// Nodes spanned.
    pub nodes: u32,
    /// GPUs on each node.
    pub gpus_per_node: u32,
    /// Measured seconds per iteration.
    pub iter_s: f64,
}

/// Test and fallback source: `iter = base[model][type] / gpus * (1 + inter_node_penalty * (nodes - 1))`.
#[derive(Debug, Clone, Default)]
pub struct LinearTimes {
    base: HashMap<(String, String), f64>,
    /// Relative slowdown per extra node spanned.
    pub inter_node_penalty: f64,
}

impl LinearTimes {
    /// An empty table with the given inter-node penalty.
    pub fn new(inter_node_penalty: f64) -> Self {
        LinearTimes { base: HashMap::new(), inter_node_penalty }
    }
    /// Sets the single-GPU iteration time of `model` on `gpu_type`.
    pub fn with(mut self, model: &str, gpu_type: &str, one_gpu_iter_s: f64) -> Self {
        self.base.insert((model.to_string(), gpu_type.to_string()), one_gpu_iter_s);
        self
    }
}

impl IterTimeSource for LinearTimes {
    fn iter_time(&self, model: &str, _batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
        let b = self.base.get(&(model.to_string(), gpu_type.to_string()))?;
        let gpus = (nodes * gpus_per_node) as f64;
        Some(b / gpus * (1.0 + self.inter_node_penalty * (nodes as f64 - 1.0)))
    }

    fn rank_cells(&self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Vec<TimedCell> {
        let mut out: Vec<TimedCell> = Vec::new();
        for o in offers {
            for gpus in 1..=max_gpus {
                for nodes in 1..=gpus {
                    let k = gpus / nodes;
                    if gpus % nodes != 0 || k > o.gpus_per_node {
                        continue;
                    }
                    if o.free_gpus_per_node.iter().filter(|&&f| f >= k).count() < nodes as usize {
                        continue;
                    }
                    if let Some(t) = self.iter_time(model, batch, &o.gpu_type, nodes, k) {
                        let c = TimedCell { gpu_type: o.gpu_type.clone(), gpus, nodes, gpus_per_node: k, iter_s: t };
                        if !out.contains(&c) {
                            out.push(c);
                        }
                    }
                    break; // fewest nodes only
                }
            }
        }
        sort_choices(&mut out);
        out
    }

    fn check_model(&self, model: &str) -> Result<(), SimError> {
        if self.base.keys().any(|(m, _)| m == model) {
            Ok(())
        } else {
            Err(SimError::invalid("model", model, "a model of the time table"))
        }
    }
}

/// Sorts choices fastest first, then fewer GPU-seconds per iteration, then fewer nodes.
pub fn sort_choices(v: &mut [TimedCell]) {
    v.sort_by(|a, b| {
        a.iter_s
            .total_cmp(&b.iter_s)
            .then((a.iter_s * a.gpus as f64).total_cmp(&(b.iter_s * b.gpus as f64)))
            .then(a.nodes.cmp(&b.nodes))
            .then(a.gpu_type.cmp(&b.gpu_type))
    });
}

type RankKey = (u32, u32, u32, Vec<CellOffer>);
/// A Cell of a model: (model, batch, GPU type, nodes, GPUs per node), names interned.
type CellKey = (u32, u32, u32, u32, u32);

/// Memoizes a source's answers; models and GPU types are interned.
pub struct TimeCache {
    src: Box<dyn IterTimeSource>,
    /// The source recalibrated on the learnt Cells ([`Self::recalibrate`]).
    relearned: Option<Box<dyn IterTimeSource>>,
    /// Learnt Cells not yet in `relearned`'s calibration.
    stale: bool,
    names: HashMap<String, u32>,
    times: HashMap<CellKey, Option<f64>>,
    ranks: HashMap<RankKey, Rc<Vec<TimedCell>>>,
    /// Cells learnt not to be usable (a run failed there): (model, batch, type, nodes, GPUs per node).
    marked: std::collections::HashSet<CellKey>,
    /// Models (interned) with at least one marked Cell.
    marked_models: std::collections::HashSet<u32>,
    /// Cells whose iteration time was measured while the simulation ran
    /// ([`Self::learn`]): (model, batch, type, nodes, GPUs per node) → seconds.
    learned: HashMap<CellKey, f64>,
    /// Models (interned) with at least one learned Cell.
    learned_models: std::collections::HashSet<u32>,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups forwarded to the source.
    pub misses: u64,
}

const RANK_CACHE_MAX: usize = 200_000;

impl TimeCache {
    /// Wraps a source.
    pub fn new(src: Box<dyn IterTimeSource>) -> Self {
        TimeCache {
            src,
            relearned: None,
            stale: false,
            names: HashMap::new(),
            times: HashMap::new(),
            ranks: HashMap::new(),
            marked: Default::default(),
            marked_models: Default::default(),
            learned: HashMap::new(),
            learned_models: Default::default(),
            hits: 0,
            misses: 0,
        }
    }
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.names.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.insert(s.to_string(), i);
        i
    }
    /// The source answering now: the given one, or it recalibrated on the
    /// learnt Cells ([`Self::recalibrate`]).
    pub fn source(&self) -> &dyn IterTimeSource {
        self.relearned.as_deref().unwrap_or(self.src.as_ref())
    }
    /// Learns that `model` at `batch` cannot use this Cell (e.g. a run there
    /// failed with out-of-memory): from now on [`Self::iter_time`] answers
    /// `None` for it and [`Self::rank_cells`] leaves it out.
    pub fn mark_unusable(&mut self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) {
        let m = self.intern(model);
        let key = (m, batch, self.intern(gpu_type), nodes, gpus_per_node);
        self.marked.insert(key);
        self.marked_models.insert(m);
        self.times.insert(key, None);
        self.ranks.retain(|k, _| k.0 != m);
    }
    /// Forgets every [`Self::mark_unusable`] (each simulation starts from the same knowledge).
    pub fn clear_marks(&mut self) {
        let cells: Vec<CellKey> = self.marked.drain().collect();
        let models = std::mem::take(&mut self.marked_models);
        self.forget(&cells, &models);
    }
    /// Drops the cached answers for `cells` and the cached rankings of `models`.
    fn forget(&mut self, cells: &[CellKey], models: &std::collections::HashSet<u32>) {
        for k in cells {
            self.times.remove(k);
        }
        if !models.is_empty() {
            self.ranks.retain(|k, _| !models.contains(&k.0));
        }
    }
    /// Learns the measured iteration time of `model` at `batch` on this Cell
    /// (a run there was measured, as a site importing its jobs' measured
    /// times into the profile DB does: `cellsched report --profile-rows`):
    /// from now on [`Self::iter_time`] answers it and [`Self::rank_cells`]
    /// ranks the Cell by it, as an exact profile-DB row overrides the
    /// estimate in the plugins. A Cell marked unusable stays unusable.
    /// Returns whether the knowledge changed.
    pub fn learn(&mut self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32, iter_s: f64) -> bool {
        if !(iter_s.is_finite() && iter_s > 0.0) {
            return false;
        }
        let m = self.intern(model);
        let key = (m, batch, self.intern(gpu_type), nodes, gpus_per_node);
        if self.marked.contains(&key) || self.learned.get(&key) == Some(&iter_s) {
            return false;
        }
        self.learned.insert(key, iter_s);
        self.learned_models.insert(m);
        self.times.insert(key, Some(iter_s));
        self.ranks.retain(|k, _| k.0 != m);
        self.stale = true;
        true
    }
    /// Recalibrates the source on every Cell learnt so far
    /// ([`IterTimeSource::with_learned`]) when some were learnt since the
    /// last call, and drops every cached answer (the calibration moves them
    /// all); learnt and unusable Cells keep their answers. Returns whether
    /// the knowledge of Cells other than the learnt ones changed (false when
    /// the source cannot recalibrate).
    pub fn recalibrate(&mut self) -> bool {
        if !self.stale {
            return false;
        }
        self.stale = false;
        let mut name = vec![""; self.names.len()];
        for (s, &i) in &self.names {
            name[i as usize] = s.as_str();
        }
        let mut rows: Vec<Measured> = self
            .learned
            .iter()
            .map(|(k, &iter_s)| Measured { model: name[k.0 as usize].to_string(), batch: k.1, gpu_type: name[k.2 as usize].to_string(), nodes: k.3, gpus_per_node: k.4, iter_s })
            .collect();
        // One calibration whatever order the cells were learnt in.
        rows.sort_by(|a, b| (&a.model, a.batch, &a.gpu_type, a.nodes, a.gpus_per_node).cmp(&(&b.model, b.batch, &b.gpu_type, b.nodes, b.gpus_per_node)));
        let Some(src) = self.src.with_learned(&rows) else { return false };
        self.relearned = Some(src);
        self.reset_answers();
        true
    }
    /// Drops every cached answer except those of learnt and unusable Cells.
    fn reset_answers(&mut self) {
        self.times.clear();
        self.ranks.clear();
        for (k, &v) in &self.learned {
            self.times.insert(*k, Some(v));
        }
        for k in &self.marked {
            self.times.insert(*k, None);
        }
    }
    /// Forgets every [`Self::learn`] (each simulation starts from the same knowledge).
    pub fn clear_learned(&mut self) {
        self.stale = false;
        if self.relearned.take().is_some() {
            self.learned.clear();
            self.learned_models.clear();
            self.reset_answers();
            return;
        }
        let cells: Vec<CellKey> = self.learned.drain().map(|(k, _)| k).collect();
        let models = std::mem::take(&mut self.learned_models);
        self.forget(&cells, &models);
    }
    /// Whether this Cell's time was learnt ([`Self::learn`]).
    pub fn is_learned(&mut self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> bool {
        if self.learned.is_empty() {
            return false;
        }
        let key = (self.intern(model), batch, self.intern(gpu_type), nodes, gpus_per_node);
        self.learned.contains_key(&key)
    }
    /// Cells learnt so far ([`Self::learn`]).
    pub fn learned_count(&self) -> usize {
        self.learned.len()
    }
    /// Whether [`Self::mark_unusable`] was called for this Cell.
    pub fn is_marked(&mut self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> bool {
        if self.marked.is_empty() {
            return false;
        }
        let key = (self.intern(model), batch, self.intern(gpu_type), nodes, gpus_per_node);
        self.marked.contains(&key)
    }
    /// Cached [`IterTimeSource::iter_time`].
    pub fn iter_time(&mut self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
        let key = (self.intern(model), batch, self.intern(gpu_type), nodes, gpus_per_node);
        if let Some(v) = self.times.get(&key) {
            self.hits += 1;
            return *v;
        }
        self.misses += 1;
        let v = self.source().iter_time(model, batch, gpu_type, nodes, gpus_per_node);
        self.times.insert(key, v);
        v
    }
    /// [`IterTimeSource::measured_first_iter_s`] of the source (not cached: asked once per elastic job).
    pub fn measured_first_iter_s(&self, model: &str, gpu_type: &str) -> Option<f64> {
        self.source().measured_first_iter_s(model, gpu_type)
    }
    /// Cached [`IterTimeSource::rank_cells`] (the offers are part of the key).
    pub fn rank_cells(&mut self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Rc<Vec<TimedCell>> {
        let key = (self.intern(model), batch, max_gpus, offers.to_vec());
        if let Some(v) = self.ranks.get(&key) {
            self.hits += 1;
            return v.clone();
        }
        self.misses += 1;
        if self.ranks.len() >= RANK_CACHE_MAX {
            self.ranks.clear();
        }
        let mut v = self.source().rank_cells(model, batch, offers, max_gpus);
        if self.marked_models.contains(&key.0) {
            let names = &self.names;
            let marked = &self.marked;
            v.retain(|c| {
                let t = names.get(&c.gpu_type).copied().unwrap_or(u32::MAX);
                !marked.contains(&(key.0, batch, t, c.nodes, c.gpus_per_node))
            });
        }
        if self.learned_models.contains(&key.0) {
            let names = &self.names;
            let learned = &self.learned;
            let mut changed = false;
            for c in v.iter_mut() {
                let t = names.get(&c.gpu_type).copied().unwrap_or(u32::MAX);
                if let Some(&x) = learned.get(&(key.0, batch, t, c.nodes, c.gpus_per_node)) {
                    c.iter_s = x;
                    changed = true;
                }
            }
            if changed {
                sort_choices(&mut v);
            }
        }
        let v = Rc::new(v);
        self.ranks.insert(key, v.clone());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_times_rank_fastest_first() {
        let t = LinearTimes::new(0.5).with("m", "a100", 1.0).with("m", "v100", 2.0);
        assert_eq!(t.iter_time("m", 8, "a100", 2, 2), Some(0.25 * 1.5));
        assert_eq!(t.iter_time("m", 8, "k80", 1, 1), None);
        let offers = vec![
            CellOffer { gpu_type: "a100".into(), gpus_per_node: 4, free_gpus_per_node: vec![1] },
            CellOffer { gpu_type: "v100".into(), gpus_per_node: 8, free_gpus_per_node: vec![8] },
        ];
        let r = t.rank_cells("m", 8, &offers, 4);
        assert_eq!((r[0].gpu_type.as_str(), r[0].gpus), ("v100", 4));
        assert!(r.iter().all(|c| !(c.gpu_type == "a100" && c.gpus > 1)));
        let mut cache = TimeCache::new(Box::new(t));
        let a = cache.rank_cells("m", 8, &offers, 4);
        let b = cache.rank_cells("m", 8, &offers, 4);
        assert_eq!(a, b);
        assert_eq!((cache.hits, cache.misses), (1, 1));
    }

    /// Model `m`: 4 s per iteration on one a100, 2 s on one v100.
    fn a100_v100_times() -> LinearTimes {
        LinearTimes::new(0.0).with("m", "a100", 4.0).with("m", "v100", 2.0)
    }

    /// One free node of each type with `gpus` GPUs.
    fn a100_v100_nodes(gpus: u32) -> Vec<CellOffer> {
        ["a100", "v100"].iter().map(|t| CellOffer { gpu_type: (*t).into(), gpus_per_node: gpus, free_gpus_per_node: vec![gpus] }).collect()
    }

    /// A learnt time answers for its Cell and re-ranks the Cells (the v100
    /// Cell measured slower than the a100 one moves behind it); a Cell marked
    /// unusable is not learnt back; clearing restores the source's answers.
    #[test]
    fn learnt_times_override_the_source_and_rerank() {
        let offers = a100_v100_nodes(1);
        let mut cache = TimeCache::new(Box::new(a100_v100_times()));
        assert_eq!(cache.rank_cells("m", 8, &offers, 1)[0].gpu_type, "v100");
        cache.learn("m", 8, "v100", 1, 1, 5.0);
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 1), Some(5.0));
        assert!(cache.is_learned("m", 8, "v100", 1, 1) && !cache.is_learned("m", 8, "a100", 1, 1));
        let r = cache.rank_cells("m", 8, &offers, 1);
        assert_eq!((r[0].gpu_type.as_str(), r[1].gpu_type.as_str(), r[1].iter_s), ("a100", "v100", 5.0));
        cache.mark_unusable("m", 8, "a100", 1, 1);
        cache.learn("m", 8, "a100", 1, 1, 1.0);
        assert_eq!(cache.iter_time("m", 8, "a100", 1, 1), None, "unusable stays unusable");
        cache.learn("m", 8, "v100", 1, 1, f64::NAN);
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 1), Some(5.0), "a broken measurement is not learnt");
        cache.clear_marks();
        cache.clear_learned();
        assert_eq!(cache.learned_count(), 0);
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 1), Some(2.0));
        assert_eq!(cache.rank_cells("m", 8, &offers, 1)[0].gpu_type, "v100");
        // LinearTimes cannot recalibrate: only the learnt Cells change.
        cache.learn("m", 8, "v100", 1, 1, 5.0);
        assert!(!cache.recalibrate());
        assert_eq!(cache.iter_time("m", 8, "v100", 2, 1), Some(1.0));
    }

    /// A source that recalibrates: a learnt Cell sets its model's time per
    /// GPU on that type (every Cell of the type scales with it).
    struct Scaling(LinearTimes);

    impl IterTimeSource for Scaling {
        fn iter_time(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
            self.0.iter_time(model, batch, gpu_type, nodes, gpus_per_node)
        }
        fn rank_cells(&self, model: &str, batch: u32, offers: &[CellOffer], max_gpus: u32) -> Vec<TimedCell> {
            self.0.rank_cells(model, batch, offers, max_gpus)
        }
        fn check_model(&self, model: &str) -> Result<(), SimError> {
            self.0.check_model(model)
        }
        fn with_learned(&self, learned: &[Measured]) -> Option<Box<dyn IterTimeSource>> {
            let mut t = self.0.clone();
            for m in learned {
                t = t.with(&m.model, &m.gpu_type, m.iter_s * f64::from(m.nodes * m.gpus_per_node));
            }
            Some(Box::new(Scaling(t)))
        }
    }

    /// Recalibration moves the learnt model's other Cells and re-ranks the
    /// types; it runs only after something new was learnt; clearing what was
    /// learnt restores the given source.
    #[test]
    fn recalibration_moves_every_cell_of_the_learnt_calibration() {
        let offers = a100_v100_nodes(2);
        let mut cache = TimeCache::new(Box::new(Scaling(a100_v100_times())));
        assert!(!cache.recalibrate(), "nothing learnt yet");
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 2), Some(1.0));
        assert_eq!(cache.rank_cells("m", 8, &offers, 2)[0].gpu_type, "v100");
        // One v100 measured at 5 s: before recalibrating only that Cell moved.
        assert!(cache.learn("m", 8, "v100", 1, 1, 5.0));
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 2), Some(1.0));
        assert!(cache.recalibrate());
        assert!(!cache.recalibrate(), "nothing new since");
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 1), Some(5.0));
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 2), Some(2.5));
        let r = cache.rank_cells("m", 8, &offers, 2);
        assert_eq!((r[0].gpu_type.as_str(), r[0].gpus, r[0].iter_s), ("a100", 2, 2.0));
        // Learning the same time again changes nothing.
        assert!(!cache.learn("m", 8, "v100", 1, 1, 5.0));
        assert!(!cache.recalibrate());
        // An unusable Cell stays unusable across a recalibration.
        cache.mark_unusable("m", 8, "a100", 1, 2);
        assert!(cache.learn("m", 8, "a100", 1, 1, 3.0));
        assert!(cache.recalibrate());
        assert_eq!(cache.iter_time("m", 8, "a100", 1, 2), None);
        assert!(cache.rank_cells("m", 8, &offers, 2).iter().all(|c| !(c.gpu_type == "a100" && c.gpus == 2)));
        cache.clear_learned();
        cache.clear_marks();
        assert_eq!(cache.learned_count(), 0);
        assert_eq!(cache.iter_time("m", 8, "v100", 1, 2), Some(1.0));
        assert_eq!(cache.iter_time("m", 8, "a100", 1, 2), Some(2.0));
        assert_eq!(cache.rank_cells("m", 8, &offers, 2)[0].gpu_type, "v100");
    }
}

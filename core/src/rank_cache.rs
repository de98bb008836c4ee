//! Cell rankings cached by (model, batch, cluster shape), so placement at
//! submit and re-planning do no plan search a previous one answers.
//!
//! [`Estimator::rank_cells`] reads the offers only through each GPU type's
//! node size, the most free GPUs on one node and the number of completely
//! free nodes (capped at the most whole nodes a Cell of `max_gpus` can
//! use). Those numbers, with the model's fingerprint, the global batch and
//! `max_gpus`, are the key ([`RankKey`]): thousands of nodes in a handful
//! of states give a handful of keys. A cache belongs to one estimator:
//! build a new one whenever the estimator is rebuilt (new calibration or
//! profile DB), which is what invalidates it. Size-limited ([`BoundedMap`]).
use crate::bounded::BoundedMap;
use crate::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use std::sync::{Arc, Mutex};

/// Default number of rankings kept (each a few KiB: a few MiB at most).
pub const DEFAULT_CAPACITY: usize = 1024;

/// What a ranking depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankKey {
    model: u64,
    batch: u32,
    max_gpus: u32,
    /// Per offer: (GPU type, GPUs per node, most free on one node, whole free nodes usable).
    shape: Vec<(String, u32, u32, u32)>,
}

impl RankKey {
    /// The key of `est.rank_cells(job, offers, max_gpus)`.
    pub fn new(job: &JobSpec, offers: &[CellOffer], max_gpus: u32) -> RankKey {
        let shape = offers
            .iter()
            .map(|o| {
                let node = o.gpus_per_node;
                let best_free = o.free_gpus_per_node.iter().copied().max().unwrap_or(0).min(node);
                let full = o.free_gpus_per_node.iter().filter(|f| **f >= node).count() as u32;
                let usable = if node == 0 { 0 } else { full.min(max_gpus / node) };
                (o.gpu_type.clone(), node, best_free, usable)
            })
            .collect();
        RankKey { model: job.model.fingerprint(), batch: job.global_batch, max_gpus, shape }
    }
}

/// Rankings of one estimator, shared by threads.
#[derive(Debug)]
pub struct RankCache {
    map: Mutex<BoundedMap<RankKey, Arc<Vec<Estimate>>>>,
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
}

impl Default for RankCache {
    fn default() -> Self {
        RankCache::new(DEFAULT_CAPACITY)
    }
}

impl RankCache {
    /// An empty cache of at most `capacity` rankings.
    pub fn new(capacity: usize) -> Self {
        RankCache { map: Mutex::new(BoundedMap::new(capacity)), hits: Default::default(), misses: Default::default() }
    }

    /// `est.rank_cells(job, offers, max_gpus)`, from the cache when this
    /// shape was ranked before. `est` must be the estimator this cache belongs to.
    pub fn rank_cells(&self, est: &Estimator, job: &JobSpec, offers: &[CellOffer], max_gpus: u32) -> Arc<Vec<Estimate>> {
        use std::sync::atomic::Ordering::Relaxed;
        let key = RankKey::new(job, offers, max_gpus);
        if let Some(hit) = self.map.lock().ok().and_then(|mut m| m.get(&key).cloned()) {
            self.hits.fetch_add(1, Relaxed);
            return hit;
        }
        self.misses.fetch_add(1, Relaxed);
        let ranked = Arc::new(est.rank_cells(job, offers, max_gpus));
        if let Ok(mut m) = self.map.lock() {
            m.insert(key, ranked.clone());
        }
        ranked
    }

    /// (hits, misses, entries held, entries evicted) so far.
    pub fn stats(&self) -> (u64, u64, usize, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let (len, ev) = self.map.lock().map(|m| (m.len(), m.evicted())).unwrap_or((0, 0));
        (self.hits.load(Relaxed), self.misses.load(Relaxed), len, ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;
    use crate::model::ModelCatalog;
    use proptest::prelude::*;

    fn job(name_part: &str, batch: u32) -> JobSpec {
        let m = ModelCatalog::builtin();
        let name = m.names().find(|n| n.contains(name_part)).unwrap().to_string();
        JobSpec { model: m.resolve(&name).unwrap(), global_batch: batch }
    }

    fn offer(t: &str, node: u32, free: &[u32]) -> CellOffer {
        CellOffer { gpu_type: t.into(), gpus_per_node: node, free_gpus_per_node: free.to_vec() }
    }

    #[test]
    fn same_shape_is_answered_from_the_cache_with_the_same_ranking() {
        let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
        let c = RankCache::new(8);
        let j = job("gpt", 32);
        let a = [offer("a100", 8, &[8, 8, 3, 0]), offer("v100", 8, &[0; 400])];
        // Other nodes, same shape: one more completely free a100 node beyond what 16 GPUs can use.
        let b = [offer("a100", 8, &[8, 8, 8, 2, 3, 0, 0]), offer("v100", 8, &[0; 7])];
        let first = c.rank_cells(&est, &j, &a, 16);
        assert_eq!(*first, est.rank_cells(&j, &a, 16));
        let second = c.rank_cells(&est, &j, &b, 16);
        assert_eq!(*second, est.rank_cells(&j, &b, 16));
        assert_eq!(c.stats().0, 1, "second call was a hit");
        // Another batch, another model or another limit is another key.
        c.rank_cells(&est, &job("gpt", 64), &a, 16);
        c.rank_cells(&est, &job("bert", 32), &a, 16);
        c.rank_cells(&est, &j, &a, 32);
        assert_eq!(c.stats().1, 4);
        for i in 0..20u32 {
            c.rank_cells(&est, &job("gpt", 8 + i), &a, 16);
        }
        assert!(c.stats().2 <= 8, "bounded: {:?}", c.stats());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// A cached answer is always exactly the uncached ranking, for any offers.
        #[test]
        fn cached_equals_uncached(frees in proptest::collection::vec((0u32..=8, 0u32..=4), 1..12), max_gpus in 1u32..40, batch in 1u32..5) {
            let est = Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin());
            let c = RankCache::new(64);
            let j = job("gpt", batch * 16);
            let a: Vec<u32> = frees.iter().map(|f| f.0).collect();
            let v: Vec<u32> = frees.iter().map(|f| f.1).collect();
            let offers = [offer("a100", 8, &a), offer("a10", 4, &v)];
            let direct = est.rank_cells(&j, &offers, max_gpus);
            prop_assert_eq!(&*c.rank_cells(&est, &j, &offers, max_gpus), &direct);
            prop_assert_eq!(&*c.rank_cells(&est, &j, &offers, max_gpus), &direct);
            // Permuting nodes keeps the shape and the answer.
            let mut a2 = a.clone();
            a2.reverse();
            let offers2 = [offer("a100", 8, &a2), offer("a10", 4, &v)];
            prop_assert_eq!(&*c.rank_cells(&est, &j, &offers2, max_gpus), &est.rank_cells(&j, &offers2, max_gpus));
        }
    }
}

//! The load a Cell is sized against: per GPU type, the GPUs free now and
//! the GPUs that pending jobs wait for.
//!
//! Sizing by marginal value alone (`super::sizing`) keeps a job at its
//! efficient size even when nobody waits for the GPUs it leaves idle: on a
//! lightly loaded cluster jobs then finish later than if they had simply
//! used the idle GPUs. A GPU of type `T` that is free and that no pending
//! job waits for is *unwanted*: giving it to a job now takes it from no
//! one now; it is wanted later only if a job arrives for it before the
//! grown job ends, which is the more likely the busier the type is. So with
//! a load view a job also grows into unwanted GPUs
//! ([`super::SizingRule::choose_under_load`]) when the growth's marginal
//! efficiency is at least the sizing bound scaled by the type's load after
//! the growth ([`LoadView::load_after`], the share of its GPUs busy or
//! wanted): on an idle cluster any speed-up pays, on a busy one only what
//! the efficient rule accepts. Under contention (every free GPU of a type
//! wanted by a pending job) nothing grows there, so queued jobs keep their GPUs.
//!
//! Both hosts build the view from what they see: job_submit from the free
//! GPUs of the nodes and the pending DL jobs' current Cells (the last
//! re-planning pass), the simulator from its cluster state and its pending
//! jobs' planned Cells. A job's own demand is taken out before it is sized
//! ([`LoadView::without_wanted`]).
use super::NodeGpus;

/// Total, free and wanted GPUs per GPU type (type names compare case-insensitively).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadView {
    /// (GPU type, GPUs in all).
    total: Vec<(String, u64)>,
    /// (GPU type, free GPUs).
    free: Vec<(String, u64)>,
    /// (GPU type, GPUs pending jobs wait for).
    wanted: Vec<(String, u64)>,
}

fn slot<'a>(v: &'a mut Vec<(String, u64)>, gpu_type: &str) -> &'a mut u64 {
    let i = match v.iter().position(|(t, _)| t.eq_ignore_ascii_case(gpu_type)) {
        Some(i) => i,
        None => {
            v.push((gpu_type.to_string(), 0));
            v.len() - 1
        }
    };
    &mut v[i].1
}

fn get(v: &[(String, u64)], gpu_type: &str) -> u64 {
    v.iter().find(|(t, _)| t.eq_ignore_ascii_case(gpu_type)).map_or(0, |x| x.1)
}

impl LoadView {
    /// An empty view: nothing free, nothing wanted.
    pub fn new() -> Self {
        Self::default()
    }

    /// The free GPUs of `nodes` (usable nodes only), nothing wanted yet.
    pub fn from_nodes(nodes: &[NodeGpus]) -> Self {
        let mut v = Self::new();
        for n in nodes {
            v.add_total(&n.gpu_type, u64::from(n.total));
            v.add_free(&n.gpu_type, u64::from(n.free));
        }
        v
    }

    /// `gpus` more GPUs of `gpu_type` in the cluster (busy or free).
    pub fn add_total(&mut self, gpu_type: &str, gpus: u64) {
        *slot(&mut self.total, gpu_type) += gpus;
    }

    /// `gpus` more free GPUs of `gpu_type`.
    pub fn add_free(&mut self, gpu_type: &str, gpus: u64) {
        *slot(&mut self.free, gpu_type) += gpus;
    }

    /// Sets the free GPUs of `gpu_type`.
    pub fn set_free(&mut self, gpu_type: &str, gpus: u64) {
        *slot(&mut self.free, gpu_type) = gpus;
    }

    /// A pending job waits for `gpus` GPUs of `gpu_type`.
    pub fn add_wanted(&mut self, gpu_type: &str, gpus: u64) {
        *slot(&mut self.wanted, gpu_type) += gpus;
    }

    /// Adds every GPU `other` says pending jobs wait for.
    pub fn add_wanted_of(&mut self, other: &LoadView) {
        for (t, g) in &other.wanted {
            self.add_wanted(t, *g);
        }
    }

    /// A pending job that waited for `gpus` GPUs of `gpu_type` no longer does
    /// (it started, moved or left).
    pub fn remove_wanted(&mut self, gpu_type: &str, gpus: u64) {
        let w = slot(&mut self.wanted, gpu_type);
        *w = w.saturating_sub(gpus);
    }

    /// The view without one job's own demand (`gpus` GPUs of `gpu_type`),
    /// for sizing that job.
    pub fn without_wanted(&self, gpu_type: &str, gpus: u64) -> LoadView {
        let mut v = self.clone();
        v.remove_wanted(gpu_type, gpus);
        v
    }

    /// Free GPUs of `gpu_type`.
    pub fn free(&self, gpu_type: &str) -> u64 {
        get(&self.free, gpu_type)
    }

    /// GPUs of `gpu_type` pending jobs wait for.
    pub fn wanted(&self, gpu_type: &str) -> u64 {
        get(&self.wanted, gpu_type)
    }

    /// Free GPUs of `gpu_type` that no pending job waits for.
    pub fn unwanted(&self, gpu_type: &str) -> u64 {
        self.free(gpu_type).saturating_sub(self.wanted(gpu_type))
    }

    /// Free GPUs of every type less the GPUs pending jobs wait for on any
    /// type: re-planning moves a waiting job to another type's free GPUs,
    /// so a GPU is spare only when the whole queue is served.
    pub fn unwanted_anywhere(&self) -> u64 {
        let free: u64 = self.free.iter().map(|x| x.1).sum();
        let wanted: u64 = self.wanted.iter().map(|x| x.1).sum();
        free.saturating_sub(wanted)
    }

    /// The share of `gpu_type`'s GPUs that are busy or wanted once a job
    /// takes `gpus` of its unwanted ones (0..=1; 1 for a type without GPUs).
    pub fn load_after(&self, gpu_type: &str, gpus: u64) -> f64 {
        let total = get(&self.total, gpu_type);
        if total == 0 {
            return 1.0;
        }
        let idle = self.unwanted(gpu_type).saturating_sub(gpus).min(total);
        1.0 - idle as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwanted_is_free_minus_wanted_per_type() {
        let nodes = [
            NodeGpus { node: "a".into(), gpu_type: "v100".into(), total: 8, free: 8 },
            NodeGpus { node: "b".into(), gpu_type: "V100".into(), total: 8, free: 2 },
            NodeGpus { node: "c".into(), gpu_type: "k80".into(), total: 8, free: 4 },
        ];
        let mut v = LoadView::from_nodes(&nodes);
        assert_eq!((v.free("v100"), v.free("k80"), v.free("a100")), (10, 4, 0));
        // 16 v100, 10 free: a job taking 2 leaves 8 idle: half busy.
        assert_eq!(v.load_after("v100", 2), 0.5);
        assert_eq!(v.load_after("a100", 0), 1.0);
        v.add_wanted("v100", 4);
        v.add_wanted("k80", 6);
        assert_eq!((v.unwanted("v100"), v.unwanted("k80"), v.unwanted("a100")), (6, 0, 0));
        assert_eq!(v.unwanted_anywhere(), 14 - 10);
        // A job's own demand is not counted against it.
        let mine = v.without_wanted("v100", 4);
        assert_eq!((mine.unwanted("v100"), v.unwanted("v100")), (10, 6));
        v.remove_wanted("k80", 100);
        assert_eq!(v.wanted("k80"), 0);
        v.set_free("k80", 1);
        assert_eq!(v.unwanted("k80"), 1);
    }
}

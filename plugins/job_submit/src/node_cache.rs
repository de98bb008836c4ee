//! The nodes' GPUs, copied from slurmctld's node table only when it changed.
//!
//! slurmctld sets `last_node_update` to the current second whenever a
//! node's state or allocation changes (a job starts or ends, a node goes
//! down). A copy taken in a later second than that stamp stays exact until
//! the stamp moves: every change after the copy sets it to the copy's
//! second or later. A copy taken within the stamp's own second is used
//! once and re-taken next time, since a change in the same second would
//! leave the stamp as it was.
use cellsched_core::placement::NodeGpus;
use std::sync::Arc;

/// When the held copy was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Taken {
    stamp: i64,
    taken_s: i64,
    count: usize,
}

/// The last copy of the node table's GPUs.
#[derive(Debug, Default)]
pub struct NodeCache {
    taken: Option<Taken>,
    nodes: Arc<Vec<NodeGpus>>,
    copies: u64,
    reuses: u64,
}

impl NodeCache {
    /// The held copy if still exact for `stamp` (`last_node_update` now)
    /// and `count` nodes in the table.
    pub fn get(&mut self, stamp: i64, count: usize) -> Option<Arc<Vec<NodeGpus>>> {
        let t = self.taken?;
        if t.stamp == stamp && t.count == count && t.stamp < t.taken_s {
            self.reuses += 1;
            Some(self.nodes.clone())
        } else {
            None
        }
    }

    /// Holds `nodes`, copied at second `taken_s` while `last_node_update` was `stamp`.
    pub fn put(&mut self, stamp: i64, taken_s: i64, count: usize, nodes: Vec<NodeGpus>) -> Arc<Vec<NodeGpus>> {
        self.copies += 1;
        self.taken = Some(Taken { stamp, taken_s, count });
        self.nodes = Arc::new(nodes);
        self.nodes.clone()
    }

    /// (copies taken, copies reused).
    pub fn stats(&self) -> (u64, u64) {
        (self.copies, self.reuses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(free: u32) -> Vec<NodeGpus> {
        vec![NodeGpus { node: "a100-1".into(), gpu_type: "a100".into(), total: 4, free }]
    }

    #[test]
    fn reuses_only_while_the_stamp_is_older_than_the_copy() {
        let mut c = NodeCache::default();
        assert!(c.get(100, 1).is_none(), "nothing held");
        c.put(100, 105, 1, n(4));
        assert_eq!(c.get(100, 1).unwrap()[0].free, 4);
        assert!(c.get(106, 1).is_none(), "a node changed after the copy");
        assert!(c.get(100, 2).is_none(), "a node was added");
        // Copied in the second of the last change: a change later in that
        // second would not move the stamp, so the copy is not trusted.
        c.put(106, 106, 1, n(2));
        assert!(c.get(106, 1).is_none());
        c.put(106, 107, 1, n(2));
        assert_eq!(c.get(106, 1).unwrap()[0].free, 2);
        assert_eq!(c.stats(), (3, 2));
    }
}

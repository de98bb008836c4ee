//! A hash map with a size limit: memory stays bounded in long-lived
//! processes (slurmctld plugins) whatever the workload.
//!
//! When an insert finds the map full, the least recently used eighth of
//! the entries is evicted at once (an O(n log n) sort every n/8 inserts, so
//! O(log n) amortized per insert); reads mark an entry used.
use std::collections::HashMap;
use std::hash::Hash;

/// A map of at most `capacity` entries, least recently used evicted first.
#[derive(Debug, Clone)]
pub struct BoundedMap<K, V> {
    map: HashMap<K, (V, u64)>,
    capacity: usize,
    tick: u64,
    evicted: u64,
}

impl<K: Hash + Eq + Clone, V> BoundedMap<K, V> {
    /// An empty map holding at most `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> Self {
        BoundedMap { map: HashMap::new(), capacity: capacity.max(1), tick: 0, evicted: 0 }
    }

    /// The value of `k`, marking it used.
    pub fn get(&mut self, k: &K) -> Option<&V> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(k).map(|e| {
            e.1 = t;
            &e.0
        })
    }

    /// The value of `k` without marking it used.
    #[cfg(test)]
    fn peek(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|e| &e.0)
    }

    /// Inserts or replaces `k`; evicts the least recently used eighth first when full.
    pub fn insert(&mut self, k: K, v: V) {
        self.tick += 1;
        if self.map.len() >= self.capacity && !self.map.contains_key(&k) {
            self.evict(self.capacity.div_ceil(8));
        }
        self.map.insert(k, (v, self.tick));
    }

    fn evict(&mut self, n: usize) {
        let mut ages: Vec<(u64, K)> = self.map.iter().map(|(k, e)| (e.1, k.clone())).collect();
        ages.sort_unstable_by_key(|a| a.0);
        for (_, k) in ages.into_iter().take(n) {
            self.map.remove(&k);
            self.evicted += 1;
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Entries evicted so far (for logs and benchmarks).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_exceeds_capacity_and_evicts_least_recently_used() {
        let mut m = BoundedMap::new(16);
        for i in 0..16 {
            m.insert(i, i * 10);
        }
        // Key 0 is used, so 1 and 2 are the oldest.
        assert_eq!(m.get(&0), Some(&0));
        m.insert(100, 1);
        assert!(m.len() <= 16);
        assert_eq!(m.peek(&0), Some(&0), "recently used survives");
        assert_eq!(m.peek(&1), None, "least recently used goes first");
        assert_eq!(m.peek(&2), None);
        assert_eq!(m.evicted(), 2);
        for i in 0..10_000 {
            m.insert(1000 + i, i);
            assert!(m.len() <= 16);
        }
        // Replacing a present key evicts nothing.
        let before = m.evicted();
        let k = *m.map.keys().next().unwrap();
        m.insert(k, 7);
        assert_eq!(m.evicted(), before);
        assert_eq!(m.peek(&k), Some(&7));
        assert_eq!(BoundedMap::<u8, u8>::new(0).capacity, 1);
    }
}

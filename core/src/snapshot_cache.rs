//! Incremental snapshots of slurmctld's job table: a background pass copies
//! under the locks only the jobs that are new or changed since the last
//! pass, and keeps what it parsed from the others.
//!
//! Under the lock the caller computes a cheap [`stamp`] of the fields it
//! reads and asks [`SnapshotCache::wants`]; only then does it copy the job.
//! After releasing the lock it parses the copies ([`SnapshotCache::insert`])
//! and drops the jobs that left the queue ([`SnapshotCache::retain_live`]).
//! Memory is bounded by the pending queue, and by a hard limit on top.
//!
//! The per-job test under the lock reads the C strings as bytes (no UTF-8
//! check: [`stamp_bytes`], [`contains`]) and looks the job up in an
//! [`IdMap`]; only a wanted copy is checked and converted.
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Default hard limit of jobs held (far above slurmctld's default `MaxJobCount`).
pub const DEFAULT_CAPACITY: usize = 1_000_000;

/// A fast, non-cryptographic 64-bit hash of some optional strings, for
/// change detection only (a changed field changes the stamp with
/// overwhelming probability; `None` and `""` differ).
pub fn stamp(parts: &[Option<&str>]) -> u64 {
    stamp_iter(parts.iter().map(|p| p.map(str::as_bytes)))
}

/// [`stamp`] of byte strings (`stamp_bytes(&[Some(s.as_bytes())]) == stamp(&[Some(s)])`).
pub fn stamp_bytes(parts: &[Option<&[u8]>]) -> u64 {
    stamp_iter(parts.iter().copied())
}

fn stamp_iter<'a>(parts: impl Iterator<Item = Option<&'a [u8]>>) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |v: u64| h = (h.rotate_left(5) ^ v).wrapping_mul(K);
    for p in parts {
        match p {
            None => mix(u64::MAX),
            Some(b) => {
                mix(b.len() as u64);
                let mut chunks = b.chunks_exact(8);
                for c in &mut chunks {
                    mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
                }
                let mut last = [0u8; 8];
                last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
                mix(u64::from_le_bytes(last));
            }
        }
    }
    h
}

/// True when `needle` occurs in `haystack` (a prefix is tested first: the
/// usual place of a marker such as `cellsched:`).
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else { return true };
    if haystack.starts_with(needle) {
        return true;
    }
    let last_start = match haystack.len().checked_sub(needle.len()) {
        Some(n) => n,
        None => return false,
    };
    haystack[..=last_start].iter().enumerate().any(|(i, &b)| b == first && haystack[i + 1..].starts_with(rest))
}

/// Hasher for job ids: one multiply (ids are not attacker-chosen, and
/// std's SipHash costs more than the rest of a cache lookup).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ u64::from(v)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by job id with [`IdHasher`].
pub type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;
/// A set of job ids with [`IdHasher`].
pub type IdSet = HashSet<u32, BuildHasherDefault<IdHasher>>;

/// What was parsed from each job, with the stamp it was parsed at.
#[derive(Debug, Clone)]
pub struct SnapshotCache<T> {
    entries: IdMap<(u64, Option<T>)>,
    capacity: usize,
}

impl<T> Default for SnapshotCache<T> {
    fn default() -> Self {
        SnapshotCache::new(DEFAULT_CAPACITY)
    }
}

impl<T> SnapshotCache<T> {
    /// An empty cache holding at most `capacity` jobs.
    pub fn new(capacity: usize) -> Self {
        SnapshotCache { entries: IdMap::default(), capacity: capacity.max(1) }
    }

    /// True when job `id` must be copied: unknown, or its stamp changed.
    pub fn wants(&self, id: u32, stamp: u64) -> bool {
        self.entries.get(&id).map_or(true, |(s, _)| *s != stamp)
    }

    /// Records what job `id` parsed to at `stamp` (`None`: not of interest,
    /// remembered so it is not copied again until it changes). Past the
    /// hard limit everything is forgotten first (then re-copied once).
    pub fn insert(&mut self, id: u32, stamp: u64, parsed: Option<T>) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&id) {
            self.entries.clear();
        }
        self.entries.insert(id, (stamp, parsed));
    }

    /// What job `id` parsed to, if it is known and of interest.
    pub fn get(&self, id: u32) -> Option<&T> {
        self.entries.get(&id).and_then(|(_, p)| p.as_ref())
    }

    /// What job `id` parsed to when its stamp is still `stamp`: `None` when
    /// unknown, not of interest, or parsed at another stamp (not to be
    /// trusted until copied again).
    pub fn get_at(&self, id: u32, stamp: u64) -> Option<&T> {
        self.entries.get(&id).filter(|(s, _)| *s == stamp).and_then(|(_, p)| p.as_ref())
    }

    /// Forgets job `id`, so it is copied again at any stamp (e.g. after the
    /// host wrote to it: a later change back to the text it was parsed at
    /// must not look unchanged).
    pub fn forget(&mut self, id: u32) {
        self.entries.remove(&id);
    }

    /// Forgets the jobs not in `live` (they left the queue).
    pub fn retain_live<S: std::hash::BuildHasher>(&mut self, live: &HashSet<u32, S>) {
        self.entries.retain(|id, _| live.contains(id));
    }

    /// Every job known and of interest, with what it parsed to.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> + '_ {
        self.entries.iter().filter_map(|(id, (_, p))| p.as_ref().map(|p| (*id, p)))
    }

    /// Forgets everything (the parser changed, e.g. a new configuration).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Jobs held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no job is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_tell_fields_apart() {
        let a = stamp(&[Some("cellsched: cell=a100x4x1"), Some("a100"), None]);
        assert_eq!(a, stamp(&[Some("cellsched: cell=a100x4x1"), Some("a100"), None]));
        assert_ne!(a, stamp(&[Some("cellsched: cell=a100x8x1"), Some("a100"), None]));
        assert_ne!(a, stamp(&[Some("cellsched: cell=a100x4x1"), Some("a100"), Some("")]));
        assert_ne!(stamp(&[Some("ab"), Some("c")]), stamp(&[Some("a"), Some("bc")]));
        assert_ne!(stamp(&[Some("12345678x")]), stamp(&[Some("12345678y")]));
        // The byte form is the same stamp.
        assert_eq!(a, stamp_bytes(&[Some(b"cellsched: cell=a100x4x1"), Some(b"a100"), None]));
        assert_ne!(stamp_bytes(&[Some(b"a\xff")]), stamp_bytes(&[Some(b"a\xfe")]));
    }

    #[test]
    fn a_forgotten_job_is_wanted_at_any_stamp() {
        let mut c: SnapshotCache<u8> = SnapshotCache::new(8);
        c.insert(7, 42, Some(1));
        assert!(!c.wants(7, 42));
        c.forget(7);
        assert!(c.wants(7, 42) && c.get(7).is_none());
        c.forget(8); // unknown: nothing to do
    }

    #[test]
    fn finds_markers_anywhere_in_bytes() {
        assert!(contains(b"cellsched: cell=a100x4x1", b"cellsched:"));
        assert!(contains(b"site note; cellsched: cell=a100x4x1", b"cellsched:"));
        assert!(contains(b"x cellsched:", b"cellsched:"));
        assert!(!contains(b"x cellsched", b"cellsched:"));
        assert!(!contains(b"cellsche", b"cellsched:"));
        assert!(!contains(b"", b"cellsched:"));
        assert!(contains(b"\xff\xfecellsched:", b"cellsched:"), "bytes, not UTF-8");
        assert!(contains(b"ccellsched:", b"cellsched:"), "a false start before the match");
        assert!(contains(b"abc", b""));
    }

    #[test]
    fn id_maps_hold_distinct_ids() {
        let mut m: IdMap<u32> = IdMap::default();
        for id in 0..10_000u32 {
            m.insert(id * 7, id);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u32).all(|id| m[&(id * 7)] == id));
        assert!(!m.contains_key(&1));
        let live: IdSet = [1, 2].into_iter().collect();
        let mut c: SnapshotCache<u8> = SnapshotCache::new(10);
        c.insert(1, 0, Some(1));
        c.insert(2, 0, None);
        c.insert(3, 0, Some(3));
        c.retain_live(&live);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![(1, &1)]);
    }

    #[test]
    fn copies_only_new_or_changed_jobs_and_forgets_departed_ones() {
        let mut c: SnapshotCache<String> = SnapshotCache::new(100);
        assert!(c.wants(1, 10));
        c.insert(1, 10, Some("one".into()));
        c.insert(2, 20, None);
        assert!(!c.wants(1, 10) && !c.wants(2, 20));
        assert!(c.wants(1, 11), "changed stamp is copied again");
        assert_eq!(c.get(1).map(String::as_str), Some("one"));
        assert_eq!(c.get(2), None);
        assert_eq!(c.get_at(1, 10).map(String::as_str), Some("one"));
        assert_eq!(c.get_at(1, 11), None, "parsed at another stamp");
        c.retain_live(&[2].into_iter().collect::<HashSet<u32>>());
        assert!(c.wants(1, 10) && c.len() == 1);
        let mut small: SnapshotCache<u8> = SnapshotCache::new(3);
        for id in 0..10 {
            small.insert(id, 0, Some(1));
            assert!(small.len() <= 3);
        }
        small.clear();
        assert!(small.is_empty());
    }
}

//! Predicted iterations for DL jobs submitted without `--dl-iters`.
//!
//! [`Predictions::load`] reads the `[estimator] history` CSV, fits a
//! [`IterationPredictor`] and resolves the history's user names to uids with
//! the host's lookup (site_factor passes an NSS `getpwnam_r`); it does file
//! and NSS I/O and may take seconds, so the plugin calls it from a
//! background thread, never under slurmctld's locks. [`Predictions::predict`]
//! is pure memory (plus a small cache), safe under the job write lock.
use crate::history::{self, HistoryRecord};
use crate::predictor::{HistoryQuery, IterationPredictor};
use crate::CoreError;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// Cached predictions kept at most; the cache is emptied beyond this.
const CACHE_LIMIT: usize = 100_000;

/// A fitted predictor with the uid → user-name map of its history.
#[derive(Debug)]
pub struct Predictions {
    predictor: IterationPredictor,
    users: HashMap<u32, String>,
    cache: Mutex<HashMap<String, Option<f64>>>,
}

impl Predictions {
    /// Fits on `records`; `users` maps uids to the user names the history uses.
    pub fn from_records(records: &[HistoryRecord], users: HashMap<u32, String>) -> Predictions {
        Predictions { predictor: IterationPredictor::fit(records), users, cache: Mutex::new(HashMap::new()) }
    }

    /// Loads the history CSV at `path`, fits, and resolves its user names to
    /// uids with `uid_of` (names without an account are kept out of the map).
    pub fn load(path: &Path, uid_of: impl Fn(&str) -> Option<u32>) -> Result<Predictions, CoreError> {
        let records = history::load_csv(path)?;
        let mut users = HashMap::new();
        for r in &records {
            if users.values().any(|u| u == &r.user) {
                continue;
            }
            if let Some(uid) = uid_of(&r.user) {
                users.insert(uid, r.user.clone());
            }
        }
        Ok(Predictions::from_records(&records, users))
    }

    /// Whether the history was large enough to train the forest.
    pub fn is_trained(&self) -> bool {
        self.predictor.is_trained()
    }

    /// History records the predictor was fitted on.
    pub fn n_train(&self) -> usize {
        self.predictor.n_train()
    }

    /// The history's name for `uid` (`uid<N>` when the history has none).
    pub fn user_name(&self, uid: u32) -> String {
        self.users.get(&uid).cloned().unwrap_or_else(|| format!("uid{uid}"))
    }

    /// Predicted total iterations (≥ 1), `None` without enough history for the query.
    pub fn predict(&self, q: &HistoryQuery) -> Option<f64> {
        let key = format!("{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}", q.user, q.model, q.batch, q.gpus, q.requested_time_s);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.get(&key) {
            return *v;
        }
        let v = self.predictor.predict(q).filter(|i| i.is_finite() && *i >= 1.0);
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` runs of one recurring job of `user` with about `iters` iterations.
    pub(crate) fn runs(user: &str, model: &str, iters: u64, n: usize) -> Vec<HistoryRecord> {
        (0..n)
            .map(|i| HistoryRecord {
                user: user.into(),
                model: model.into(),
                batch: 32,
                gpus: 4,
                requested_time_s: 7200.0,
                iterations: iters + (i as u64 % 7) * iters / 100,
                elapsed_s: 3600.0,
                gpu_type: Some("a100".into()),
            })
            .collect()
    }

    #[test]
    fn predicts_recurring_jobs_and_caches() {
        let mut h = runs("alice", "gpt__350M", 5_000, 40);
        h.extend(runs("bob", "gpt__350M", 200_000, 40));
        let p = Predictions::from_records(&h, HashMap::from([(1000, "alice".to_string())]));
        assert!(p.is_trained() && p.n_train() == 80);
        let q = |user: &str| HistoryQuery { user: user.into(), model: "gpt__350M".into(), batch: 32, gpus: 4, requested_time_s: 7200.0 };
        let a = p.predict(&q("alice")).unwrap();
        let b = p.predict(&q("bob")).unwrap();
        assert!(a < 20_000.0 && b > 50_000.0, "alice {a}, bob {b}");
        assert_eq!(p.predict(&q("alice")), Some(a), "cached value");
        assert_eq!(p.user_name(1000), "alice");
        assert_eq!(p.user_name(7), "uid7");
        // A model the history never saw: no prediction.
        let mut unseen = q("alice");
        unseen.model = "llama7b".into();
        assert_eq!(p.predict(&unseen), None);
    }

    #[test]
    fn small_history_is_untrained() {
        let p = Predictions::from_records(&runs("alice", "gpt__350M", 5_000, 3), HashMap::new());
        assert!(!p.is_trained());
        let q = HistoryQuery { user: "alice".into(), model: "gpt__350M".into(), batch: 32, gpus: 4, requested_time_s: 7200.0 };
        assert_eq!(p.predict(&q), None);
    }

    #[test]
    fn load_reads_csv_and_resolves_names_with_the_hosts_lookup() {
        let dir = std::env::temp_dir().join(format!("cs-sf-pred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.csv");
        std::fs::write(&path, history::to_csv_string(&runs("root", "gpt__350M", 5_000, 40))).unwrap();
        let uid_of = |n: &str| (n == "root").then_some(0);
        let p = Predictions::load(&path, uid_of).unwrap();
        assert!(p.is_trained());
        assert_eq!(p.user_name(0), "root", "root resolves to uid 0");
        let e = Predictions::load(&dir.join("missing.csv"), uid_of).unwrap_err().to_string();
        assert!(e.contains("missing.csv"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! Iteration prediction for recurring jobs (A-SRPT): when a user does not
//! declare `--dl-iters`, predict the job's total iterations from the job
//! history with a random-forest regressor.
//!
//! Features (all logs, so multiplicative effects become additive):
//! batch, GPUs, requested time; per-(user, model) history statistics — mean
//! log iterations, mean log samples (iterations × batch, i.e. epochs) minus
//! this job's log batch, mean log "iterations per requested second" plus this
//! job's log requested time, log record count; and model-wide and user-wide
//! mean log iterations. Missing groups fall back (user, model) → model →
//! global. Training rows get their statistics by K-fold cross-fitting (from
//! the other folds only), so a row never sees its own target; leave-one-out
//! would leak it (a group's LOO mean is anti-correlated with the row's
//! target, which trees exploit and which is absent at prediction time). The forest predicts log iterations; the prediction is its
//! exponential (a median-type estimate, good for relative error).
//!
//! Fallback: [`IterationPredictor::predict`] returns `None` when the history
//! had fewer than [`PredictorConfig::min_records`] records, or the query's
//! model never appears in it; callers then use the requested time.
//!
//! Why our own forest (`forest`, re-exported as [`RandomForest`]) instead of smartcore or linfa: both pull
//! in large dependency trees (ndarray, BLAS-style numerics, rand) into a
//! crate that is linked into slurmctld plugins, while CART + bagging is ~250
//! lines, fully deterministic from a seed, and tested here
//! (`forest::tests`, plus the holdout test below).
mod forest;

use crate::error::CoreError;
use crate::history::HistoryRecord;
pub use forest::{ForestConfig, RandomForest};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// What is known about a job at submit time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Submitting user.
    pub user: String,
    /// Model name.
    pub model: String,
    /// Global batch size (≥ 1).
    pub batch: u32,
    /// GPUs requested (≥ 1).
    pub gpus: u32,
    /// Requested time limit (s).
    pub requested_time_s: f64,
}

impl From<&HistoryRecord> for HistoryQuery {
    fn from(r: &HistoryRecord) -> Self {
        HistoryQuery {
            user: r.user.clone(),
            model: r.model.clone(),
            batch: r.batch,
            gpus: r.gpus,
            requested_time_s: r.requested_time_s,
        }
    }
}

/// Predictor settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictorConfig {
    /// Forest hyper-parameters.
    pub forest: ForestConfig,
    /// Fewer history records than this: no model, `predict` returns `None`.
    /// Default 30.
    pub min_records: usize,
    /// Cross-fitting folds for the training rows' history statistics (≥ 2).
    /// Default 5.
    pub folds: usize,
}

impl Default for PredictorConfig {
    fn default() -> Self {
        PredictorConfig { forest: ForestConfig::default(), min_records: 30, folds: 5 }
    }
}

/// Feature names, in feature-vector order.
pub const FEATURES: [&str; 9] = [
    "log_batch",
    "log_gpus",
    "log_requested_time",
    "user_model_mean_log_iters",
    "user_model_epochs_at_batch",
    "user_model_rate_x_requested",
    "log_user_model_count",
    "model_mean_log_iters",
    "user_mean_log_iters",
];

/// Sums of one group's log statistics.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    n: f64,
    iters: f64,
    samples: f64,
    rate: f64,
}

impl Acc {
    fn of(r: &HistoryRecord) -> Self {
        let li = (r.iterations.max(1) as f64).ln();
        Acc {
            n: 1.0,
            iters: li,
            samples: li + (r.batch.max(1) as f64).ln(),
            rate: li - r.requested_time_s.max(1.0).ln(),
        }
    }
    fn add(&mut self, o: &Acc) {
        self.n += o.n;
        self.iters += o.iters;
        self.samples += o.samples;
        self.rate += o.rate;
    }
    fn minus(&self, o: Option<&Acc>) -> Acc {
        match o {
            None => *self,
            Some(o) => Acc {
                n: self.n - o.n,
                iters: self.iters - o.iters,
                samples: self.samples - o.samples,
                rate: self.rate - o.rate,
            },
        }
    }
    /// Means (iters, samples, rate), or `None` for an empty group.
    fn means(&self) -> Option<(f64, f64, f64)> {
        (self.n >= 0.5).then(|| (self.iters / self.n, self.samples / self.n, self.rate / self.n))
    }
}

/// Group statistics of a training history.
#[derive(Debug, Clone, Default)]
struct Stats {
    /// user → model → statistics (nested so look-ups need no allocation).
    user_model: HashMap<String, HashMap<String, Acc>>,
    model: HashMap<String, Acc>,
    user: HashMap<String, Acc>,
    global: Acc,
}

impl Stats {
    fn build(records: &[HistoryRecord]) -> Self {
        let mut s = Stats::default();
        for r in records {
            let a = Acc::of(r);
            s.user_model.entry(r.user.clone()).or_default().entry(r.model.clone()).or_default().add(&a);
            s.model.entry(model_key(&r.user, &r.model).into_owned()).or_default().add(&a);
            s.user.entry(r.user.clone()).or_default().add(&a);
            s.global.add(&a);
        }
        s
    }

    /// Feature vector for `q`; `exclude` holds statistics to subtract (a
    /// training row's own cross-fitting fold).
    fn features(&self, q: &HistoryQuery, exclude: Option<&Stats>) -> Vec<f64> {
        let empty = Acc::default();
        let um_of = |st: &Stats| st.user_model.get(&q.user).and_then(|m| m.get(&q.model)).copied();
        let um = um_of(self).unwrap_or(empty).minus(exclude.and_then(um_of).as_ref());
        let key = model_key(&q.user, &q.model);
        let model = self.model.get(key.as_ref()).unwrap_or(&empty).minus(exclude.and_then(|e| e.model.get(key.as_ref())));
        let user = self.user.get(&q.user).unwrap_or(&empty).minus(exclude.and_then(|e| e.user.get(&q.user)));
        let global = self.global.minus(exclude.map(|e| &e.global)).means().unwrap_or((0.0, 0.0, 0.0));
        let model_m = model.means().unwrap_or(global);
        let um_m = um.means().unwrap_or(model_m);
        let user_m = user.means().unwrap_or(global);
        let lb = (q.batch.max(1) as f64).ln();
        let lr = q.requested_time_s.max(1.0).ln();
        vec![
            lb,
            (q.gpus.max(1) as f64).ln(),
            lr,
            um_m.0,
            um_m.1 - lb,
            um_m.2 + lr,
            (1.0 + um.n.max(0.0)).ln(),
            model_m.0,
            user_m.0,
        ]
    }

    fn knows_model(&self, q: &HistoryQuery) -> bool {
        self.model.contains_key(model_key(&q.user, &q.model).as_ref())
    }
}

/// The per-model statistics key: a catalog model's name, shared by all
/// users; a user model's (`user:NAME@FINGERPRINT`) only with its own user,
/// so no one's model TOML teaches the predictor about another's jobs.
fn model_key<'a>(user: &str, model: &'a str) -> std::borrow::Cow<'a, str> {
    if crate::model::is_user_model_name(model) {
        std::borrow::Cow::Owned(format!("{user}/{model}"))
    } else {
        std::borrow::Cow::Borrowed(model)
    }
}

/// Predicts total iterations of recurring jobs.
#[derive(Debug, Clone)]
pub struct IterationPredictor {
    stats: Stats,
    forest: Option<RandomForest>,
    n_train: usize,
}

impl IterationPredictor {
    /// Fits with [`PredictorConfig::default`]; with too little history the
    /// predictor is untrained and predicts `None`.
    pub fn fit(records: &[HistoryRecord]) -> Self {
        Self::fit_with(records, &PredictorConfig::default()).expect("default predictor config is valid")
    }

    /// Fits with `cfg`; errors only on an invalid configuration.
    pub fn fit_with(records: &[HistoryRecord], cfg: &PredictorConfig) -> Result<Self, CoreError> {
        cfg.forest.validate()?;
        let stats = Stats::build(records);
        if records.len() < cfg.min_records.max(1) {
            return Ok(IterationPredictor { stats, forest: None, n_train: records.len() });
        }
        // Cross-fitting: a row's statistics come from the other folds only.
        let k = cfg.folds.max(2);
        let mut fold_of: Vec<usize> = (0..records.len()).map(|i| i % k).collect();
        SplitMix64::new(cfg.forest.seed ^ 0xF01D).shuffle(&mut fold_of);
        let folds: Vec<Stats> = (0..k)
            .map(|f| {
                let part: Vec<HistoryRecord> =
                    records.iter().zip(&fold_of).filter(|(_, &g)| g == f).map(|(r, _)| r.clone()).collect();
                Stats::build(&part)
            })
            .collect();
        let x: Vec<Vec<f64>> = records
            .iter()
            .zip(&fold_of)
            .map(|(r, &f)| stats.features(&HistoryQuery::from(r), Some(&folds[f])))
            .collect();
        let y: Vec<f64> = records.iter().map(|r| (r.iterations.max(1) as f64).ln()).collect();
        let forest = RandomForest::fit(&x, &y, &cfg.forest)?;
        Ok(IterationPredictor { stats, forest: Some(forest), n_train: records.len() })
    }

    /// Whether enough history was given to train the forest.
    pub fn is_trained(&self) -> bool {
        self.forest.is_some()
    }

    /// Records the predictor was fitted on.
    pub fn n_train(&self) -> usize {
        self.n_train
    }

    /// Predicted total iterations (≥ 1), or `None` without enough history
    /// (untrained, or the model never seen).
    pub fn predict(&self, q: &HistoryQuery) -> Option<f64> {
        let forest = self.forest.as_ref()?;
        if !self.stats.knows_model(q) {
            return None;
        }
        let log_iters = forest.predict(&self.stats.features(q, None));
        Some(log_iters.exp().max(1.0))
    }

    /// Feature importances by name, largest first (`None` when untrained).
    pub fn feature_importances(&self) -> Option<Vec<(&'static str, f64)>> {
        let f = self.forest.as_ref()?;
        let mut v: Vec<(&'static str, f64)> =
            FEATURES.iter().copied().zip(f.feature_importances().iter().copied()).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        Some(v)
    }
}

/// Error of predictions on held-back records. Relative errors are fractions
/// (0.12 = 12 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// Mean absolute error (iterations).
    pub mae: f64,
    /// Mean absolute percentage error.
    pub mape: f64,
    /// Median absolute percentage error.
    pub median_ape: f64,
    /// Training records.
    pub n_train: usize,
    /// Test records predicted (those with a prediction).
    pub n_test: usize,
    /// Test records without a prediction (model unseen in training).
    pub n_unpredicted: usize,
    /// MAE of the naive baseline: the training set's mean iterations.
    pub baseline_mae: f64,
    /// MAPE of the naive baseline.
    pub baseline_mape: f64,
    /// MAPE of the per-(user, model) mean of training iterations (global
    /// mean where the group is unseen): the simple history baseline.
    pub group_mean_mape: f64,
}

impl fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "train={} test={} unpredicted={} MAE={:.0} MAPE={:.1}% medianAPE={:.1}% | global-mean MAE={:.0} MAPE={:.1}% | user-model-mean MAPE={:.1}%",
            self.n_train,
            self.n_test,
            self.n_unpredicted,
            self.mae,
            100.0 * self.mape,
            100.0 * self.median_ape,
            self.baseline_mae,
            100.0 * self.baseline_mape,
            100.0 * self.group_mean_mape,
        )
    }
}

/// Shuffles `records` with `seed`, holds back a fraction `frac` (in (0,1)),
/// fits on the rest with the default configuration and reports the error on
/// the held-back part.
pub fn evaluate_holdout(records: &[HistoryRecord], frac: f64, seed: u64) -> Result<ErrorReport, CoreError> {
    evaluate_holdout_with(records, frac, seed, &PredictorConfig::default())
}

/// [`evaluate_holdout`] with an explicit configuration.
pub fn evaluate_holdout_with(
    records: &[HistoryRecord],
    frac: f64,
    seed: u64,
    cfg: &PredictorConfig,
) -> Result<ErrorReport, CoreError> {
    if !(frac > 0.0 && frac < 1.0) {
        return Err(CoreError::invalid("holdout fraction", frac.to_string(), "a number strictly between 0 and 1"));
    }
    let mut shuffled: Vec<&HistoryRecord> = records.iter().collect();
    SplitMix64::new(seed).shuffle(&mut shuffled);
    let n_test = ((records.len() as f64) * frac).round() as usize;
    let (test, train) = shuffled.split_at(n_test.min(records.len()));
    let train: Vec<HistoryRecord> = train.iter().map(|r| (*r).clone()).collect();
    if test.is_empty() || train.len() < cfg.min_records.max(1) {
        return Err(CoreError::Infeasible(format!(
            "holdout needs at least {} training and 1 test record; got {} and {}",
            cfg.min_records.max(1),
            train.len(),
            test.len()
        )));
    }
    let p = IterationPredictor::fit_with(&train, cfg)?;
    let global_mean = train.iter().map(|r| r.iterations as f64).sum::<f64>() / train.len() as f64;
    let mut group: HashMap<(&str, &str), (f64, f64)> = HashMap::new();
    for r in &train {
        let e = group.entry((&r.user, &r.model)).or_default();
        e.0 += r.iterations as f64;
        e.1 += 1.0;
    }
    let (mut abs, mut ape, mut base_abs, mut base_ape, mut group_ape) = (Vec::new(), Vec::new(), 0.0, 0.0, 0.0);
    let mut unpredicted = 0;
    for r in test {
        let Some(pred) = p.predict(&HistoryQuery::from(*r)) else {
            unpredicted += 1;
            continue;
        };
        let truth = r.iterations as f64;
        abs.push((pred - truth).abs());
        ape.push((pred - truth).abs() / truth);
        base_abs += (global_mean - truth).abs();
        base_ape += (global_mean - truth).abs() / truth;
        let g = group.get(&(r.user.as_str(), r.model.as_str())).map_or(global_mean, |(s, n)| s / n);
        group_ape += (g - truth).abs() / truth;
    }
    let n = abs.len();
    if n == 0 {
        return Err(CoreError::Infeasible("no held-back record could be predicted (models unseen in training)".into()));
    }
    ape.sort_by(f64::total_cmp);
    let median_ape = if n % 2 == 1 { ape[n / 2] } else { 0.5 * (ape[n / 2 - 1] + ape[n / 2]) };
    Ok(ErrorReport {
        mae: abs.iter().sum::<f64>() / n as f64,
        mape: ape.iter().sum::<f64>() / n as f64,
        median_ape,
        n_train: train.len(),
        n_test: n,
        n_unpredicted: unpredicted,
        baseline_mae: base_abs / n as f64,
        baseline_mape: base_ape / n as f64,
        group_mean_mape: group_ape / n as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{synthetic, SyntheticSpec};

    #[test]
    fn forest_beats_global_mean_on_held_out_history() {
        let recs = synthetic(&SyntheticSpec { users: 30, records: 1500, seed: 11, ..Default::default() });
        let r = evaluate_holdout(&recs, 0.2, 5).unwrap();
        assert_eq!(r.n_test + r.n_unpredicted, 300);
        assert_eq!(r.n_train, 1200);
        assert!(r.mae < 0.5 * r.baseline_mae, "{r}");
        assert!(r.mape < 0.25 * r.baseline_mape, "{r}");
        // Recurring jobs with 10 % noise: typical error well under 30 %.
        assert!(r.median_ape < 0.3, "{r}");
        // And the forest beats the plain per-(user, model) mean of past runs.
        assert!(r.mape < r.group_mean_mape, "{r}");
    }

    /// Issue 31 item 9: one user's model TOML history does not make the
    /// predictor answer for another user's job with the same model name;
    /// catalog models are still shared.
    #[test]
    fn user_model_history_stays_with_its_user() {
        let mut recs = synthetic(&SyntheticSpec { users: 10, records: 300, ..Default::default() });
        let forged = "user:gpt__1.3B@0123456789ab";
        for i in 0..40 {
            recs.push(HistoryRecord { user: "mallory".into(), model: forged.into(), batch: 32, gpus: 4, requested_time_s: 600.0, iterations: 5000 + i, elapsed_s: 5.0, gpu_type: None });
        }
        let p = IterationPredictor::fit(&recs);
        let q = |user: &str, model: &str| HistoryQuery { user: user.into(), model: model.into(), batch: 32, gpus: 4, requested_time_s: 600.0 };
        assert!(p.predict(&q("mallory", forged)).is_some());
        assert!(p.predict(&q("alice", forged)).is_none(), "another user's user-model history is not shared");
        let catalog = recs[0].model.clone();
        assert!(p.predict(&q("nobody", &catalog)).is_some(), "catalog models are shared across users");
    }

    #[test]
    fn holdout_is_deterministic_given_seed() {
        let recs = synthetic(&SyntheticSpec { users: 10, records: 300, ..Default::default() });
        let cfg = PredictorConfig { forest: ForestConfig { n_trees: 10, ..Default::default() }, ..Default::default() };
        let a = evaluate_holdout_with(&recs, 0.25, 3, &cfg).unwrap();
        assert_eq!(a, evaluate_holdout_with(&recs, 0.25, 3, &cfg).unwrap());
        assert!(evaluate_holdout_with(&recs, 1.5, 3, &cfg).unwrap_err().to_string().contains("holdout fraction"));
    }

    #[test]
    fn falls_back_with_too_little_history_or_unseen_model() {
        let recs = synthetic(&SyntheticSpec { users: 3, records: 10, ..Default::default() });
        let p = IterationPredictor::fit(&recs);
        assert!(!p.is_trained());
        assert_eq!(p.predict(&HistoryQuery::from(&recs[0])), None);
        assert!(p.feature_importances().is_none());
        let recs = synthetic(&SyntheticSpec { users: 5, records: 200, ..Default::default() });
        let p = IterationPredictor::fit(&recs);
        assert!(p.is_trained());
        let mut q = HistoryQuery::from(&recs[0]);
        assert!(p.predict(&q).unwrap() >= 1.0);
        q.model = "never_seen__1B".into();
        assert_eq!(p.predict(&q), None);
    }

    #[test]
    fn prediction_tracks_a_users_recurring_job() {
        // One user always runs ~20 000 iterations, another ~2 000 on the same model.
        let mut recs = Vec::new();
        let mut rng = SplitMix64::new(4);
        for i in 0..120 {
            let (user, base) = if i % 2 == 0 { ("ann", 20_000.0) } else { ("ben", 2_000.0) };
            recs.push(HistoryRecord {
                user: user.into(),
                model: "gpt__1.3B".into(),
                batch: 32,
                gpus: 4,
                requested_time_s: 36_000.0,
                iterations: (base * (0.05 * rng.normal()).exp()) as u64,
                elapsed_s: 1000.0,
                gpu_type: None,
            });
        }
        let p = IterationPredictor::fit(&recs);
        let q = |u: &str| HistoryQuery {
            user: u.into(),
            model: "gpt__1.3B".into(),
            batch: 32,
            gpus: 4,
            requested_time_s: 36_000.0,
        };
        let (a, b) = (p.predict(&q("ann")).unwrap(), p.predict(&q("ben")).unwrap());
        assert!((a / 20_000.0 - 1.0).abs() < 0.1, "{a}");
        assert!((b / 2_000.0 - 1.0).abs() < 0.1, "{b}");
        let imp = p.feature_importances().unwrap();
        assert!(imp[0].0.starts_with("user") || imp[0].0.starts_with("log_user"), "{imp:?}");
    }
}

//! Declared work is a promise: what happens when a DL job runs far longer
//! than its `--dl-iters` said (so that lying about a small job to jump the
//! A-SRPT queue does not pay).
//!
//! - With [`OverrunPolicy::Limit`] (default) a job that declares its
//!   iterations gets a time limit from that declaration:
//!   `iters × predicted seconds per iteration × slack + grace`
//!   ([`time_bound_min`]), or keeps its own limit when that is shorter.
//! - A job seen running past `iters × seconds per iteration × slack`
//!   ([`overran`]) marks its user: for `distrust_s` seconds that user's
//!   declared iterations are no longer used to rank their jobs (the history
//!   prediction or the time limit stands in); with
//!   [`OverrunPolicy::Demote`] their pending DL jobs get the stock site
//!   factor instead.
//! - [`Overruns`] remembers each user's last overrun; site_factor keeps it
//!   in slurmctld's StateSaveLocation so that distrust survives a restart.
use crate::CoreError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// What cellsched does about jobs that overrun their declared work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverrunPolicy {
    /// Time limit from the declaration; overrunning users lose trust.
    #[default]
    Limit,
    /// No time limit; overrunning users' pending DL jobs get the stock site factor.
    Demote,
    /// Declarations are trusted as given.
    Off,
}

/// `[declared]` in cellsched.toml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeclaredConfig {
    /// See [`OverrunPolicy`].
    pub policy: OverrunPolicy,
    /// How many times the predicted run time a job may take before it
    /// counts as overrunning (covers the estimator's error).
    pub slack: f64,
    /// Seconds added to the time limit set from a declaration (start-up, checkpoints).
    pub grace_s: f64,
    /// Seconds a user stays distrusted after an overrun.
    pub distrust_s: f64,
}

impl Default for DeclaredConfig {
    fn default() -> Self {
        DeclaredConfig { policy: OverrunPolicy::Limit, slack: 3.0, grace_s: 1800.0, distrust_s: 7.0 * 86_400.0 }
    }
}

impl DeclaredConfig {
    /// Range checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        if !(self.slack.is_finite() && (1.0..=1000.0).contains(&self.slack)) {
            return Err(format!("declared.slack = {} must be a number in 1..=1000", self.slack));
        }
        if !(self.grace_s.is_finite() && (0.0..=86_400.0 * 30.0).contains(&self.grace_s)) {
            return Err(format!("declared.grace_s = {} must be seconds in 0..=2592000", self.grace_s));
        }
        if !(self.distrust_s.is_finite() && (0.0..=86_400.0 * 365.0).contains(&self.distrust_s)) {
            return Err(format!("declared.distrust_s = {} must be seconds in 0..=31536000", self.distrust_s));
        }
        Ok(())
    }
}

/// Seconds the declared work should take: `iters × iter_s × slack`.
fn allowed_s(iters: u64, iter_s: f64, cfg: &DeclaredConfig) -> f64 {
    iters as f64 * iter_s.max(0.0) * cfg.slack
}

/// The time limit (minutes, at least 1) that [`OverrunPolicy::Limit`] sets
/// for a job declaring `iters` iterations of `iter_s` predicted seconds;
/// `None` under other policies or when the bound exceeds what Slurm can hold.
pub fn time_bound_min(iters: u64, iter_s: f64, cfg: &DeclaredConfig) -> Option<u32> {
    if cfg.policy != OverrunPolicy::Limit || !iter_s.is_finite() {
        return None;
    }
    let minutes = ((allowed_s(iters, iter_s, cfg) + cfg.grace_s) / 60.0).ceil().max(1.0);
    // Slurm's largest finite limit is below INFINITE (0xfffffffe) minutes; a year is plenty.
    (minutes <= 525_600.0).then_some(minutes as u32)
}

/// True when a job declaring `iters` iterations of `iter_s` seconds has run
/// `elapsed_s` seconds: longer than its declared work times the slack.
pub fn overran(iters: u64, iter_s: f64, elapsed_s: f64, cfg: &DeclaredConfig) -> bool {
    cfg.policy != OverrunPolicy::Off && iter_s.is_finite() && elapsed_s > allowed_s(iters, iter_s, cfg)
}


/// Each user's last overrun of declared work (uid → Unix seconds): who is
/// distrusted now, and a text form (`uid unix_seconds` per line, `#`
/// comments) that site_factor writes to StateSaveLocation so a slurmctld
/// restart does not forgive anyone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overruns {
    last: BTreeMap<u32, f64>,
}

impl Overruns {
    /// The file's name in slurmctld's StateSaveLocation.
    pub const FILE_NAME: &'static str = "cellsched-overruns";

    /// Records an overrun by `uid` seen at `now`.
    pub fn record(&mut self, uid: u32, now: f64) {
        let t = self.last.entry(uid).or_insert(now);
        *t = t.max(now);
    }

    /// Users distrusted at `now`: their last overrun is less than `distrust_s` ago.
    pub fn distrusted(&self, now: f64, cfg: &DeclaredConfig) -> HashSet<u32> {
        self.last.iter().filter(|(_, t)| now - **t < cfg.distrust_s).map(|(u, _)| *u).collect()
    }

    /// Forgets overruns older than `distrust_s`.
    pub fn expire(&mut self, now: f64, cfg: &DeclaredConfig) {
        self.last.retain(|_, t| now - *t < cfg.distrust_s);
    }

    /// Users with a remembered overrun.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// True when no overrun is remembered.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut out = String::from("# cellsched site_factor: uid and Unix time of each user's last overrun of declared work (--dl-iters)\n");
        for (uid, t) in &self.last {
            out.push_str(&format!("{uid} {}\n", t.round() as i64));
        }
        out
    }

    /// Parses [`Overruns::to_text`]'s form; errors name `origin`, the line and the field.
    pub fn parse(text: &str, origin: &str) -> Result<Overruns, CoreError> {
        let mut o = Overruns::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| CoreError::File { path: origin.to_string(), line: Some(i + 1), msg };
            let mut f = line.split_whitespace();
            let (Some(uid), Some(t), None) = (f.next(), f.next(), f.next()) else {
                return Err(err(format!("expected 'uid unix_seconds', got '{line}'")));
            };
            let uid: u32 = uid.parse().map_err(|_| err(format!("uid '{uid}' is not a number")))?;
            let t: f64 = t.parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0).ok_or_else(|| err(format!("time '{t}' is not Unix seconds")))?;
            o.record(uid, t);
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 31 item 2: `scontrol update TimeLimit=5-00:00:00` on a job that
    /// declared 223 minutes of work is refused; lowering is fine.

    #[test]
    fn overruns_survive_their_text_form_and_expire() {
        let cfg = DeclaredConfig { distrust_s: 100.0, ..Default::default() };
        let mut o = Overruns::default();
        o.record(1000, 50.0);
        o.record(1000, 40.0);
        o.record(1001, 10.0);
        assert_eq!(o.distrusted(115.0, &cfg), [1000].into_iter().collect());
        let back = Overruns::parse(&o.to_text(), "f").unwrap();
        assert_eq!(back, o, "{}", o.to_text());
        let mut e = back.clone();
        e.expire(115.0, &cfg);
        assert_eq!(e.len(), 1);
        e.expire(151.0, &cfg);
        assert!(e.is_empty());
        for (bad, what) in [("1000\n", "expected"), ("x 5\n", "uid 'x'"), ("1000 soon\n", "time 'soon'"), ("# c\n7 1 2\n", "expected")] {
            let msg = Overruns::parse(bad, "/state/cellsched-overruns").unwrap_err().to_string();
            assert!(msg.contains(what) && msg.contains("/state/cellsched-overruns"), "{bad:?}: {msg}");
        }
        assert!(Overruns::parse("# only a comment\n\n", "f").unwrap().is_empty());
    }

    #[test]
    fn bound_covers_the_declared_work_with_slack_and_grace() {
        let cfg = DeclaredConfig::default();
        // 1000 iterations of 0.5 s: 500 s x 3 + 1800 s = 3300 s = 55 min.
        assert_eq!(time_bound_min(1000, 0.5, &cfg), Some(55));
        // One iteration still gets the grace (and at least a minute).
        assert_eq!(time_bound_min(1, 0.1, &DeclaredConfig { grace_s: 0.0, ..cfg.clone() }), Some(1));
        assert_eq!(time_bound_min(1_000_000_000_000, 10.0, &cfg), None, "beyond Slurm's limits: no bound");
        assert_eq!(time_bound_min(10, f64::NAN, &cfg), None);
        for p in [OverrunPolicy::Demote, OverrunPolicy::Off] {
            assert_eq!(time_bound_min(1000, 0.5, &DeclaredConfig { policy: p, ..cfg.clone() }), None);
        }
    }

    #[test]
    fn overrun_is_past_the_declared_work_times_the_slack() {
        let cfg = DeclaredConfig::default();
        assert!(!overran(100, 1.0, 299.0, &cfg));
        assert!(overran(100, 1.0, 301.0, &cfg));
        assert!(overran(1, 0.3, 40.0, &cfg), "declaring 1 iteration and running 40 s");
        assert!(!overran(1, 0.3, 40.0, &DeclaredConfig { policy: OverrunPolicy::Off, ..cfg.clone() }));
        assert!(overran(1, 0.3, 40.0, &DeclaredConfig { policy: OverrunPolicy::Demote, ..cfg }));
    }

    #[test]
    fn bad_settings_name_the_key() {
        for (c, key) in [
            (DeclaredConfig { slack: 0.5, ..Default::default() }, "declared.slack"),
            (DeclaredConfig { grace_s: -1.0, ..Default::default() }, "declared.grace_s"),
            (DeclaredConfig { distrust_s: f64::NAN, ..Default::default() }, "declared.distrust_s"),
        ] {
            assert!(c.check().unwrap_err().contains(key));
        }
        assert!(DeclaredConfig::default().check().is_ok());
    }
}

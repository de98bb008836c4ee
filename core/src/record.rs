//! The typed job record: everything cellsched writes into a DL job's Slurm
//! `AdminComment`, with its one printer ([`DlRecord`]'s `Display`) and its
//! one parser ([`DlRecord::parse`]).
//!
//! The text form is part of the product's interface (`sacct -o AdminComment`,
//! `cellsched report`), one line of `key=value` words after a fixed prefix:
//!
//! ```text
//! cellsched: cell=a100x4x1 nodes=1 dp=4 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.123400 src=datasheet
//!            model=gpt__1.3B batch=64 iters=5000 gpus=4 deadline=1795000000 limit_min=130
//!            plan_iter_s=0.1 replanned_from=v100x8x1 moved_at=1795000100 restarts=1
//!            types=a100,v100
//!            elastic=USR1 reconf_at=1795000500 reconfs_h=1795000500 restart_s=51.4 reconf_cost_s=80.9
//! ```
//!
//! The first ten words are the [`Decision`] (also the job environment's
//! `CELLSCHED_DECISION`); the rest are optional facts, each printed only
//! when known, in the order of [`DlRecord`]'s fields. Text before the prefix
//! (an admin's own comment, kept as `ADMIN TEXT; cellsched: ...`) is ignored;
//! unknown words after it are skipped, so a newer writer's records stay
//! readable. Only job_submit/cellsched writes AdminComment (users cannot),
//! so a parsed record is trusted; a decision that could not have been
//! written by the plugins ([`Decision::is_consistent`]) makes the whole
//! record unreadable.
//!
//! **Privacy.** Every user can read every job's AdminComment (`scontrol show
//! job`, `sacct`). With `[privacy] admin_comment = "minimal"`
//! ([`PrivacyConfig`]) the job's private facts ([`PRIVATE_WORDS`]: model,
//! batch, iterations, deadline) leave AdminComment: it keeps the decision,
//! the public facts and `private=REF`, a random reference, and the private
//! words go to the job's `spank_job_env` as `CELLSCHED_PRIVATE_RECORD=REF
//! model=... batch=...` ([`PRIVATE_ENV_KEY`]). slurmctld keeps
//! `spank_job_env` in its state (it survives restarts) and shows it to no
//! client (`scontrol`, `squeue` and accounting never get it), while both
//! slurmctld plugins read it with the job. [`DlRecord::of_job`] joins the
//! two; the private words count only when their reference matches the one
//! in AdminComment, so an entry a user set at submit is never read.
//! (`spank_job_env` rather than a root-only file under StateSaveLocation:
//! job_submit does not know the job id yet, would do file I/O under
//! slurmctld's locks, and a file would need its own expiry; the job's own
//! environment is saved, restored and freed with the job.)
use crate::cell::{parse_bool, Cell, Decision, EstimateSource, Plan};
use crate::signal::ElasticSignal;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// What marks an `AdminComment` holding a cellsched record.
pub const PREFIX: &str = "cellsched:";

/// The `spank_job_env` entry holding a minimal record's private words
/// (`REF model=... batch=... iters=... deadline=...`).
pub const PRIVATE_ENV_KEY: &str = "CELLSCHED_PRIVATE_RECORD";

/// The words `[privacy] admin_comment = "minimal"` keeps out of AdminComment.
pub const PRIVATE_WORDS: &[&str] = &["model", "batch", "iters", "deadline", "infeasible_deadline"];

/// `[privacy]` in cellsched.toml: what other users may read of a DL job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrivacyConfig {
    /// What AdminComment holds (jobs submitted after a change).
    pub admin_comment: AdminCommentPrivacy,
}

/// `privacy.admin_comment`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdminCommentPrivacy {
    /// The whole record (model, batch, iterations, deadline included).
    #[default]
    Full,
    /// The decision and public facts only; the private words go to
    /// `spank_job_env` ([`PRIVATE_ENV_KEY`]).
    Minimal,
}

impl PrivacyConfig {
    /// `record` as job_submit stores it at submit: with `minimal`, marked
    /// private under a fresh random reference ([`DlRecord::private_ref`]).
    pub fn apply(&self, record: DlRecord) -> DlRecord {
        match self.admin_comment {
            AdminCommentPrivacy::Full => DlRecord { private_ref: None, ..record },
            AdminCommentPrivacy::Minimal => DlRecord { private_ref: Some(new_private_ref()), ..record },
        }
    }
}

/// A fresh reference for a private record: 16 hex digits no user can
/// predict (std's randomly keyed SipHash over the time and a counter).
pub fn new_private_ref() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    format!("{:016x}", h.finish())
}

fn is_private_ref(r: &str) -> bool {
    r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// What cellsched recorded about a DL job: its decision and the facts that
/// ranking, re-planning, the overrun check, reports and the simulator read.
#[derive(Debug, Clone, PartialEq)]
pub struct DlRecord {
    /// The placement decision (Cell, nodes, plan, predicted seconds per iteration).
    pub decision: Decision,
    /// `model=`: the catalog name of the model (absent for names that
    /// cannot be one word).
    pub model: Option<String>,
    /// `batch=`: the global batch size.
    pub batch: Option<u64>,
    /// `iters=`: the iterations the user declared (`--dl-iters`).
    pub iters: Option<u64>,
    /// `gpus=`: the GPU count the user's own untyped request fixed (re-planning keeps it).
    pub fixed_gpus: Option<u32>,
    /// `deadline=`: the Unix time `--dl-deadline` resolved to at submit.
    pub deadline: Option<i64>,
    /// `limit_min=`: the time limit (minutes) cellsched set from the declared work.
    pub limit_min: Option<u32>,
    /// `plan_iter_s=`: seconds per iteration of the Cell the job was planned
    /// on before its first re-planning move (later moves are bounded by it).
    pub plan_iter_s: Option<f64>,
    /// `replanned_from=`: the Cell of the decision a re-planning move replaced.
    pub replanned_from: Option<Cell>,
    /// `moved_at=`: the Unix time of the last re-planning move or re-plan
    /// on an edit (the re-planning cool-down, `placement.replan_cooldown_s`,
    /// counts from it).
    pub moved_at: Option<i64>,
    /// `restarts=`: how often the job was restarted on a new decision (0 is not printed).
    pub restarts: u32,
    /// `types=`: the GPU types a job array's tasks may run on, the
    /// decision's type first (printed only with two or more): each task is
    /// planned on its node for the GPUs it was granted. Empty for other jobs.
    pub types: Vec<String>,
    /// `slowest_iter_s=`: with [`DlRecord::types`], the predicted seconds
    /// per iteration on the slowest of them (the declared work's time limit
    /// and overrun check count from it, so no task is cut short on a slower type).
    pub slowest_iter_s: Option<f64>,
    /// `elastic=`: the job opted in to reconfiguration (`--dl-elastic`) and
    /// checkpoints on this signal.
    pub elastic: Option<ElasticSignal>,
    /// `reconf_at=`: the Unix time of the last reconfiguration signal.
    pub reconf_at: Option<i64>,
    /// `reconfs_h=`: the Unix times of the reconfigurations within the hour
    /// up to the last one (comma-separated; empty is not printed), for
    /// `elastic.max_per_hour`.
    pub reconfs_h: Vec<i64>,
    /// `restart_s=`: seconds from a cold start of this job's model to the
    /// end of its first iteration, measured by the profiler (profile DB
    /// `first_iter_s`); a restart adds reading the checkpoint back.
    pub restart_s: Option<f64>,
    /// `reconf_cost_s=`: seconds lost to reconfigurations so far (save and
    /// restart; 0 is not printed).
    pub reconf_cost_s: f64,
    /// `infeasible_deadline=`: the Unix time of a `--dl-deadline` the job
    /// could not meet even alone on its fastest Cell, dropped at submit
    /// (the job runs best effort; its user loses deadline urgency).
    pub infeasible_deadline: Option<i64>,
    /// `private=`: the reference of the private words kept in
    /// `spank_job_env` ([`PRIVATE_ENV_KEY`]); when set, [`PRIVATE_WORDS`]
    /// are not printed in AdminComment ([`DlRecord::private_text`] holds them).
    pub private_ref: Option<String>,
}

/// True when `t` can be one entry of `types=` (a GRES type name).
fn is_type_word(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// `types=` entries; a list with a bad entry, or fewer than two, is none.
fn parse_types(v: &str) -> Vec<String> {
    let t: Vec<String> = v.split(',').map(str::to_string).collect();
    if t.len() > 1 && t.iter().all(|x| is_type_word(x)) {
        t
    } else {
        Vec::new()
    }
}

/// Most entries kept in `reconfs_h=` (`elastic.max_per_hour` is at most 60).
pub const MAX_RECONFS_KEPT: usize = 64;

/// One hour, the window of `reconfs_h=`.
const HOUR_S: i64 = 3600;

/// True when `name` can be printed as one `model=` word.
pub fn is_one_word(name: &str) -> bool {
    !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || c == '=' || c == ';')
}

impl DlRecord {
    /// A record holding only `decision`.
    pub fn new(decision: Decision) -> DlRecord {
        DlRecord {
            decision,
            model: None,
            batch: None,
            iters: None,
            fixed_gpus: None,
            deadline: None,
            limit_min: None,
            plan_iter_s: None,
            replanned_from: None,
            moved_at: None,
            restarts: 0,
            types: Vec::new(),
            slowest_iter_s: None,
            elastic: None,
            reconf_at: None,
            reconfs_h: Vec::new(),
            restart_s: None,
            reconf_cost_s: 0.0,
            infeasible_deadline: None,
            private_ref: None,
        }
    }

    /// The record of a job from its AdminComment and its `spank_job_env`
    /// entries: [`DlRecord::parse`], plus the private words of the
    /// [`PRIVATE_ENV_KEY`] entry when its reference matches `private=`.
    pub fn of_job<S: AsRef<str>>(admin_comment: &str, env: &[S]) -> Option<DlRecord> {
        DlRecord::parse_with_private(admin_comment, private_entry(env))
    }

    /// [`DlRecord::parse`] joined with `private` (a [`PRIVATE_ENV_KEY`]
    /// value): its words count only when it starts with the record's
    /// `private=` reference, and only [`PRIVATE_WORDS`] are read from it.
    pub fn parse_with_private(admin_comment: &str, private: Option<&str>) -> Option<DlRecord> {
        let mut r = DlRecord::parse(admin_comment)?;
        let (Some(want), Some(text)) = (r.private_ref.clone(), private) else { return Some(r) };
        let mut words = text.split_whitespace();
        if words.next() != Some(want.as_str()) {
            return Some(r);
        }
        for (k, v) in words.filter_map(|w| w.split_once('=')) {
            if PRIVATE_WORDS.contains(&k) {
                r.set_fact(k, v);
            }
        }
        Some(r)
    }

    /// The [`PRIVATE_ENV_KEY`] value of a private record (`REF` and its
    /// private words); `None` when the record is not private.
    pub fn private_text(&self) -> Option<String> {
        let r = self.private_ref.as_deref()?;
        let mut out = r.to_string();
        self.write_private(&mut out);
        Some(out)
    }

    fn write_private(&self, out: &mut String) {
        use std::fmt::Write;
        if let Some(m) = self.model.as_deref().filter(|m| is_one_word(m)) {
            let _ = write!(out, " model={m}");
        }
        if let Some(b) = self.batch {
            let _ = write!(out, " batch={b}");
        }
        if let Some(n) = self.iters {
            let _ = write!(out, " iters={n}");
        }
        if let Some(d) = self.deadline {
            let _ = write!(out, " deadline={d}");
        }
        if let Some(d) = self.infeasible_deadline {
            let _ = write!(out, " infeasible_deadline={d}");
        }
    }

    /// Sets the fact of word `k` from `v` (a bad value leaves it unknown).
    fn set_fact(&mut self, k: &str, v: &str) {
        match k {
            "model" => self.model = Some(v.to_string()).filter(|m| is_one_word(m)),
            "batch" => self.batch = v.parse().ok(),
            "iters" => self.iters = v.parse().ok(),
            "gpus" => self.fixed_gpus = v.parse().ok(),
            "deadline" => self.deadline = v.parse().ok(),
            "limit_min" => self.limit_min = v.parse().ok(),
            "plan_iter_s" => self.plan_iter_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0),
            "replanned_from" => self.replanned_from = v.parse().ok(),
            "moved_at" => self.moved_at = v.parse().ok(),
            "restarts" => self.restarts = v.parse().unwrap_or(0),
            "types" => self.types = parse_types(v),
            "slowest_iter_s" => self.slowest_iter_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0),
            "elastic" => self.elastic = v.parse().ok(),
            "reconf_at" => self.reconf_at = v.parse().ok(),
            "reconfs_h" => self.reconfs_h = v.split(',').map_while(|t| t.parse().ok()).take(MAX_RECONFS_KEPT).collect(),
            "restart_s" => self.restart_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0),
            "reconf_cost_s" => self.reconf_cost_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0),
            "infeasible_deadline" => self.infeasible_deadline = v.parse().ok(),
            "private" => self.private_ref = Some(v.to_string()).filter(|r| is_private_ref(r)),
            _ => {}
        }
    }

    /// Parses the record in an `AdminComment` (or a `CELLSCHED_DECISION`
    /// value); `None` when the text holds none or its decision is not
    /// self-consistent.
    pub fn parse(text: &str) -> Option<DlRecord> {
        let start = text.find(PREFIX)? + PREFIX.len();
        let mut cell = None;
        let mut nodes = None;
        let mut plan = Plan::default();
        let mut iter_s = None;
        let mut source = EstimateSource::Datasheet;
        let words = || text[start..].split_whitespace().map_while(|tok| tok.split_once('='));
        // The decision first (a record without a consistent one is none), then the facts.
        for (k, v) in words() {
            match k {
                "cell" => cell = v.parse::<Cell>().ok(),
                "nodes" => nodes = v.parse().ok(),
                "dp" => plan.dp = v.parse().ok()?,
                "tp" => plan.tp = v.parse().ok()?,
                "pp" => plan.pp = v.parse().ok()?,
                "mb" => plan.micro_batches = v.parse().ok()?,
                "zero" => plan.zero_stage = v.parse().ok()?,
                "ckpt" => plan.checkpointing = parse_bool(v)?,
                "iter_s" => iter_s = v.parse().ok(),
                "src" => source = v.parse().ok()?,
                _ => {}
            }
        }
        let decision = Decision { cell: cell?, nodes: nodes?, plan, iter_s: iter_s?, source };
        if !decision.is_consistent() {
            return None;
        }
        let mut r = DlRecord::new(decision);
        for (k, v) in words() {
            r.set_fact(k, v);
        }
        Some(r)
    }

    /// The declared iterations and the decision's seconds per iteration,
    /// `None` without declared iterations: what the overrun check reads.
    pub fn declared_work(&self) -> Option<(u64, f64)> {
        Some((self.iters?, self.work_iter_s()))
    }

    /// The seconds per iteration the declared work is measured with: the
    /// decision's, or for an array with a type set the slowest type's.
    pub fn work_iter_s(&self) -> f64 {
        match self.slowest_iter_s {
            Some(s) if self.types.len() > 1 => s.max(self.decision.iter_s),
            _ => self.decision.iter_s,
        }
    }

    /// The same record with another decision: a re-planning move from
    /// `self.decision` to `to`, which keeps the job's facts, bounds later
    /// moves by `plan_iter_s` and sets the new time limit. The move names
    /// one Cell, so an array's type set is dropped.
    pub fn moved(&self, to: Decision, plan_iter_s: f64, limit_min: Option<u32>) -> DlRecord {
        DlRecord { replanned_from: Some(self.decision.cell.clone()), decision: to, plan_iter_s: Some(plan_iter_s), limit_min, types: Vec::new(), slowest_iter_s: None, ..self.clone() }
    }

    /// True when a task may run on GPUs of `gpu_type` under this record:
    /// the decision's type, or one of an array's [`DlRecord::types`]
    /// (compared case-insensitively).
    pub fn allows_type(&self, gpu_type: &str) -> bool {
        self.decision.cell.gpu_type.eq_ignore_ascii_case(gpu_type) || self.types.iter().any(|t| t.eq_ignore_ascii_case(gpu_type))
    }

    /// Reconfigurations in the hour up to `now` (`reconfs_h`).
    pub fn reconfs_in_hour(&self, now: i64) -> usize {
        self.reconfs_h.iter().filter(|t| now - **t < HOUR_S && **t <= now).count()
    }

    /// The record after a reconfiguration signal at `now`: `reconf_at`,
    /// `reconfs_h` (older than an hour dropped) and `restarts` updated.
    pub fn reconfigured(&self, now: i64) -> DlRecord {
        let mut times: Vec<i64> = self.reconfs_h.iter().copied().filter(|t| now - *t < HOUR_S && *t <= now).collect();
        times.push(now);
        let skip = times.len().saturating_sub(MAX_RECONFS_KEPT);
        DlRecord { reconf_at: Some(now), reconfs_h: times.split_off(skip), restarts: self.restarts.saturating_add(1), ..self.clone() }
    }

    /// The record with `seconds` more lost to reconfigurations.
    pub fn with_reconf_cost(&self, seconds: f64) -> DlRecord {
        let add = if seconds.is_finite() && seconds > 0.0 { seconds } else { 0.0 };
        DlRecord { reconf_cost_s: self.reconf_cost_s + add, ..self.clone() }
    }

    /// The text to store as the job's `AdminComment`: `existing` (an
    /// admin's own comment, without any earlier cellsched record) kept in
    /// front, then this record.
    pub fn admin_comment_after(&self, existing: Option<&str>) -> String {
        match existing.map(|c| c.find(PREFIX).map_or(c, |i| c[..i].trim_end().trim_end_matches(';').trim_end())).filter(|c| !c.is_empty()) {
            Some(c) => format!("{c}; {self}"),
            None => self.to_string(),
        }
    }
}

/// The [`PRIVATE_ENV_KEY`] value among `spank_job_env` entries (exactly
/// that name, no SPANK prefix; the last one counts).
pub fn private_entry<S: AsRef<str>>(env: &[S]) -> Option<&str> {
    env.iter().rev().find_map(|e| e.as_ref().strip_prefix(PRIVATE_ENV_KEY).and_then(|r| r.strip_prefix('=')))
}

/// True for the `spank_job_env` entry of a private record (hosts copy it
/// with the `CELLSCHED_DL_*` entries).
pub fn is_private_entry(entry: &str) -> bool {
    entry.strip_prefix(PRIVATE_ENV_KEY).is_some_and(|r| r.starts_with('='))
}

/// The AdminComment form: with a private reference the private words are
/// left out (they are in [`DlRecord::private_text`]) and `private=REF` ends it.
impl fmt::Display for DlRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.decision.to_admin_comment())?;
        let public = self.private_ref.is_none();
        if public {
            if let Some(m) = self.model.as_deref().filter(|m| is_one_word(m)) {
                write!(f, " model={m}")?;
            }
            if let Some(b) = self.batch {
                write!(f, " batch={b}")?;
            }
            if let Some(n) = self.iters {
                write!(f, " iters={n}")?;
            }
        }
        if let Some(n) = self.fixed_gpus {
            write!(f, " gpus={n}")?;
        }
        if let Some(d) = self.deadline.filter(|_| public) {
            write!(f, " deadline={d}")?;
        }
        if let Some(m) = self.limit_min {
            write!(f, " limit_min={m}")?;
        }
        if let Some(s) = self.plan_iter_s {
            write!(f, " plan_iter_s={s}")?;
        }
        if let Some(c) = &self.replanned_from {
            write!(f, " replanned_from={c}")?;
        }
        if let Some(t) = self.moved_at {
            write!(f, " moved_at={t}")?;
        }
        if self.restarts > 0 {
            write!(f, " restarts={}", self.restarts)?;
        }
        if self.types.len() > 1 && self.types.iter().all(|t| is_type_word(t)) {
            write!(f, " types={}", self.types.join(","))?;
            if let Some(s) = self.slowest_iter_s {
                write!(f, " slowest_iter_s={s}")?;
            }
        }
        if let Some(sig) = self.elastic {
            write!(f, " elastic={sig}")?;
        }
        if let Some(t) = self.reconf_at {
            write!(f, " reconf_at={t}")?;
        }
        if !self.reconfs_h.is_empty() {
            let times: Vec<String> = self.reconfs_h.iter().map(i64::to_string).collect();
            write!(f, " reconfs_h={}", times.join(","))?;
        }
        if let Some(s) = self.restart_s {
            write!(f, " restart_s={s}")?;
        }
        if self.reconf_cost_s > 0.0 {
            write!(f, " reconf_cost_s={}", self.reconf_cost_s)?;
        }
        match &self.private_ref {
            None => {
                if let Some(d) = self.infeasible_deadline {
                    write!(f, " infeasible_deadline={d}")?;
                }
            }
            Some(r) => write!(f, " private={r}")?,
        }
        Ok(())
    }
}

impl Decision {
    /// The decision's own text (`CELLSCHED_DECISION`, and the first words
    /// of every [`DlRecord`]): `cellsched: cell=.. nodes=.. dp=.. ...`.
    pub fn to_admin_comment(&self) -> String {
        format!(
            "{PREFIX} cell={} nodes={} dp={} tp={} pp={} mb={} zero={} ckpt={} iter_s={:.6} src={}",
            self.cell,
            self.nodes,
            self.plan.dp,
            self.plan.tp,
            self.plan.pp,
            self.plan.micro_batches,
            self.plan.zero_stage,
            u8::from(self.plan.checkpointing),
            self.iter_s,
            self.source
        )
    }

    /// The decision of the record in `text` ([`DlRecord::parse`]).
    pub fn parse_admin_comment(text: &str) -> Option<Decision> {
        DlRecord::parse(text).map(|r| r.decision)
    }
}

/// AdminComment per job id from multi-line `scontrol show job` output
/// (jobs without one are absent). Only the `AdminComment=` line counts:
/// users can write `Comment=`, never AdminComment.
pub fn admin_comments_of_scontrol(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut id: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("JobId=") {
            id = rest.split_whitespace().next().map(str::to_string);
        } else if let (Some(c), Some(j)) = (admin_comment_line(t), &id) {
            out.insert(j.clone(), c.trim_end().to_string());
        }
    }
    out
}

fn admin_comment_line(line: &str) -> Option<&str> {
    line.strip_prefix("AdminComment=")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Decision {
        Decision { cell: Cell::new("v100", 8, 2).unwrap(), nodes: 1, plan: "dp=2,tp=2,pp=2,mb=4,zero=1,ckpt=on".parse().unwrap(), iter_s: 0.25, source: EstimateSource::Calibrated }
    }

    #[test]
    fn every_field_round_trips_and_unset_fields_are_not_printed() {
        let full = DlRecord {
            decision: decision(),
            model: Some("gpt__1.3B".into()),
            batch: Some(64),
            iters: Some(5000),
            fixed_gpus: Some(8),
            deadline: Some(1_795_000_000),
            limit_min: Some(130),
            plan_iter_s: Some(0.125),
            replanned_from: Some(Cell::new("a100", 4, 1).unwrap()),
            moved_at: Some(1_795_000_100),
            restarts: 2,
            types: vec!["v100".into(), "a100".into()],
            slowest_iter_s: Some(0.5),
            elastic: Some(ElasticSignal::USR1),
            reconf_at: Some(1_795_000_500),
            reconfs_h: vec![1_795_000_200, 1_795_000_500],
            restart_s: Some(51.4),
            reconf_cost_s: 80.9,
            infeasible_deadline: Some(1_794_000_000),
            private_ref: None,
        };
        let text = full.to_string();
        assert_eq!(DlRecord::parse(&text), Some(full.clone()));
        assert!(text.ends_with("model=gpt__1.3B batch=64 iters=5000 gpus=8 deadline=1795000000 limit_min=130 plan_iter_s=0.125 replanned_from=a100x4x1 moved_at=1795000100 restarts=2 types=v100,a100 slowest_iter_s=0.5 elastic=USR1 reconf_at=1795000500 reconfs_h=1795000200,1795000500 restart_s=51.4 reconf_cost_s=80.9 infeasible_deadline=1794000000"), "{text}");
        assert_eq!(full.declared_work(), Some((5000, 0.5)), "an array's work is measured on its slowest type");
        let bare = DlRecord::new(decision());
        assert_eq!(bare.to_string(), decision().to_admin_comment());
        assert_eq!(DlRecord::parse(&bare.to_string()), Some(bare));
        assert_eq!(Decision::parse_admin_comment(&text), Some(decision()));
    }

    /// `[privacy] admin_comment = "minimal"`: AdminComment holds no private
    /// word; the private text joins it back only under its own reference.
    #[test]
    fn a_private_record_keeps_its_private_words_out_of_admin_comment() {
        let full = DlRecord {
            model: Some("gpt__1.3B".into()),
            batch: Some(64),
            iters: Some(5000),
            deadline: Some(1_795_000_000),
            infeasible_deadline: Some(1_794_000_000),
            fixed_gpus: Some(8),
            limit_min: Some(130),
            ..DlRecord::new(decision())
        };
        let full_cfg = PrivacyConfig::default();
        assert_eq!(full_cfg.apply(full.clone()), full, "full is the default and changes nothing");
        let minimal = PrivacyConfig { admin_comment: AdminCommentPrivacy::Minimal };
        let private = minimal.apply(full.clone());
        let r = private.private_ref.clone().expect("a reference");
        assert!(is_private_ref(&r), "{r}");
        assert_ne!(minimal.apply(full.clone()).private_ref, Some(r.clone()), "every job gets its own reference");
        let comment = private.to_string();
        for w in PRIVATE_WORDS {
            assert!(!comment.contains(&format!("{w}=")), "{w} in {comment}");
        }
        for v in ["gpt__1.3B", "64", "5000", "1795000000", "1794000000"] {
            assert!(!comment.split_whitespace().any(|t| t.ends_with(&format!("={v}"))), "{v} in {comment}");
        }
        assert!(comment.ends_with(&format!("gpus=8 limit_min=130 private={r}")), "{comment}");
        let env_value = private.private_text().unwrap();
        assert_eq!(env_value, format!("{r} model=gpt__1.3B batch=64 iters=5000 deadline=1795000000 infeasible_deadline=1794000000"));
        assert_eq!(full.private_text(), None);
        // Alone, AdminComment gives the decision and the public facts only.
        let public = DlRecord::parse(&comment).unwrap();
        assert_eq!((public.decision.clone(), public.iters, public.model.clone(), public.deadline, public.limit_min), (decision(), None, None, None, Some(130)));
        // With its spank_job_env entry, the whole record; it prints back the same way.
        let env = vec!["CELLSCHED_DL_BATCH=64".to_string(), format!("{PRIVATE_ENV_KEY}={env_value}")];
        let joined = DlRecord::of_job(&comment, &env).unwrap();
        assert_eq!(joined, private);
        assert_eq!(joined.to_string(), comment);
        assert!(env.iter().any(|e| is_private_entry(e)) && !is_private_entry("CELLSCHED_PRIVATE_RECORDX=1"));
        // An entry under another reference (one a user set at submit) is not read,
        // nor is one under a SPANK prefix, nor words that are not private.
        let forged = vec![format!("{PRIVATE_ENV_KEY}=0123456789abcdef iters=1 deadline=1")];
        assert_eq!(DlRecord::of_job(&comment, &forged).unwrap().iters, None);
        let prefixed = vec![format!("SPANK_{PRIVATE_ENV_KEY}={env_value}")];
        assert_eq!(DlRecord::of_job(&comment, &prefixed).unwrap().iters, None);
        let sneaky = vec![format!("{PRIVATE_ENV_KEY}={r} iters=7 limit_min=99999 gpus=1 iter_s=0.000001")];
        let s = DlRecord::of_job(&comment, &sneaky).unwrap();
        assert_eq!((s.iters, s.limit_min, s.fixed_gpus, s.decision.iter_s), (Some(7), Some(130), Some(8), decision().iter_s));
        // A full record ignores any private entry.
        assert_eq!(DlRecord::of_job(&full.to_string(), &forged).unwrap(), full);
        // A re-planning move keeps the reference (the private entry stays valid).
        let moved = joined.moved(decision(), 0.5, Some(40));
        assert_eq!(moved.private_ref, Some(r.clone()));
        assert!(moved.to_string().ends_with(&format!("private={r}")) && !moved.to_string().contains("iters="));
        // A malformed reference is none.
        assert_eq!(DlRecord::parse(&format!("{} private=xyz", decision().to_admin_comment())).unwrap().private_ref, None);
    }

    #[test]
    fn text_before_the_prefix_is_kept_apart_and_ignored() {
        let r = DlRecord { iters: Some(10), ..DlRecord::new(decision()) };
        let stored = r.admin_comment_after(Some("ticket 42 iters=999"));
        assert!(stored.starts_with("ticket 42 iters=999; cellsched:"), "{stored}");
        assert_eq!(DlRecord::parse(&stored).unwrap().iters, Some(10));
        // A re-written record replaces the earlier one and keeps the admin's text once.
        let again = DlRecord { iters: Some(11), ..r.clone() }.admin_comment_after(Some(&stored));
        assert_eq!(again.matches(PREFIX).count(), 1, "{again}");
        assert!(again.starts_with("ticket 42 iters=999; "), "{again}");
        assert_eq!(r.admin_comment_after(None), r.to_string());
        assert_eq!(r.admin_comment_after(Some("")), r.to_string());
        assert_eq!(DlRecord::parse("iters=10 model=x"), None, "no record without the prefix");
    }

    #[test]
    fn a_move_keeps_the_facts_and_names_where_it_came_from() {
        let r = DlRecord { model: Some("m".into()), batch: Some(8), iters: Some(100), ..DlRecord::new(decision()) };
        let mut to = decision();
        to.cell = Cell::new("a100", 4, 2).unwrap();
        to.plan = "dp=1,tp=2,pp=2".parse().unwrap();
        let m = r.moved(to.clone(), 0.25, Some(30));
        assert_eq!((m.model.as_deref(), m.batch, m.iters), (Some("m"), Some(8), Some(100)));
        assert_eq!((m.plan_iter_s, m.limit_min, m.replanned_from.clone()), (Some(0.25), Some(30), Some(decision().cell)));
        assert_eq!(DlRecord::parse(&m.to_string()), Some(m));
        // An array's type set names no single Cell: a move drops it.
        let set = DlRecord { types: vec!["v100".into(), "a100".into()], slowest_iter_s: Some(0.75), ..r.clone() };
        assert!(set.allows_type("A100") && set.allows_type("v100") && !set.allows_type("a10"));
        let moved = set.moved(to, 0.25, None);
        assert!(moved.types.is_empty() && moved.slowest_iter_s.is_none());
        assert_eq!(moved.declared_work(), Some((100, moved.decision.iter_s)));
        assert!(r.allows_type("v100") && !r.allows_type("a100"));
    }

    #[test]
    fn bad_values_drop_the_fact_and_bad_decisions_the_record() {
        let text = format!("{} iters=x batch=-1 plan_iter_s=NaN deadline=soon model= moved_at=later types=a100,,v100 newer_key=1", decision().to_admin_comment());
        let r = DlRecord::parse(&text).unwrap();
        assert_eq!((r.iters, r.batch, r.plan_iter_s, r.deadline, r.model, r.moved_at), (None, None, None, None, None, None));
        assert!(r.types.is_empty());
        assert!(DlRecord::parse(&format!("{} types=a100", decision().to_admin_comment())).unwrap().types.is_empty(), "one type is no set");
        assert_eq!(DlRecord::parse(&decision().to_admin_comment().replace("dp=2", "dp=3")), None);
        let spaced = DlRecord { model: Some("a b".into()), ..DlRecord::new(decision()) };
        assert!(!spaced.to_string().contains("model="));
    }

    #[test]
    fn reconfigurations_are_counted_per_hour() {
        let r = DlRecord { elastic: Some(ElasticSignal::USR1), ..DlRecord::new(decision()) };
        let a = r.reconfigured(10_000);
        assert_eq!((a.reconf_at, a.restarts, a.reconfs_in_hour(10_000)), (Some(10_000), 1, 1));
        let b = a.reconfigured(12_000).with_reconf_cost(80.0).with_reconf_cost(f64::NAN);
        assert_eq!((b.reconfs_in_hour(12_000), b.reconfs_in_hour(13_700), b.restarts, b.reconf_cost_s), (2, 1, 2, 80.0));
        // The hour-old entry is dropped when the next one is written.
        let c = b.reconfigured(13_700);
        assert_eq!(c.reconfs_h, vec![12_000, 13_700]);
        assert_eq!(DlRecord::parse(&c.to_string()), Some(c));
        let bad = format!("{} elastic=KILL reconfs_h=1,x,3 restart_s=-1 reconf_cost_s=inf", decision().to_admin_comment());
        let p = DlRecord::parse(&bad).unwrap();
        assert_eq!((p.elastic, p.reconfs_h, p.restart_s, p.reconf_cost_s), (None, vec![1], None, 0.0));
    }

    #[test]
    fn scontrol_show_job_comments_by_id() {
        let text = "JobId=7 JobName=a\n   AdminComment=cellsched: cell=a100x1 x \nJobId=8 JobName=b\n   Comment=z\n";
        let m = admin_comments_of_scontrol(text);
        assert_eq!(m.get("7").map(String::as_str), Some("cellsched: cell=a100x1 x"));
        assert!(!m.contains_key("8"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// Any text parses or is refused, never panics; what parses prints back to the same record.
        #[test]
        fn parser_never_panics_and_round_trips(s in proptest::prelude::any::<String>(), near in "[a-z0-9_=. ]{0,80}") {
            for t in [s.clone(), format!("{} {near}", decision().to_admin_comment())] {
                if let Some(r) = DlRecord::parse(&t) {
                    proptest::prop_assert!(r.decision.is_consistent());
                    // Printing rounds iter_s to microseconds once; from then on the text is stable.
                    let printed = r.to_string();
                    proptest::prop_assert_eq!(DlRecord::parse(&printed).map(|x| x.to_string()), Some(printed));
                }
            }
        }
    }
}

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
use crate::cell::{parse_bool, Cell, Decision, EstimateSource, Plan};
use crate::signal::ElasticSignal;
use std::collections::HashMap;
use std::fmt;

/// What marks an `AdminComment` holding a cellsched record.
pub const PREFIX: &str = "cellsched:";

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
    /// `elastic=`: the job opted in to reconfiguration (`--dl-elastic`) and
    /// checkpoints on this signal.
    pub elastic: Option<ElasticSignal>,
    /// `reconf_at=`: the Unix time of the last reconfiguration signal.
    pub reconf_at: Option<i64>,
    /// `reconfs_h=`: the Unix times of the reconfigurations within the hour
    /// up to the last one (comma-separated; empty is not printed), for
    /// `elastic.max_per_hour`.
    pub reconfs_h: Vec<i64>,
    /// `restart_s=`: this job's measured restart cost, seconds from its
    /// start to its first iteration.
    pub restart_s: Option<f64>,
    /// `reconf_cost_s=`: seconds lost to reconfigurations so far (save and
    /// restart; 0 is not printed).
    pub reconf_cost_s: f64,
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
        DlRecord { decision, model: None, batch: None, iters: None, fixed_gpus: None, deadline: None, limit_min: None, plan_iter_s: None, replanned_from: None, moved_at: None, restarts: 0, elastic: None, reconf_at: None, reconfs_h: Vec::new(), restart_s: None, reconf_cost_s: 0.0 }
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
            match k {
                "model" => r.model = Some(v.to_string()).filter(|m| is_one_word(m)),
                "batch" => r.batch = v.parse().ok(),
                "iters" => r.iters = v.parse().ok(),
                "gpus" => r.fixed_gpus = v.parse().ok(),
                "deadline" => r.deadline = v.parse().ok(),
                "limit_min" => r.limit_min = v.parse().ok(),
                "plan_iter_s" => r.plan_iter_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0),
                "replanned_from" => r.replanned_from = v.parse().ok(),
                "moved_at" => r.moved_at = v.parse().ok(),
                "restarts" => r.restarts = v.parse().unwrap_or(0),
                "elastic" => r.elastic = v.parse().ok(),
                "reconf_at" => r.reconf_at = v.parse().ok(),
                "reconfs_h" => {
                    r.reconfs_h = v.split(',').map_while(|t| t.parse().ok()).take(MAX_RECONFS_KEPT).collect();
                }
                "restart_s" => r.restart_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0),
                "reconf_cost_s" => r.reconf_cost_s = v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0),
                _ => {}
            }
        }
        Some(r)
    }

    /// The declared iterations and the decision's seconds per iteration,
    /// `None` without declared iterations: what the overrun check reads.
    pub fn declared_work(&self) -> Option<(u64, f64)> {
        Some((self.iters?, self.decision.iter_s))
    }

    /// The same record with another decision: a re-planning move from
    /// `self.decision` to `to`, which keeps the job's facts, bounds later
    /// moves by `plan_iter_s` and sets the new time limit.
    pub fn moved(&self, to: Decision, plan_iter_s: f64, limit_min: Option<u32>) -> DlRecord {
        DlRecord { replanned_from: Some(self.decision.cell.clone()), decision: to, plan_iter_s: Some(plan_iter_s), limit_min, ..self.clone() }
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

impl fmt::Display for DlRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.decision.to_admin_comment())?;
        if let Some(m) = self.model.as_deref().filter(|m| is_one_word(m)) {
            write!(f, " model={m}")?;
        }
        if let Some(b) = self.batch {
            write!(f, " batch={b}")?;
        }
        if let Some(n) = self.iters {
            write!(f, " iters={n}")?;
        }
        if let Some(n) = self.fixed_gpus {
            write!(f, " gpus={n}")?;
        }
        if let Some(d) = self.deadline {
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
            elastic: Some(ElasticSignal::USR1),
            reconf_at: Some(1_795_000_500),
            reconfs_h: vec![1_795_000_200, 1_795_000_500],
            restart_s: Some(51.4),
            reconf_cost_s: 80.9,
        };
        let text = full.to_string();
        assert_eq!(DlRecord::parse(&text), Some(full.clone()));
        assert!(text.ends_with("model=gpt__1.3B batch=64 iters=5000 gpus=8 deadline=1795000000 limit_min=130 plan_iter_s=0.125 replanned_from=a100x4x1 moved_at=1795000100 restarts=2 elastic=USR1 reconf_at=1795000500 reconfs_h=1795000200,1795000500 restart_s=51.4 reconf_cost_s=80.9"), "{text}");
        let bare = DlRecord::new(decision());
        assert_eq!(bare.to_string(), decision().to_admin_comment());
        assert_eq!(DlRecord::parse(&bare.to_string()), Some(bare));
        assert_eq!(Decision::parse_admin_comment(&text), Some(decision()));
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
    }

    #[test]
    fn bad_values_drop_the_fact_and_bad_decisions_the_record() {
        let text = format!("{} iters=x batch=-1 plan_iter_s=NaN deadline=soon model= moved_at=later newer_key=1", decision().to_admin_comment());
        let r = DlRecord::parse(&text).unwrap();
        assert_eq!((r.iters, r.batch, r.plan_iter_s, r.deadline, r.model, r.moved_at), (None, None, None, None, None, None));
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

//! `--dl-deadline=TIME`: when a job must be done (Crius's deadline mode).
//!
//! Accepted forms, as Slurm writes times (`--begin`): `now+N[units]` (units
//! `s`/`sec`/`seconds` (default), `m`/`min`/`minutes`, `h`/`hours`,
//! `d`/`days`, `w`/`weeks`), `YYYY-MM-DD[THH:MM[:SS]]` and `HH:MM[:SS]`
//! (today, or tomorrow when that time has passed), in the submitting
//! host's local time. The text is kept as given in the job's environment and
//! resolved to a Unix time by job_submit at submit ([`Deadline::resolve`]),
//! which records it in the job's record (`crate::record::DlRecord::deadline`,
//! trusted from then on). The admin's `placement.deadline_policy` decides what happens
//! when no Cell can finish in time: `warn` (default, a message at submit)
//! or `strict` (the submission is refused).
use crate::error::CoreError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The allowed form, for help text and errors.
pub const DEADLINE_FORM: &str = "now+N[s|m|h|d|w], YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS] (local time)";

/// Longest deadline accepted: ten years ahead.
pub const MAX_AHEAD_S: i64 = 10 * 366 * 86_400;

/// A parsed `--dl-deadline` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// `now+N`: seconds after submission.
    After(i64),
    /// A local calendar time.
    At {
        /// Year (1970-9999).
        year: i32,
        /// Month (1-12).
        month: u32,
        /// Day of the month.
        day: u32,
        /// Hour (0-23).
        hour: u32,
        /// Minute (0-59).
        minute: u32,
        /// Second (0-59).
        second: u32,
    },
    /// A local time of day: the next one from submission.
    TimeOfDay {
        /// Hour (0-23).
        hour: u32,
        /// Minute (0-59).
        minute: u32,
        /// Second (0-59).
        second: u32,
    },
}

fn hms(s: &str) -> Result<(u32, u32, u32), &'static str> {
    let p: Vec<&str> = s.split(':').collect();
    if !(2..=3).contains(&p.len()) || p.iter().any(|x| x.is_empty() || x.len() > 2 || !x.bytes().all(|b| b.is_ascii_digit())) {
        return Err("a time is HH:MM or HH:MM:SS");
    }
    let n = |i: usize| p.get(i).map_or(0, |x| x.parse::<u32>().unwrap_or(99));
    let (h, m, sec) = (n(0), n(1), n(2));
    if h > 23 || m > 59 || sec > 59 {
        return Err("hours 0-23, minutes and seconds 0-59");
    }
    Ok((h, m, sec))
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl std::str::FromStr for Deadline {
    type Err = CoreError;
    fn from_str(v: &str) -> Result<Self, CoreError> {
        Deadline::parse(v).map_err(|why| CoreError::invalid("--dl-deadline value", v, format!("{DEADLINE_FORM}; {why}")))
    }
}

impl Deadline {
    /// Parses a deadline; the error says what is wrong with it.
    pub fn parse(v: &str) -> Result<Deadline, &'static str> {
        let t = v.trim();
        if let Some(rest) = t.strip_prefix("now+") {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let unit = rest[digits.len()..].to_ascii_lowercase();
            let n: i64 = digits.parse().map_err(|_| "now+ needs a number")?;
            let mult = match unit.as_str() {
                "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
                "m" | "min" | "mins" | "minute" | "minutes" => 60,
                "h" | "hour" | "hours" => 3600,
                "d" | "day" | "days" => 86_400,
                "w" | "week" | "weeks" => 7 * 86_400,
                _ => return Err("units are s, m, h, d or w"),
            };
            let s = n.checked_mul(mult).filter(|s| (1..=MAX_AHEAD_S).contains(s)).ok_or("at most ten years ahead and more than 0")?;
            return Ok(Deadline::After(s));
        }
        if t.len() >= 10 && t.as_bytes().get(4) == Some(&b'-') {
            let (date, time) = match t.split_once('T') {
                Some((d, tm)) => (d, Some(tm)),
                None => (t, None),
            };
            let p: Vec<&str> = date.split('-').collect();
            let ok = p.len() == 3 && p[0].len() == 4 && p[1].len() == 2 && p[2].len() == 2 && p.iter().all(|x| x.bytes().all(|b| b.is_ascii_digit()));
            if !ok {
                return Err("a date is YYYY-MM-DD");
            }
            let (year, month, day) = (p[0].parse::<i32>().unwrap_or(0), p[1].parse::<u32>().unwrap_or(0), p[2].parse::<u32>().unwrap_or(0));
            if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
                return Err("no such date");
            }
            let (hour, minute, second) = match time {
                Some(tm) => hms(tm)?,
                None => (0, 0, 0),
            };
            return Ok(Deadline::At { year, month, day, hour, minute, second });
        }
        if t.contains(':') {
            let (hour, minute, second) = hms(t)?;
            return Ok(Deadline::TimeOfDay { hour, minute, second });
        }
        Err("not a time")
    }
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deadline::After(s) => write!(f, "now+{s}"),
            Deadline::At { year, month, day, hour, minute, second } => {
                write!(f, "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}")
            }
            Deadline::TimeOfDay { hour, minute, second } => write!(f, "{hour:02}:{minute:02}:{second:02}"),
        }
    }
}

impl Deadline {
    /// The Unix time this deadline means for a job submitted at `now`
    /// (Unix seconds) on a host whose local time is `utc_offset_s` ahead of
    /// UTC. Errors when it is not in the future (or too far ahead).
    pub fn resolve(&self, now: i64, utc_offset_s: i64) -> Result<i64, CoreError> {
        let local_midnight = |days: i64| days * 86_400 - utc_offset_s;
        let at = match *self {
            Deadline::After(s) => now + s,
            Deadline::At { year, month, day, hour, minute, second } => {
                local_midnight(days_from_civil(year, month, day)) + i64::from(hour * 3600 + minute * 60 + second)
            }
            Deadline::TimeOfDay { hour, minute, second } => {
                let today = (now + utc_offset_s).div_euclid(86_400);
                let t = local_midnight(today) + i64::from(hour * 3600 + minute * 60 + second);
                if t > now {
                    t
                } else {
                    t + 86_400
                }
            }
        };
        if at <= now {
            return Err(CoreError::invalid("--dl-deadline value", self.to_string(), "a time in the future"));
        }
        if at - now > MAX_AHEAD_S {
            return Err(CoreError::invalid("--dl-deadline value", self.to_string(), "at most ten years ahead"));
        }
        Ok(at)
    }
}

/// What happens at submit when no Cell can meet a job's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeadlinePolicy {
    /// Place the job on its fastest Cell and tell the user (default).
    #[default]
    Warn,
    /// Refuse the submission with the predicted finish.
    Strict,
}

/// What a deadline becomes at submit, given the job's predicted run time
/// alone on its fastest Cell ([`admit`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The deadline is feasible (or cannot be checked): it is kept.
    Kept,
    /// Infeasible under [`DeadlinePolicy::Warn`]: the job runs best effort,
    /// without the deadline's urgency; the message says so.
    BestEffort(String),
    /// Infeasible under [`DeadlinePolicy::Strict`]: the submission is refused.
    Refused(String),
}

/// Admission control for a deadline due at `deadline` (Unix seconds) of a
/// job submitted at `now` whose fastest Cell is predicted to take
/// `best_run_s` seconds alone (`None` when the work is not declared). A
/// deadline the job cannot meet even alone on its best Cell never buys
/// urgency: it is dropped (best effort) or the job refused, by `policy`.
pub fn admit(deadline: i64, now: i64, best_run_s: Option<f64>, policy: DeadlinePolicy) -> Admission {
    let Some(run) = best_run_s.filter(|r| r.is_finite() && *r >= 0.0) else { return Admission::Kept };
    let have = (deadline - now) as f64;
    if run <= have {
        return Admission::Kept;
    }
    let why = format!(
        "--dl-deadline is {} away but the job needs {} even alone on its fastest Cell",
        human_s(have.max(0.0)),
        human_s(run)
    );
    match policy {
        DeadlinePolicy::Warn => Admission::BestEffort(format!(
            "cellsched: {why}: the deadline is dropped and the job runs best effort (placement.deadline_policy = warn)"
        )),
        DeadlinePolicy::Strict => Admission::Refused(format!("cellsched: {why} (placement.deadline_policy = strict)")),
    }
}

fn human_s(s: f64) -> String {
    if s >= 2.0 * 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// `[deadline]` in cellsched.toml: how much deadline urgency a user gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeadlineConfig {
    /// GPU-hours of deadline jobs (declared iterations × predicted seconds
    /// per iteration × GPUs) a user may have ranked by deadline urgency per
    /// `window_s`; jobs beyond it are ranked as if they had no deadline.
    /// 0 = no limit.
    pub budget_gpu_hours: f64,
    /// The budget's window, seconds.
    pub window_s: f64,
    /// A job that finishes later than its deadline by more than this many
    /// times its predicted run time counts as missed by far.
    pub miss_factor: f64,
    /// Seconds a user loses deadline urgency after a deadline refused as
    /// infeasible at submit or missed by far.
    pub distrust_s: f64,
}

impl Default for DeadlineConfig {
    fn default() -> Self {
        DeadlineConfig { budget_gpu_hours: 200.0, window_s: 7.0 * 86_400.0, miss_factor: 0.5, distrust_s: 7.0 * 86_400.0 }
    }
}

impl DeadlineConfig {
    /// Range checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        if !(self.budget_gpu_hours.is_finite() && self.budget_gpu_hours >= 0.0) {
            return Err(format!("deadline.budget_gpu_hours = {} must be a number >= 0 (0 = no limit)", self.budget_gpu_hours));
        }
        if !(self.window_s.is_finite() && (3600.0..=86_400.0 * 365.0).contains(&self.window_s)) {
            return Err(format!("deadline.window_s = {} must be seconds in 3600..=31536000", self.window_s));
        }
        if !(self.miss_factor.is_finite() && self.miss_factor >= 0.0) {
            return Err(format!("deadline.miss_factor = {} must be a number >= 0", self.miss_factor));
        }
        if !(self.distrust_s.is_finite() && (0.0..=86_400.0 * 365.0).contains(&self.distrust_s)) {
            return Err(format!("deadline.distrust_s = {} must be seconds in 0..=31536000", self.distrust_s));
        }
        Ok(())
    }
}

/// True when a job due at `deadline` that ended at `end` (Unix seconds),
/// predicted to run `run_s`, missed by far: later than the deadline by more
/// than `miss_factor` × `run_s`.
pub fn missed_by_far(deadline: i64, end: i64, run_s: f64, cfg: &DeadlineConfig) -> bool {
    (end - deadline) as f64 > cfg.miss_factor * run_s.max(0.0)
}

/// Each user's deadline urgency: the GPU-hours of deadline jobs granted
/// urgency in the current window, and the last infeasible or badly missed
/// deadline (uid → Unix seconds). The ranking host (site_factor) asks
/// [`DeadlineLedger::urgent`] before giving a job deadline urgency; the text
/// form survives a slurmctld restart like `crate::declared::Overruns`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeadlineLedger {
    /// uid → (Unix seconds, GPU-hours) of each grant in the window.
    grants: std::collections::BTreeMap<u32, Vec<(f64, f64)>>,
    /// uid → Unix seconds of the last infeasible or badly missed deadline.
    demoted: std::collections::BTreeMap<u32, f64>,
    /// Jobs already granted (so a job re-ranked every pass is counted once).
    granted_jobs: std::collections::BTreeSet<u32>,
}

impl DeadlineLedger {
    /// The file's name in slurmctld's StateSaveLocation.
    pub const FILE_NAME: &'static str = "cellsched-deadlines";

    /// Whether job `job_id` of `uid`, worth `gpu_hours`, gets deadline
    /// urgency at `now`: not while the user is demoted; a job already
    /// granted keeps it; otherwise only within the user's budget for the
    /// window, which the grant then uses.
    pub fn urgent(&mut self, uid: u32, job_id: u32, gpu_hours: f64, now: f64, cfg: &DeadlineConfig) -> bool {
        if self.is_demoted(uid, now, cfg) {
            return false;
        }
        if self.granted_jobs.contains(&job_id) {
            return true;
        }
        let gpu_hours = if gpu_hours.is_finite() { gpu_hours.max(0.0) } else { f64::INFINITY };
        let used: f64 = self.grants.get(&uid).map_or(0.0, |g| g.iter().filter(|(t, _)| now - t < cfg.window_s).map(|(_, h)| h).sum());
        if cfg.budget_gpu_hours > 0.0 && used + gpu_hours > cfg.budget_gpu_hours {
            return false;
        }
        self.grants.entry(uid).or_default().push((now, gpu_hours));
        self.granted_jobs.insert(job_id);
        true
    }

    /// The deadline rule for one pending job of `uid` (call in submit
    /// order, once per ranking pass): a job without a deadline is left
    /// alone; one whose user is demoted or whose GPU-hours (remaining
    /// seconds × GPUs) do not fit the user's budget loses its deadline, and
    /// is ranked as if it had none. True when the job keeps it.
    pub fn gate(&mut self, uid: u32, job: &mut crate::asrpt::PendingJob, now: f64, cfg: &DeadlineConfig) -> bool {
        if job.deadline_s.is_none() {
            return true;
        }
        let gpu_hours = job.remaining_s * f64::from(job.gpus.max(1)) / 3600.0;
        let keep = self.urgent(uid, job.id, gpu_hours, now, cfg);
        if !keep {
            job.deadline_s = None;
        }
        keep
    }

    /// Records an infeasible or badly missed deadline of `uid` at `now`.
    pub fn demote(&mut self, uid: u32, now: f64) {
        let t = self.demoted.entry(uid).or_insert(now);
        *t = t.max(now);
    }

    /// Whether `uid` lost deadline urgency at `now`.
    pub fn is_demoted(&self, uid: u32, now: f64, cfg: &DeadlineConfig) -> bool {
        self.demoted.get(&uid).is_some_and(|t| now - t < cfg.distrust_s)
    }

    /// Forgets a finished job's grant marker and everything older than the
    /// window or the demotion.
    pub fn expire(&mut self, now: f64, cfg: &DeadlineConfig, live_jobs: &std::collections::HashSet<u32>) {
        for g in self.grants.values_mut() {
            g.retain(|(t, _)| now - t < cfg.window_s);
        }
        self.grants.retain(|_, g| !g.is_empty());
        self.demoted.retain(|_, t| now - *t < cfg.distrust_s);
        self.granted_jobs.retain(|j| live_jobs.contains(j));
    }

    /// The file's text: `grant UID UNIX GPU_HOURS`, `demoted UID UNIX` and
    /// `job JOBID` lines.
    pub fn to_text(&self) -> String {
        let mut out = String::from("# cellsched: deadline urgency granted per user, demotions, granted jobs\n");
        for (uid, g) in &self.grants {
            for (t, h) in g {
                out.push_str(&format!("grant {uid} {} {h}\n", t.round() as i64));
            }
        }
        for (uid, t) in &self.demoted {
            out.push_str(&format!("demoted {uid} {}\n", t.round() as i64));
        }
        for j in &self.granted_jobs {
            out.push_str(&format!("job {j}\n"));
        }
        out
    }

    /// Parses [`DeadlineLedger::to_text`]'s form; errors name `origin` and the line.
    pub fn parse(text: &str, origin: &str) -> Result<DeadlineLedger, CoreError> {
        let mut l = DeadlineLedger::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = || CoreError::File { path: origin.to_string(), line: Some(i + 1), msg: format!("expected 'grant UID UNIX GPU_HOURS', 'demoted UID UNIX' or 'job JOBID', got '{line}'") };
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |x: &str| x.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
            match f.as_slice() {
                ["grant", uid, t, h] => {
                    let (uid, t, h) = (uid.parse::<u32>().map_err(|_| err())?, num(t).ok_or_else(err)?, num(h).ok_or_else(err)?);
                    l.grants.entry(uid).or_default().push((t, h));
                }
                ["demoted", uid, t] => l.demote(uid.parse::<u32>().map_err(|_| err())?, num(t).ok_or_else(err)?),
                ["job", j] => {
                    l.granted_jobs.insert(j.parse::<u32>().map_err(|_| err())?);
                }
                _ => return Err(err()),
            }
        }
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_time_forms() {
        assert_eq!("now+90".parse::<Deadline>().unwrap(), Deadline::After(90));
        assert_eq!("now+2h".parse::<Deadline>().unwrap(), Deadline::After(7200));
        assert_eq!("now+3days".parse::<Deadline>().unwrap(), Deadline::After(3 * 86_400));
        assert_eq!("now+1w".parse::<Deadline>().unwrap(), Deadline::After(7 * 86_400));
        assert_eq!(
            "2026-12-01T08:30".parse::<Deadline>().unwrap(),
            Deadline::At { year: 2026, month: 12, day: 1, hour: 8, minute: 30, second: 0 }
        );
        assert_eq!("2026-12-01".parse::<Deadline>().unwrap().to_string(), "2026-12-01T00:00:00");
        assert_eq!("17:05:09".parse::<Deadline>().unwrap(), Deadline::TimeOfDay { hour: 17, minute: 5, second: 9 });
        for bad in ["", "now+", "now+5x", "now+0", "tomorrow", "2026-02-30", "2026-13-01", "24:00", "12:60", "2026-1-1", "now+99999999999999w"] {
            let e = bad.parse::<Deadline>().unwrap_err().to_string();
            assert!(e.contains("--dl-deadline") && e.contains("now+N"), "{bad}: {e}");
        }
    }

    #[test]
    fn resolves_to_unix_time_in_local_time() {
        // 2026-11-23T14:00:00Z.
        let now = days_from_civil(2026, 11, 23) * 86_400 + 14 * 3600;
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(Deadline::After(600).resolve(now, 0).unwrap(), now + 600);
        let at: Deadline = "2026-11-23T16:00".parse().unwrap();
        assert_eq!(at.resolve(now, 0).unwrap(), now + 7200);
        // Local time one hour ahead of UTC: 16:00 local is 15:00 UTC.
        assert_eq!(at.resolve(now, 3600).unwrap(), now + 3600);
        // A time of day already passed today means tomorrow.
        assert_eq!("13:00".parse::<Deadline>().unwrap().resolve(now, 0).unwrap(), now + 23 * 3600);
        assert_eq!("15:00".parse::<Deadline>().unwrap().resolve(now, 0).unwrap(), now + 3600);
        let past: Deadline = "2026-11-23T13:00".parse().unwrap();
        assert!(past.resolve(now, 0).unwrap_err().to_string().contains("future"));
    }


    /// Issue 31 item 3: a deadline the job cannot meet alone on its fastest
    /// Cell buys no urgency: dropped (warn) or refused (strict).
    #[test]
    fn infeasible_deadlines_are_dropped_or_refused() {
        let now = 1_800_000_000;
        assert_eq!(admit(now + 3600, now, Some(1800.0), DeadlinePolicy::Warn), Admission::Kept);
        assert_eq!(admit(now + 3600, now, None, DeadlinePolicy::Strict), Admission::Kept, "undeclared work cannot be checked");
        // The probe's job: ~175 GPU-hours on 4 GPUs (~44 h alone), due in 80 h, is feasible;
        // the same job due in 20 h is not.
        assert_eq!(admit(now + 80 * 3600, now, Some(44.0 * 3600.0), DeadlinePolicy::Warn), Admission::Kept);
        let Admission::BestEffort(m) = admit(now + 20 * 3600, now, Some(44.0 * 3600.0), DeadlinePolicy::Warn) else { panic!() };
        assert!(m.contains("20.0 h away") && m.contains("44.0 h") && m.contains("best effort"), "{m}");
        let Admission::Refused(m) = admit(now + 60, now, Some(600.0), DeadlinePolicy::Strict) else { panic!() };
        assert!(m.contains("60 s away") && m.contains("10 min") && m.contains("strict"), "{m}");
        assert_eq!(admit(now + 60, now, Some(f64::NAN), DeadlinePolicy::Strict), Admission::Kept);
    }

    /// Deadline urgency is bounded per user per window, and a user whose
    /// deadline was infeasible or missed by far loses it for `distrust_s`.
    #[test]
    fn urgency_is_budgeted_and_lost_after_misses() {
        let cfg = DeadlineConfig { budget_gpu_hours: 100.0, window_s: 86_400.0, miss_factor: 0.5, distrust_s: 3600.0 };
        cfg.check().unwrap();
        let mut l = DeadlineLedger::default();
        assert!(l.urgent(1000, 1, 60.0, 0.0, &cfg));
        assert!(l.urgent(1000, 1, 60.0, 10.0, &cfg), "a granted job keeps its urgency");
        assert!(!l.urgent(1000, 2, 60.0, 20.0, &cfg), "60 + 60 > 100 GPU-hours");
        assert!(l.urgent(1000, 3, 40.0, 30.0, &cfg));
        assert!(l.urgent(1001, 4, 100.0, 30.0, &cfg), "budgets are per user");
        assert!(!l.urgent(1002, 5, f64::NAN, 30.0, &cfg), "unknown size counts as unbounded");
        assert!(l.urgent(1000, 6, 60.0, 86_400.0 + 1.0, &cfg), "a new window");
        // A 1,000,000-iteration (~175 GPU-hour) job exceeds the default budget alone.
        assert!(!DeadlineLedger::default().urgent(7, 7, 175.0, 0.0, &DeadlineConfig { budget_gpu_hours: 150.0, ..DeadlineConfig::default() }));
        // Missed by far -> demoted for distrust_s, even for a granted job.
        assert!(!missed_by_far(1000, 1400, 1000.0, &cfg) && missed_by_far(1000, 1600, 1000.0, &cfg));
        l.demote(1001, 100.0);
        assert!(!l.urgent(1001, 4, 1.0, 200.0, &cfg) && l.is_demoted(1001, 200.0, &cfg));
        assert!(!l.is_demoted(1001, 3700.0, &cfg));
        let back = DeadlineLedger::parse(&l.to_text(), "x").unwrap();
        assert_eq!(back.to_text(), l.to_text());
        let live: std::collections::HashSet<u32> = [6].into();
        l.expire(86_400.0 + 2.0, &cfg, &live);
        assert_eq!(l.granted_jobs, [6].into());
        let e = DeadlineLedger::parse("grant x 1 2\n", "f").unwrap_err().to_string();
        assert!(e.contains("f:1"), "{e}");
        assert!(DeadlineConfig { window_s: 1.0, ..DeadlineConfig::default() }.check().unwrap_err().contains("deadline.window_s"));
    }

    /// Issue 31 item 3: the probe's 1,000,000-iteration job due in 80 h keeps
    /// no deadline urgency once its user's budget is spent, or after an
    /// infeasible deadline; an honest user's small deadline job keeps it.
    #[test]
    fn gate_strips_deadlines_beyond_the_budget_or_after_a_demotion() {
        use crate::asrpt::PendingJob;
        let cfg = DeadlineConfig { budget_gpu_hours: 100.0, ..DeadlineConfig::default() };
        let now = 1_000_000.0;
        let job = |id: u32, remaining_s: f64, gpus: u32| PendingJob::new(id, now, remaining_s).with_gpus(gpus).with_deadline(Some(now + 80.0 * 3600.0));
        let mut l = DeadlineLedger::default();
        // ~175 GPU-hours on 4 GPUs: beyond a 100 GPU-hour budget on its own.
        let mut big = job(1, 44.0 * 3600.0, 4);
        assert!(!l.gate(2000, &mut big, now, &cfg) && big.deadline_s.is_none());
        // Within the budget: kept, and kept at the next pass; the next one is beyond what is left.
        let mut small = job(2, 10.0 * 3600.0, 4);
        assert!(l.gate(2000, &mut small, now, &cfg) && small.deadline_s.is_some());
        assert!(l.gate(2000, &mut job(2, 10.0 * 3600.0, 4), now + 5.0, &cfg));
        assert!(!l.gate(2000, &mut job(3, 20.0 * 3600.0, 4), now + 5.0, &cfg));
        // Without a deadline nothing is used; another user has their own budget.
        assert!(l.gate(2000, &mut PendingJob::new(4, now, 1e9), now, &cfg));
        assert!(l.gate(3000, &mut job(5, 10.0 * 3600.0, 4), now, &cfg));
        // A demoted user loses it even for a small, granted job.
        l.demote(3000, now);
        let mut again = job(5, 10.0 * 3600.0, 4);
        assert!(!l.gate(3000, &mut again, now + 1.0, &cfg) && again.deadline_s.is_none());
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in proptest::prelude::any::<String>(), near in "(now\\+[0-9]{0,20}[a-z]{0,7}|[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{1,2}:[0-9]{1,2}(:[0-9]{1,2})?)?|[0-9]{1,3}:[0-9]{1,3}(:[0-9]{1,3})?)") {
            for t in [s.as_str(), near.as_str()] {
                if let Ok(d) = t.parse::<Deadline>() {
                    let _ = d.resolve(1_800_000_000, 3600);
                    proptest::prop_assert_eq!(d.to_string().parse::<Deadline>().ok().map(|x| x.resolve(1_800_000_000, 0).ok()), Some(d.resolve(1_800_000_000, 0).ok()));
                }
            }
        }
    }
}

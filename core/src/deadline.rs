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

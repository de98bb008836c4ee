//! The signal an elastic job checkpoints on (`--dl-elastic[=SIGNAL]`):
//! names and numbers, parsed once for the option table and the job record.
use std::fmt;

/// The allowed form of `--dl-elastic`'s value, for errors and the man page.
pub const SIGNAL_FORM: &str = "nothing (USR1), a signal name (USR1, USR2, TERM, INT, HUP, ..., with or without SIG) or number 1..64 \
     other than KILL (9) and STOP (19), or no/off/false to turn it off";

/// Linux signal names and numbers a job may be signalled with (KILL and
/// STOP are left out: a process cannot catch them to checkpoint).
const NAMES: &[(&str, u8)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("USR1", 10),
    ("USR2", 12),
    ("ALRM", 14),
    ("TERM", 15),
    ("CONT", 18),
    ("TSTP", 20),
    ("URG", 23),
    ("XCPU", 24),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
];

/// Signals no process can catch.
const UNCATCHABLE: [u8; 2] = [9, 19];

/// A catchable signal number (1..=64, not KILL or STOP). Prints as its
/// name without `SIG` when it has one (`USR1`), else as its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElasticSignal(u8);

impl ElasticSignal {
    /// SIGUSR1, the default of `--dl-elastic`.
    pub const USR1: ElasticSignal = ElasticSignal(10);

    /// The signal number (what `scancel --signal` and `slurm_kill_job` take).
    pub fn number(self) -> u8 {
        self.0
    }

    /// The signal with this number, if a job may be signalled with it.
    pub fn from_number(n: u8) -> Option<ElasticSignal> {
        ((1..=64).contains(&n) && !UNCATCHABLE.contains(&n)).then_some(ElasticSignal(n))
    }

    /// Its name without `SIG` (`USR1`), `None` for a number without one.
    pub fn name(self) -> Option<&'static str> {
        NAMES.iter().find(|(_, n)| *n == self.0).map(|(name, _)| *name)
    }

    /// `--dl-elastic`'s value: empty or yes/on/true is [`Self::USR1`],
    /// no/off/false is `None` (not elastic), else a signal name (any case,
    /// with or without `SIG`) or number. `Err` says why not.
    pub fn parse_option(v: &str) -> Result<Option<ElasticSignal>, String> {
        match v.to_ascii_lowercase().as_str() {
            "" | "yes" | "on" | "true" => Ok(Some(Self::USR1)),
            "no" | "off" | "false" => Ok(None),
            _ => v.parse().map(Some),
        }
    }
}

impl std::str::FromStr for ElasticSignal {
    type Err = String;

    /// A signal name (`USR1`, `SIGUSR1`, `usr1`) or number (`10`).
    fn from_str(s: &str) -> Result<Self, String> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            let n: u8 = s.parse().map_err(|_| format!("signal number {s} is not in 1..64"))?;
            return match ElasticSignal::from_number(n) {
                Some(sig) => Ok(sig),
                None if UNCATCHABLE.contains(&n) => Err(format!("signal {n} cannot be caught, so the job could not checkpoint")),
                None => Err(format!("signal number {n} is not in 1..64")),
            };
        }
        let up = s.to_ascii_uppercase();
        let name = up.strip_prefix("SIG").unwrap_or(&up);
        if name == "KILL" || name == "STOP" {
            return Err(format!("SIG{name} cannot be caught, so the job could not checkpoint"));
        }
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, n)| ElasticSignal(*n))
            .ok_or_else(|| format!("unknown signal name '{s}'"))
    }
}

impl fmt::Display for ElasticSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_defaults() {
        assert_eq!(ElasticSignal::parse_option("").unwrap(), Some(ElasticSignal::USR1));
        assert_eq!(ElasticSignal::parse_option("YES").unwrap(), Some(ElasticSignal::USR1));
        assert_eq!(ElasticSignal::parse_option("off").unwrap(), None);
        for (text, n) in [("USR2", 12), ("sigterm", 15), ("SIGINT", 2), ("int", 2), ("10", 10), ("40", 40), ("64", 64), ("1", 1)] {
            let s: ElasticSignal = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.number(), n, "{text}");
            assert_eq!(s.to_string().parse::<ElasticSignal>().unwrap(), s, "round trip of {text}");
        }
        assert_eq!(ElasticSignal::USR1.to_string(), "USR1");
        assert_eq!(ElasticSignal::from_number(40).unwrap().to_string(), "40");
    }

    #[test]
    fn refuses_what_cannot_be_caught_or_is_no_signal() {
        for bad in ["KILL", "SIGSTOP", "9", "19", "0", "65", "300", "USR3", "SIG", "-1", "1.5", "usr 1"] {
            let e = bad.parse::<ElasticSignal>().unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!("9".parse::<ElasticSignal>().unwrap_err().contains("cannot be caught"));
        assert!("SIGKILL".parse::<ElasticSignal>().unwrap_err().contains("cannot be caught"));
        assert!("USR3".parse::<ElasticSignal>().unwrap_err().contains("unknown signal name 'USR3'"));
    }
}

//! Measured reconfiguration costs as the simulator's truth: a table of
//! runs (`bench/truth/h200-restart.csv` form: checkpoint bytes, save,
//! load and restart seconds per run) from which a job's save and restart
//! times on the clock are read by its checkpoint size. The policy still
//! decides with its cost model (`core::elastic::RestartCost`, knowledge);
//! this is what happens.
//!
//! Between two measured sizes each part is interpolated linearly in the
//! checkpoint bytes: the start (restart less loading), the load and the
//! save. Below the smallest run the start is that run's (a process cannot
//! start faster than the smallest model's did) and load and save scale
//! with the bytes at that run's rates; above the largest the last two runs'
//! line continues.
use crate::SimError;

/// One measured reconfiguration (a row of the table).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredRestart {
    /// The `model` column, when the table has one.
    pub model: Option<String>,
    /// The `batch` column, when the table has one.
    pub batch: Option<u32>,
    /// Checkpoint size, bytes.
    pub ckpt_bytes: f64,
    /// Signal to the checkpoint on disk, seconds.
    pub save_s: f64,
    /// Loading the checkpoint at restart, seconds.
    pub load_s: f64,
    /// Restart to the end of the first iteration (loading included), seconds.
    pub restart_s: f64,
}

impl MeasuredRestart {
    /// The restart less loading: process, model build, first iteration.
    fn start_s(&self) -> f64 {
        self.restart_s - self.load_s
    }
}

/// Measured save and restart times by checkpoint size.
#[derive(Debug, Clone, PartialEq)]
pub struct RestartTruth {
    /// The measured runs, by checkpoint size.
    runs: Vec<MeasuredRestart>,
    /// Where the table came from (for labels).
    pub origin: String,
}

impl RestartTruth {
    /// Parses the CSV (header with at least `ckpt_bytes`, `save_s`,
    /// `load_s` and `restart_s`, optionally `model` and `batch`; `#` lines
    /// are comments).
    pub fn parse(text: &str, origin: &str) -> Result<RestartTruth, SimError> {
        let bad = |line: usize, field: &str, msg: String| SimError::Input { path: origin.to_string(), line: Some(line), field: field.to_string(), msg };
        let mut cols: Option<([usize; 4], Option<usize>, Option<usize>)> = None;
        let mut runs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let Some((c, model_col, batch_col)) = cols else {
                let at = |name: &str| f.iter().position(|h| *h == name);
                let find = |name: &str| at(name).ok_or_else(|| bad(i + 1, name, "missing from the header".into()));
                cols = Some(([find("ckpt_bytes")?, find("save_s")?, find("load_s")?, find("restart_s")?], at("model"), at("batch")));
                continue;
            };
            const NAMES: [&str; 4] = ["ckpt_bytes", "save_s", "load_s", "restart_s"];
            let num = |k: usize| -> Result<f64, SimError> {
                let s = f.get(c[k]).copied().unwrap_or("");
                s.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| bad(i + 1, NAMES[k], format!("not a number >= 0: '{s}'")))
            };
            let (bytes, save_s, load_s, restart_s) = (num(0)?, num(1)?, num(2)?, num(3)?);
            if bytes <= 0.0 || load_s > restart_s {
                return Err(bad(i + 1, "load_s", "checkpoint bytes must be > 0 and loading within the restart".into()));
            }
            let model = model_col.and_then(|k| f.get(k)).map(|m| m.to_string());
            let batch = match batch_col.and_then(|k| f.get(k)) {
                Some(b) => Some(b.parse::<u32>().map_err(|_| bad(i + 1, "batch", format!("not a count: '{b}'")))?),
                None => None,
            };
            runs.push(MeasuredRestart { model, batch, ckpt_bytes: bytes, save_s, load_s, restart_s });
        }
        if runs.is_empty() {
            return Err(SimError::Input { path: origin.to_string(), line: None, field: "ckpt_bytes".into(), msg: "no measured run".into() });
        }
        runs.sort_by(|a, b| a.ckpt_bytes.total_cmp(&b.ckpt_bytes));
        Ok(RestartTruth { runs, origin: origin.to_string() })
    }

    /// Reads the table from a file.
    pub fn load(path: &std::path::Path) -> Result<RestartTruth, SimError> {
        let text = std::fs::read_to_string(path).map_err(|error| SimError::Io { path: path.display().to_string(), error })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The measured runs, smallest checkpoint first.
    pub fn runs(&self) -> &[MeasuredRestart] {
        &self.runs
    }

    /// (save, restart) seconds of a job whose checkpoint is `bytes`.
    pub fn cost(&self, bytes: f64) -> (f64, f64) {
        let r = &self.runs;
        let first = &r[0];
        if bytes <= first.ckpt_bytes || r.len() == 1 {
            let k = bytes.max(0.0) / first.ckpt_bytes;
            return (first.save_s * k, first.start_s() + first.load_s * k);
        }
        let at = r.iter().position(|x| x.ckpt_bytes >= bytes).unwrap_or(r.len() - 1).max(1);
        let (a, b) = (&r[at - 1], &r[at]);
        let t = (bytes - a.ckpt_bytes) / (b.ckpt_bytes - a.ckpt_bytes);
        let lerp = |x: f64, y: f64| (x + (y - x) * t).max(0.0);
        (lerp(a.save_s, b.save_s), lerp(a.start_s(), b.start_s()) + lerp(a.load_s, b.load_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "# runs\nmodel,ckpt_bytes,save_s,load_s,restart_s\nsmall,1e9,2,1,11\nbig,1e10,20,8,38\n";

    #[test]
    fn measured_sizes_give_their_runs_and_others_interpolate() {
        let t = RestartTruth::parse(TABLE, "t.csv").unwrap();
        assert_eq!((t.runs()[0].model.as_deref(), t.runs()[0].batch, t.runs()[1].restart_s), (Some("small"), None, 38.0));
        assert_eq!(t.cost(1e9), (2.0, 11.0));
        assert_eq!(t.cost(1e10), (20.0, 38.0));
        // Half-way: start 10 -> 30, load 1 -> 8, save 2 -> 20.
        let (s, r) = t.cost(5.5e9);
        assert!((s - 11.0).abs() < 1e-9 && (r - (20.0 + 4.5)).abs() < 1e-9, "{s} {r}");
        // Below the smallest: its start, load and save by the bytes.
        assert_eq!(t.cost(1e8), (0.2, 10.0 + 0.1));
        // Above the largest: the last line continues.
        let (s, r) = t.cost(1.9e10);
        assert!((s - 38.0).abs() < 1e-9 && (r - (50.0 + 15.0)).abs() < 1e-9, "{s} {r}");
    }

    #[test]
    fn bad_tables_name_the_problem() {
        let e = |text: &str| RestartTruth::parse(text, "t.csv").unwrap_err().to_string();
        assert!(e("model,ckpt_bytes,save_s,load_s\nx,1e9,1,1\n").contains("restart_s"));
        assert!(e("ckpt_bytes,save_s,load_s,restart_s\n").contains("no measured run"));
        assert!(e("ckpt_bytes,save_s,load_s,restart_s\n1e9,x,1,2\n").contains("t.csv:2"));
        assert!(e("ckpt_bytes,save_s,load_s,restart_s\n1e9,1,5,2\n").contains("loading within"));
    }

    /// The project's measured table loads, and bigger checkpoints cost more.
    #[test]
    fn the_h200_table_loads() {
        let t = RestartTruth::parse(include_str!("../../../bench/truth/h200-restart.csv"), "h200-restart.csv").unwrap();
        let (small, big) = (t.cost(1e8), t.cost(2e10));
        assert!(small.0 < big.0 && small.1 < big.1 && small.1 > 5.0, "{small:?} {big:?}");
        assert!(t.runs().iter().all(|r| r.model.is_some() && r.batch.is_some()));
    }
}

//! The profile database: measured iteration times per
//! (model, global batch, GPU type, nodes, GPUs per node), stored as CSV
//! `model,batch,gpu_type,nodes,gpus_per_node,iter_time_s[,plan][,peak_mem_gib][,first_iter_s]`.
//! Exact matches override the estimator; the others calibrate it.
//!
//! The `plan` column holds the plan that ran, or `unknown` (an empty cell
//! reads the same): it never holds a guess. `peak_mem_gib` is the peak
//! device memory NVML saw during the run (GiB, any GPU of the run), when
//! it was measured. `first_iter_s` is the seconds from the command's start
//! to the end of its first iteration (process, CUDA and data loader start,
//! model build, first iteration: a cold start, no checkpoint loaded), when
//! measured; the restart cost of elastic jobs starts from it.
use crate::cell::Plan;
use crate::error::CoreError;
use crate::gpu::canonical_gpu_type;
use crate::model::ModelCatalog;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Most GPUs per node a profile row may describe.
pub const MAX_GPUS_PER_NODE: u32 = 64;

/// The CSV header written by [`ProfileDb::save_csv`].
pub const CSV_HEADER: [&str; 9] = ["model", "batch", "gpu_type", "nodes", "gpus_per_node", "iter_time_s", "plan", "peak_mem_gib", "first_iter_s"];

/// What the `plan` column holds when the plan that ran is not known.
pub const UNKNOWN_PLAN: &str = "unknown";

/// Largest peak memory a row may record, GiB (no device holds more).
pub const MAX_PEAK_MEM_GIB: f64 = 4096.0;

/// Longest start-to-first-iteration time a row may record, seconds (1 day).
pub const MAX_FIRST_ITER_S: f64 = 86_400.0;

/// One measured point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// Model name as measured (catalog name or alias).
    pub model: String,
    /// Global batch (samples per iteration).
    pub batch: u32,
    /// GPU type (canonical key when recognised, else lower case).
    pub gpu_type: String,
    /// Nodes used.
    pub nodes: u32,
    /// GPUs used on each node.
    pub gpus_per_node: u32,
    /// Measured seconds per iteration.
    pub iter_time_s: f64,
    /// The plan that ran; `None`: unknown (stored as `unknown`).
    pub plan: Option<Plan>,
    /// Peak device memory NVML saw during the run, GiB, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_mem_gib: Option<f64>,
    /// Seconds from the command's start to the end of its first iteration
    /// (a cold start), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_iter_s: Option<f64>,
}

impl ProfileRecord {
    /// Total GPUs.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.gpus_per_node
    }

    fn key(&self) -> Key {
        (self.model.trim().to_ascii_lowercase(), self.batch, self.gpu_type.clone(), self.nodes, self.gpus_per_node)
    }
}

type Key = (String, u32, String, u32, u32);

/// Normalises a GPU type for storage and lookup.
pub fn normalize_gpu_type(t: &str) -> String {
    canonical_gpu_type(t).unwrap_or_else(|| t.trim().to_ascii_lowercase())
}

/// Measured points, one per key (later inserts replace earlier ones).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileDb {
    records: BTreeMap<Key, ProfileRecord>,
}

impl ProfileDb {
    /// An empty database.
    pub fn new() -> ProfileDb {
        ProfileDb::default()
    }

    /// Loads a CSV file (it must pass [`crate::config::check_trusted_file`]);
    /// errors name file, line and field.
    pub fn load_csv(path: impl AsRef<Path>) -> Result<ProfileDb, CoreError> {
        crate::config::check_trusted_file(path.as_ref())?;
        let mut db = ProfileDb::new();
        db.import_csv(path)?;
        Ok(db)
    }

    /// Merges a CSV file into this database (file rows replace equal keys);
    /// returns the number of rows read. Nothing is merged if any row is bad.
    pub fn import_csv(&mut self, path: impl AsRef<Path>) -> Result<usize, CoreError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| CoreError::File { path: origin.clone(), line: None, msg: format!("cannot read profile CSV: {e}") })?;
        let rows = parse_csv(&text, &origin)?;
        let n = rows.len();
        for r in rows {
            self.insert(r);
        }
        Ok(n)
    }

    /// Adds or replaces a record.
    pub fn insert(&mut self, mut rec: ProfileRecord) {
        rec.model = rec.model.trim().to_string();
        rec.gpu_type = normalize_gpu_type(&rec.gpu_type);
        self.records.insert(rec.key(), rec);
    }

    /// Measured seconds per iteration for an exact (case-insensitive) match.
    pub fn lookup(&self, model: &str, batch: u32, gpu_type: &str, nodes: u32, gpus_per_node: u32) -> Option<f64> {
        let key = (model.trim().to_ascii_lowercase(), batch, normalize_gpu_type(gpu_type), nodes, gpus_per_node);
        self.records.get(&key).map(|r| r.iter_time_s)
    }

    /// Like [`ProfileDb::lookup`] but matching model names through the catalog's
    /// aliases (`bert` finds records stored as `bert_large` and vice versa).
    pub fn lookup_record(
        &self,
        models: &ModelCatalog,
        model: &str,
        batch: u32,
        gpu_type: &str,
        nodes: u32,
        gpus_per_node: u32,
    ) -> Option<&ProfileRecord> {
        let gpu = normalize_gpu_type(gpu_type);
        let want = models.canonical_name(model).map(str::to_string).unwrap_or_else(|| model.trim().to_ascii_lowercase());
        self.records.values().find(|r| {
            r.batch == batch
                && r.nodes == nodes
                && r.gpus_per_node == gpus_per_node
                && r.gpu_type == gpu
                && models.canonical_name(&r.model).map(str::to_string).unwrap_or_else(|| r.model.to_ascii_lowercase()) == want
        })
    }

    /// All records, sorted by key.
    pub fn records(&self) -> impl Iterator<Item = &ProfileRecord> {
        self.records.values()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Writes the database as CSV atomically (temporary file + rename).
    pub fn save_csv(&self, path: impl AsRef<Path>) -> Result<(), CoreError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let io = |e: std::io::Error| CoreError::File { path: origin.clone(), line: None, msg: format!("cannot write profile CSV: {e}") };
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("profile.csv");
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let mut w = csv::Writer::from_writer(Vec::new());
        let csv_err = |e: csv::Error| CoreError::File { path: origin.clone(), line: None, msg: e.to_string() };
        w.write_record(CSV_HEADER).map_err(csv_err)?;
        for r in self.records.values() {
            w.write_record([
                r.model.clone(),
                r.batch.to_string(),
                r.gpu_type.clone(),
                r.nodes.to_string(),
                r.gpus_per_node.to_string(),
                format!("{}", r.iter_time_s),
                r.plan.map_or_else(|| UNKNOWN_PLAN.to_string(), |p| p.to_string()),
                r.peak_mem_gib.map(|g| format!("{g}")).unwrap_or_default(),
                r.first_iter_s.map(|x| format!("{x}")).unwrap_or_default(),
            ])
            .map_err(csv_err)?;
        }
        let bytes = w.into_inner().map_err(|e| CoreError::File { path: origin.clone(), line: None, msg: e.to_string() })?;
        let res = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res.map_err(io)
    }
}

/// Parses profile CSV text; `origin` names the source in errors.
pub fn parse_csv(text: &str, origin: &str) -> Result<Vec<ProfileRecord>, CoreError> {
    let mut rd = csv::ReaderBuilder::new().trim(csv::Trim::All).flexible(true).comment(Some(b'#')).from_reader(text.as_bytes());
    let file_err = |line: Option<usize>, msg: String| CoreError::File { path: origin.to_string(), line, msg };
    let headers = rd.headers().map_err(|e| file_err(Some(1), format!("bad CSV header: {e}")))?.clone();
    let col = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let mut idx = [0usize; 6];
    for (i, name) in CSV_HEADER[..6].iter().enumerate() {
        idx[i] = col(name).ok_or_else(|| {
            file_err(Some(1), format!("missing column '{name}' (header must include {})", CSV_HEADER[..6].join(",")))
        })?;
    }
    let plan_col = col("plan");
    let peak_col = col("peak_mem_gib");
    let first_col = col("first_iter_s");
    let mut out = Vec::new();
    for row in rd.records() {
        let row = row.map_err(|e| file_err(e.position().map(|p| p.line() as usize), format!("bad CSV row: {e}")))?;
        let line = row.position().map(|p| p.line() as usize);
        let get = |i: usize, name: &str| -> Result<&str, CoreError> {
            match row.get(i) {
                Some(v) if !v.is_empty() => Ok(v),
                _ => Err(file_err(line, format!("field '{name}' is empty"))),
            }
        };
        let pos_int = |i: usize, name: &str| -> Result<u32, CoreError> {
            let v = get(i, name)?;
            match v.parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(file_err(line, format!("field '{name}': invalid value '{v}': expected a positive integer"))),
            }
        };
        let model = get(idx[0], "model")?.to_string();
        let batch = pos_int(idx[1], "batch")?;
        let gpu_type = get(idx[2], "gpu_type")?.to_string();
        let nodes = pos_int(idx[3], "nodes")?;
        let gpus_per_node = pos_int(idx[4], "gpus_per_node")?;
        let t = get(idx[5], "iter_time_s")?;
        let iter_time_s = match t.parse::<f64>() {
            Ok(x) if crate::cell::plausible_iter_time(x) => x,
            _ => {
                return Err(file_err(
                    line,
                    format!(
                        "field 'iter_time_s': invalid value '{t}': expected seconds per iteration in {:e}..={} (1 µs to 1 day)",
                        crate::cell::MIN_ITER_TIME_S,
                        crate::cell::MAX_ITER_TIME_S
                    ),
                ))
            }
        };
        if u64::from(nodes) * u64::from(gpus_per_node) > u64::from(crate::cell::MAX_CELL_GPUS) || gpus_per_node > MAX_GPUS_PER_NODE {
            return Err(file_err(
                line,
                format!(
                    "shape {nodes} node(s) x {gpus_per_node} GPUs is out of range (at most {MAX_GPUS_PER_NODE} GPUs per node and {} in all)",
                    crate::cell::MAX_CELL_GPUS
                ),
            ));
        }
        if batch > crate::options::MAX_BATCH {
            return Err(file_err(line, format!("field 'batch': invalid value '{batch}': at most {}", crate::options::MAX_BATCH)));
        }
        let plan = match plan_col.and_then(|i| row.get(i)).filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case(UNKNOWN_PLAN)) {
            None => None,
            Some(p) => {
                let plan: Plan = p.parse().map_err(|e| file_err(line, format!("field 'plan': {e}")))?;
                if plan.gpus() != nodes * gpus_per_node {
                    return Err(file_err(
                        line,
                        format!("field 'plan': '{p}' uses {} GPUs but the row has {}", plan.gpus(), nodes * gpus_per_node),
                    ));
                }
                Some(plan)
            }
        };
        let peak_mem_gib = match peak_col.and_then(|i| row.get(i)).filter(|s| !s.is_empty()) {
            None => None,
            Some(v) => match v.parse::<f64>() {
                Ok(g) if g > 0.0 && g <= MAX_PEAK_MEM_GIB => Some(g),
                _ => return Err(file_err(line, format!("field 'peak_mem_gib': invalid value '{v}': expected GiB in (0, {MAX_PEAK_MEM_GIB}]"))),
            },
        };
        let first_iter_s = match first_col.and_then(|i| row.get(i)).filter(|s| !s.is_empty()) {
            None => None,
            Some(v) => match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x <= MAX_FIRST_ITER_S => Some(x),
                _ => return Err(file_err(line, format!("field 'first_iter_s': invalid value '{v}': expected seconds in (0, {MAX_FIRST_ITER_S}]"))),
            },
        };
        out.push(ProfileRecord { model, batch, gpu_type, nodes, gpus_per_node, iter_time_s, plan, peak_mem_gib, first_iter_s });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cs-pdb-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn roundtrip_and_lookup() {
        let d = tmpdir("rt");
        let p = d.join("db.csv");
        std::fs::write(
            &p,
            "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,plan\n\
             gpt__1.3B,32,NVIDIA A100-SXM4-80GB,1,8,0.5,\"dp=8,tp=1,pp=1,mb=1,zero=1,ckpt=off\"\n\
             bert,32,a800,1,1,0.9,\n",
        )
        .unwrap();
        let db = ProfileDb::load_csv(&p).unwrap();
        assert_eq!(db.len(), 2);
        assert!(db.records().all(|r| r.peak_mem_gib.is_none()));
        assert_eq!(db.lookup("GPT__1.3b", 32, "a100", 1, 8), Some(0.5));
        assert_eq!(db.lookup("gpt__1.3B", 32, "a100", 2, 4), None);
        let cat = ModelCatalog::builtin();
        assert_eq!(db.lookup_record(&cat, "bert_large", 32, "a800", 1, 1).unwrap().iter_time_s, 0.9);
        let out = d.join("out.csv");
        db.save_csv(&out).unwrap();
        let again = ProfileDb::load_csv(&out).unwrap();
        assert_eq!(again, db);
        assert!(std::fs::read_dir(&d).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().contains(".tmp.")));
        let mut merged = again.clone();
        let extra = d.join("extra.csv");
        std::fs::write(&extra, "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\nbert,32,a800,1,1,0.7\nvit,64,a800,1,2,0.1\n").unwrap();
        assert_eq!(merged.import_csv(&extra).unwrap(), 2);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged.lookup("bert", 32, "a800", 1, 1), Some(0.7));
        std::fs::remove_dir_all(&d).ok();
    }

    /// A row whose plan is not known is written as `unknown`, never as a
    /// plan, and reads back as unknown; the NVML peak and the first
    /// iteration's time round-trip, and a bad first-iteration time is refused.
    #[test]
    fn unknown_plans_and_memory_peaks_round_trip() {
        let d = tmpdir("unk");
        let mut db = ProfileDb::new();
        db.insert(ProfileRecord { model: "gpt__350M".into(), batch: 8, gpu_type: "h100".into(), nodes: 1, gpus_per_node: 1, iter_time_s: 0.13, plan: None, peak_mem_gib: Some(25.5), first_iter_s: None });
        db.insert(ProfileRecord { model: "gpt__125M".into(), batch: 8, gpu_type: "h100".into(), nodes: 1, gpus_per_node: 1, iter_time_s: 0.05, plan: None, peak_mem_gib: None, first_iter_s: Some(41.5) });
        let out = d.join("db.csv");
        db.save_csv(&out).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("gpt__350M,8,h100,1,1,0.13,unknown,25.5,\n"), "{text}");
        assert!(text.contains("gpt__125M,8,h100,1,1,0.05,unknown,,41.5\n"), "{text}");
        assert_eq!(ProfileDb::load_csv(&out).unwrap(), db);
        let rows = parse_csv("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,plan\na,4,v100,1,1,0.1,UNKNOWN\n", "x.csv").unwrap();
        assert_eq!(rows[0].plan, None);
        let bad = parse_csv("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,first_iter_s\na,4,v100,1,1,0.1,-2\n", "x.csv").unwrap_err();
        assert!(bad.to_string().contains("first_iter_s"), "{bad}");
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn bad_rows_name_line_and_field() {
        let h = "model,batch,gpu_type,nodes,gpus_per_node,iter_time_s\n";
        let cases = [
            (format!("{h}a,1,v100,1,1,0.1\nb,0,v100,1,1,0.1\n"), ":3", "batch"),
            (format!("{h}a,-4,v100,1,1,0.1\n"), ":2", "batch"),
            (format!("{h}a,4,v100,1,1,fast\n"), ":2", "iter_time_s"),
            (format!("{h}a,4,,1,1,0.1\n"), ":2", "gpu_type"),
            (format!("{h}a,4,v100,1,x,0.1\n"), ":2", "gpus_per_node"),
            (format!("# source note\n{h}a,4,v100,1,1,NaN\n"), ":3", "iter_time_s"),
            ("model,batch,gpu,nodes,gpus_per_node,iter_time_s\n".to_string(), ":1", "gpu_type"),
            (format!("{h},plan\n").replace("iter_time_s\n,plan", "iter_time_s,plan") + "a,4,v100,1,2,0.1,\"dp=4,tp=1,pp=1\"\n", ":2", "plan"),
            // Physically implausible values and shapes.
            (format!("{h}a,4,v100,1,1,1e-300\n"), ":2", "iter_time_s"),
            (format!("{h}a,4,v100,1,1,90000\n"), ":2", "iter_time_s"),
            (format!("{h}a,4,v100,1,1,NaN\n"), ":2", "iter_time_s"),
            (format!("{h}a,4,v100,1,1,-0.5\n"), ":2", "iter_time_s"),
            (format!("{h}a,4,v100,65536,65536,0.1\n"), ":2", "shape"),
            (format!("{h}a,4,v100,1,128,0.1\n"), ":2", "shape"),
            (format!("{h}a,99999999,v100,1,1,0.1\n"), ":2", "batch"),
            (format!("{}a,4,v100,1,1,0.1,unknown,-3\n", h.replace("iter_time_s\n", "iter_time_s,plan,peak_mem_gib\n")), ":2", "peak_mem_gib"),
            (format!("{}a,4,v100,1,1,0.1,,lots\n", h.replace("iter_time_s\n", "iter_time_s,plan,peak_mem_gib\n")), ":2", "peak_mem_gib"),
            (format!("{}a,4,v100,1,1,0.1,maybe\n", h.replace("iter_time_s\n", "iter_time_s,plan\n")), ":2", "plan"),
        ];
        for (text, line, field) in cases {
            let e = parse_csv(&text, "db.csv").unwrap_err().to_string();
            assert!(e.contains(&format!("db.csv{line}")) && e.contains(field), "{e}\n{text}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
        /// Any text, valid-looking or not, is parsed or refused with an error: never a panic,
        /// and every accepted row is within the physical bounds.
        #[test]
        fn parse_csv_never_panics(body in "[a-z0-9_.,\"\\- eE+\n]{0,200}", raw in proptest::prelude::any::<String>()) {
            let text = format!("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,plan\n{body}");
            for t in [text.as_str(), raw.as_str()] {
                if let Ok(rows) = parse_csv(t, "fuzz.csv") {
                    for r in rows {
                        proptest::prop_assert!(crate::cell::plausible_iter_time(r.iter_time_s));
                        proptest::prop_assert!(r.gpus() <= crate::cell::MAX_CELL_GPUS);
                    }
                }
            }
        }
    }
}

//! End-to-end tests of the slurmctld plugins (`site_factor/cellsched`,
//! `job_submit/cellsched`) on a live cluster.
//!
//! Tests that need "the cluster is full" or a changed config run on a
//! private cluster of this module ([`Private`]: own dir, port base = test
//! cluster's + 60, re-planning every 2 s), one at a time (a mutex), so the
//! other modules' jobs on the shared cluster cannot disturb their timing and
//! their blocker jobs cannot disturb others. It is brought down when the
//! test process exits. Checks that need no full cluster (rejected user
//! input) use the shared cluster.
//!
//! Expectations are computed with `cellsched_core::estimator` on the same
//! built-in catalogs the plugin uses, never hard-coded.
use crate::common::{self, require_e2e};
use cellsched_devcluster::{Cluster, LocalClusterSpec};
use cellsched_core::estimator::{CellOffer, Estimate, Estimator, JobSpec};
use cellsched_core::gpu::GpuCatalog;
use cellsched_core::model::ModelCatalog;
use cellsched_core::Decision;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Model and global batch of the DL jobs (the catalog alias the SPANK plugin also accepts).
const MODEL: &str = "gpt2";
const BATCH: u32 = 32;
/// A model small enough for any single node's Cell (pinned-Cell checks).
const SMALL_MODEL: &str = "gpt__125M";
/// How long a job may take to reach a state.
const WAIT: Duration = Duration::from_secs(90);
/// Port offset of the private cluster above the test cluster's base
/// (cluster.rs uses 40, 100, 130, 160 in the same 200-port block).
const PORT_OFFSET: u16 = 60;

/// The private cluster's cellsched.toml: fast re-planning, a generous
/// slowdown bound, a profile DB that does not exist (the "missing data"
/// case: logged once, datasheet estimates used) and the job history of
/// [`history`] for the iteration predictor. Cell sizing is greedy here
/// (the fastest Cell, up to `max_gpus`), so that the tests of ordering and
/// re-planning see large Cells that cannot run side by side; the sizing
/// rule's own test puts the defaults back ([`sizing_toml`]).
fn private_toml(dir: &std::path::Path) -> String {
    format!("{}max_gpu_factor = 16.0\nmin_marginal_efficiency = 0.0\n", sizing_toml(dir))
}

/// [`private_toml`] with the default Cell sizing (marginal value), without
/// load-adaptive growth (`load_sizing = false`): the expected Cells are
/// `place()`'s, which sizes by marginal value alone, and an idle test
/// cluster would otherwise grow every job into its free GPUs.
fn sizing_toml(dir: &std::path::Path) -> String {
    format!(
        "# cellsched e2e placement tests\n\
[estimator]\nprofile_db = \"/nonexistent/cellsched-e2e/profiles.csv\"\nhistory = \"{}\"\n\
[placement]\nreplan_interval_s = 2\nreplan_max_slowdown = 10.0\nload_sizing = false\n",
        dir.join("history.csv").display()
    )
}

/// Models of the history: root's recurring SHORT_MODEL jobs run ~1,000
/// iterations, its LONG_MODEL jobs ~1,000,000.
const SHORT_MODEL: &str = "gpt__350M";
const LONG_MODEL: &str = "bert__350M";

/// The job history written for the private cluster (user root, who submits the tests' jobs).
fn history() -> String {
    let rec = |model: &str, iters: u64, i: u64| cellsched_core::history::HistoryRecord {
        user: "root".into(),
        model: model.into(),
        batch: BATCH,
        gpus: 4,
        requested_time_s: 3600.0,
        iterations: iters + (i % 5) * iters / 50,
        elapsed_s: 600.0,
        gpu_type: Some("a100".into()),
    };
    let records: Vec<_> =
        (0..40).map(|i| rec(SHORT_MODEL, 1_000, i)).chain((0..40).map(|i| rec(LONG_MODEL, 1_000_000, i))).collect();
    cellsched_core::history::to_csv_string(&records)
}

/// A config the plugins must refuse (typo in a key).
const BROKEN_TOML: &str = "[placement]\nmax_gpu = 4\n";

/// This module's own cluster and the commands run against it.
struct Private {
    spec: LocalClusterSpec,
    cluster: Cluster,
    jobs_dir: PathBuf,
}

impl Private {
    /// Slurm commands against this cluster (`common::SlurmAt`: scrubbed environment).
    fn slurm(&self) -> common::SlurmAt {
        common::SlurmAt {
            bin: self.spec.slurm_bin.clone(),
            slurm_conf: self.cluster.layout.slurm_conf(),
            cwd: self.jobs_dir.clone(),
        }
    }
}

/// The private cluster, `None` until first used. Holding the lock = owning the cluster.
static PRIVATE: Mutex<Option<Private>> = Mutex::new(None);

extern "C" {
    fn atexit(cb: extern "C" fn()) -> std::ffi::c_int;
}

/// Brings the private cluster down when the test process exits.
extern "C" fn private_down() {
    let _ = std::panic::catch_unwind(|| {
        let guard = PRIVATE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = guard.as_ref() {
            let _ = p.cluster.down(cellsched_devcluster::JobPolicy::Cancel);
            let _ = std::fs::remove_dir_all(&p.spec.dir);
        }
    });
}

/// The private cluster's spec, with `toml` as cellsched.toml (default: [`private_toml`]).
fn private_spec(toml: Option<&str>) -> LocalClusterSpec {
    let mut spec = common::test_spec();
    spec.port_base += PORT_OFFSET;
    spec.dir = std::env::temp_dir().join(format!("cs-e2e-place-{}", std::process::id()));
    spec.cellsched_toml = Some(toml.map_or_else(|| private_toml(&spec.dir), str::to_string));
    spec
}

/// Locks the private cluster (bringing it up on first use) and cancels
/// whatever an earlier test left in it.
fn private() -> MutexGuard<'static, Option<Private>> {
    let mut g = PRIVATE.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        let spec = private_spec(None);
        let _ = std::fs::remove_dir_all(&spec.dir);
        std::fs::create_dir_all(&spec.dir).expect("create placement cluster dir");
        std::fs::write(spec.dir.join("history.csv"), history()).expect("write history.csv");
        let t = Instant::now();
        let cluster = Cluster::up(&spec).unwrap_or_else(|e| panic!("cannot bring the placement cluster up: {e}"));
        // SAFETY: registers a plain extern "C" fn with the C library.
        unsafe { atexit(private_down) };
        eprintln!("placement cluster at {} in {:.1} s", spec.dir.display(), t.elapsed().as_secs_f64());
        let jobs_dir = spec.dir.join("jobs");
        std::fs::create_dir_all(&jobs_dir).expect("create jobs dir");
        *g = Some(Private { spec, cluster, jobs_dir });
    }
    g.as_ref().unwrap().reset();
    g
}

/// True (with a note) when the plugins these tests need are built.
fn plugins_built() -> bool {
    let all = ["libsite_factor_cellsched.so", "libjob_submit_cellsched.so", "libspank_cellsched.so"];
    let missing: Vec<_> = all.iter().filter(|l| !common::plugin_built(l)).collect();
    if !missing.is_empty() {
        eprintln!("skipped: {missing:?} not built (cargo build --release -p ...)");
    }
    missing.is_empty()
}

/// Puts the private cluster's cellsched.toml back and reconfigures when dropped.
struct RestoreToml<'a>(&'a Private, PathBuf, String);

impl Drop for RestoreToml<'_> {
    fn drop(&mut self) {
        let from = self.0.ctld_log().len();
        let _ = std::fs::write(&self.1, &self.2);
        let _ = self.0.cmd("scontrol", &["reconfigure"]);
        self.0.wait_job_submit_reload(from);
    }
}

impl Private {
    /// Waits (bounded) until job_submit/cellsched has read cellsched.toml
    /// again after log offset `from` (its re-planning thread notices a
    /// changed file within `replan_interval_s`): a `loaded` or `config error` line.
    fn wait_job_submit_reload(&self, from: usize) {
        let t = Instant::now();
        while t.elapsed() < WAIT {
            let log = self.ctld_log();
            let new = &log[from.min(log.len())..];
            if new.lines().any(|l| l.contains("job_submit/cellsched") && (l.contains(": loaded ") || l.contains("config error"))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Writes `text` as cellsched.toml and reconfigures, and waits until
    /// job_submit has read it; the good file comes back when the guard drops.
    fn replace_toml(&self, text: &str) -> RestoreToml<'_> {
        let path = self.cluster.layout.cellsched_toml();
        let guard = RestoreToml(self, path.clone(), common::read(&path));
        let from = self.ctld_log().len();
        std::fs::write(&path, text).unwrap();
        self.ok("scontrol", &["reconfigure"]);
        self.wait_job_submit_reload(from);
        guard
    }

    fn cmd(&self, name: &str, args: &[&str]) -> Output {
        self.slurm().cmd(name, args)
    }

    fn ok(&self, name: &str, args: &[&str]) -> String {
        self.slurm().ok(name, args)
    }

    /// `sbatch --parsable ARGS`: the job id, or stderr when refused.
    fn submit(&self, args: &[&str]) -> Result<u32, String> {
        let mut full = vec!["--parsable"];
        full.extend_from_slice(args);
        let out = self.cmd("sbatch", &full);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(stderr);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.trim().split(';').next().and_then(|s| s.parse().ok()).ok_or(format!("sbatch said {stdout:?} {stderr}"))
    }

    /// A job occupying `gpus` GPUs of `node` (type `ty`) until cancelled, with
    /// no time limit (the partition's is infinite); waits until it runs.
    fn block(&self, node: &str, ty: &str, gpus: u32) -> u32 {
        self.block_with(node, ty, gpus, &[])
    }

    /// [`Self::block`] with extra `sbatch` arguments (e.g. a time limit).
    fn block_with(&self, node: &str, ty: &str, gpus: u32, extra: &[&str]) -> u32 {
        let gres = format!("--gres=gpu:{ty}:{gpus}");
        let name = common::unique_name("blocker");
        let mut args = vec!["-J", name.as_str(), "-N1", "-w", node, gres.as_str()];
        args.extend_from_slice(extra);
        args.extend(["--wrap", "sleep 600"]);
        let id = self.submit(&args).unwrap_or_else(|e| panic!("blocker on {node}: {e}"));
        self.wait_state(id, &["RUNNING"]);
        id
    }

    fn cancel(&self, ids: &[u32]) {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.ok("scancel", &refs);
    }

    /// Cancels every job and waits until the queue is empty and nodes are idle.
    fn reset(&self) {
        // Every user's jobs (some tests submit as other users).
        let ids = self.ok("squeue", &["-h", "-o", "%A"]);
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let _ = self.cmd("scancel", &ids);
        }
        let t = Instant::now();
        loop {
            let q = self.ok("squeue", &["-h", "-o", "%i"]);
            let busy = self.ok("sinfo", &["-h", "-o", "%T"]);
            if q.trim().is_empty() && busy.lines().all(|l| l.trim() == "idle") {
                return;
            }
            assert!(t.elapsed() < WAIT, "placement cluster not idle: queue {q:?}, node states {busy:?}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn job(&self, id: u32) -> HashMap<String, String> {
        common::parse_key_values(&self.ok("scontrol", &["show", "job", "-o", &id.to_string()]))
    }

    /// The job's AdminComment ("" if none; see `common::SlurmAt::admin_comment`).
    fn admin_comment(&self, id: u32) -> String {
        self.slurm().admin_comment(id).unwrap_or_default()
    }

    fn state(&self, id: u32) -> String {
        let out = self.cmd("scontrol", &["show", "job", "-o", &id.to_string()]);
        if out.status.success() {
            if let Some(s) = common::parse_key_values(&String::from_utf8_lossy(&out.stdout)).get("JobState") {
                return s.clone();
            }
        }
        let sacct = self.ok("sacct", &["-X", "-n", "-P", "-j", &id.to_string(), "-o", "State"]);
        sacct.split_whitespace().next().unwrap_or("UNKNOWN").to_string()
    }

    /// Waits until the job is in one of `states`; panics on another terminal state or timeout.
    fn wait_state(&self, id: u32, states: &[&str]) -> String {
        let t = Instant::now();
        loop {
            let s = self.state(id);
            if states.contains(&s.as_str()) {
                return s;
            }
            assert!(!common::TERMINAL_STATES.contains(&s.as_str()), "job {id} ended {s}, wanted {states:?}");
            assert!(t.elapsed() < WAIT, "job {id} still {s} after {:?}, wanted {states:?}", WAIT);
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// `sacct -X` fields of a job once `ready` accepts them.
    fn sacct(&self, id: u32, fields: &[&str], ready: impl Fn(&HashMap<String, String>) -> bool) -> HashMap<String, String> {
        let t = Instant::now();
        loop {
            let text = self.ok("sacct", &["-X", "-n", "-P", "-j", &id.to_string(), "-o", &fields.join(",")]);
            let m: HashMap<String, String> = text
                .lines()
                .next()
                .map(|l| fields.iter().zip(l.split('|')).map(|(f, v)| (f.to_string(), v.to_string())).collect())
                .unwrap_or_default();
            if m.len() == fields.len() && ready(&m) {
                return m;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "sacct of job {id}: no ready record, last {m:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `(priority, site factor)` of a pending job from `sprio`; `None` if sprio does not list it.
    fn sprio(&self, id: u32) -> Option<(u64, u64)> {
        let text = self.ok("sprio", &["-h", "-j", &id.to_string(), "-o", "%i %Y %S"]);
        let f: Vec<u64> = text.lines().next()?.split_whitespace().filter_map(|v| v.parse().ok()).collect();
        (f.len() == 3 && f[0] == u64::from(id)).then(|| (f[1], f[2]))
    }

    fn ctld_log(&self) -> String {
        common::read(&self.cluster.layout.log().join("slurmctld.log"))
    }

    /// The slurmctld log written since the last start of the daemon.
    fn ctld_log_current(&self) -> String {
        let log = self.ctld_log();
        let start = log.rfind("started on cluster").unwrap_or(0);
        log[start..].to_string()
    }

    /// Free GPUs of each node as the estimator's offers, `busy` = (node, GPUs in use).
    fn offers(&self, busy: &[(&str, u32)]) -> Vec<CellOffer> {
        let mut groups = self.spec.groups.clone();
        groups.sort_by(|a, b| a.gpu_type.cmp(&b.gpu_type));
        groups
            .iter()
            .map(|g| CellOffer {
                gpu_type: g.gpu_type.clone(),
                gpus_per_node: g.gpus_per_node,
                free_gpus_per_node: g
                    .node_names()
                    .iter()
                    .map(|n| g.gpus_per_node - busy.iter().find(|(b, _)| b == n).map_or(0, |(_, u)| *u))
                    .collect(),
            })
            .collect()
    }

    /// Every node with its GPU type and count.
    fn nodes(&self) -> Vec<(String, String, u32)> {
        self.spec
            .groups
            .iter()
            .flat_map(|g| g.node_names().into_iter().map(move |n| (n, g.gpu_type.clone(), g.gpus_per_node)))
            .collect()
    }
}

fn estimator() -> Estimator {
    Estimator::new(GpuCatalog::builtin(), ModelCatalog::builtin())
}

fn job_spec() -> JobSpec {
    JobSpec { model: ModelCatalog::builtin().resolve(MODEL).expect("test model in the catalog"), global_batch: BATCH }
}

/// The estimator's best Cell on `offers` (the plugin's default `max_gpus` = 16;
/// greedy sizing, as [`private_toml`] configures it).
fn best(offers: &[CellOffer]) -> Estimate {
    estimator().rank_cells(&job_spec(), offers, 16).into_iter().next().expect("a feasible Cell for the test model")
}

/// The test job's best Cell on the idle cluster, and its best Cell of another GPU type.
fn planned_and_other(p: &Private) -> (Estimate, Estimate) {
    let planned = best(&p.offers(&[]));
    let other = estimator()
        .rank_cells(&job_spec(), &p.offers(&[]), 16)
        .into_iter()
        .find(|e| e.cell.gpu_type != planned.cell.gpu_type)
        .expect("a second GPU type for the job");
    (planned, other)
}

fn dl_args<'a>(name: &'a str, iters: &'a str, script: &'a str) -> Vec<&'a str> {
    vec!["-J", name, "--dl-model", MODEL, "--dl-batch", "32", "--dl-cell=auto", "--dl-iters", iters, "--wrap", script]
}

fn decision_of(comment: &str) -> Decision {
    Decision::parse_admin_comment(comment).unwrap_or_else(|| panic!("no cellsched decision in {comment:?}"))
}

/// (a) With every GPU busy, a long then a short DL job are submitted; when
/// the GPUs of their Cell free up the short one starts first, and `sprio`
/// shows the site factor (short > long > 0).
#[test]
fn short_dl_job_starts_before_long_one() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push((t.clone(), p.block(&n, &t, g)));
    }
    let cell = best(&p.offers(&[]));
    let capacity: u32 = p.nodes().iter().filter(|(_, t, _)| *t == cell.cell.gpu_type).map(|(_, _, g)| g).sum();
    assert!(cell.cell.gpus * 2 > capacity, "precondition: two {} jobs must not fit at once on {capacity} GPUs", cell.cell);

    let (ln, sn) = (common::unique_name("long"), common::unique_name("short"));
    let long = p.submit(&dl_args(&ln, "1000000", "sleep 4")).expect("submit long DL job");
    let short = p.submit(&dl_args(&sn, "10", "sleep 4")).expect("submit short DL job");
    for id in [long, short] {
        let j = p.job(id);
        assert_eq!(j["JobState"], "PENDING", "job {id}: {j:?}");
        assert_eq!(decision_of(&p.admin_comment(id)).cell, cell.cell, "job {id} placed on the cluster's best Cell");
    }
    // sprio lists pending jobs with the site factor (SITE column).
    let t = Instant::now();
    let (lp, sp) = loop {
        if let (Some(l), Some(s)) = (p.sprio(long), p.sprio(short)) {
            break (l, s);
        }
        assert!(t.elapsed() < WAIT, "sprio does not list jobs {long} {short}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(sp.1 > lp.1 && lp.1 > 0, "SITE factors: short {sp:?}, long {lp:?}");
    assert!(sp.0 > lp.0, "priorities: short {sp:?}, long {lp:?}");
    let listing = p.ok("sprio", &["-l", "-j", &format!("{long},{short}")]);
    assert!(listing.lines().next().is_some_and(|h| h.contains("SITE")), "{listing}");

    // Free the Cell's GPU type (the others stay busy so nothing can move away).
    let freed: Vec<u32> = blockers.iter().filter(|(t, _)| *t == cell.cell.gpu_type).map(|(_, id)| *id).collect();
    p.cancel(&freed);
    p.wait_state(short, &["RUNNING", "COMPLETED"]);
    assert_eq!(p.state(long), "PENDING", "the long job must wait for the short one");
    p.wait_state(long, &["RUNNING", "COMPLETED"]);
    p.wait_state(long, &["COMPLETED"]);
    let fields = ["Start", "AllocTRES", "AdminComment"];
    let done = |m: &HashMap<String, String>| m["AllocTRES"].contains("gres/gpu");
    let (s, l) = (p.sacct(short, &fields, done), p.sacct(long, &fields, done));
    assert!(s["Start"] < l["Start"], "short started {} after long {}", s["Start"], l["Start"]);
    let blockers: Vec<u32> = blockers.iter().map(|(_, id)| *id).collect();
    p.cancel(&blockers);
}

/// (b) `--dl-cell=auto` lands on the Cell the estimator ranks best among
/// the free GPUs (not the cluster's best, which is taken), and sacct shows
/// the typed GPUs and the decision.
#[test]
fn auto_cell_lands_on_best_free_cell() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    // Take one node of the type the whole cluster's best Cell uses.
    let overall = best(&p.offers(&[]));
    let (node, ty, gpus) = p.nodes().into_iter().find(|(_, t, _)| *t == overall.cell.gpu_type).unwrap();
    let blocker = p.block(&node, &ty, gpus);
    let expected = best(&p.offers(&[(&node, gpus)]));
    assert_ne!(expected.cell, overall.cell, "precondition: blocking {node} must change the best Cell");

    let name = common::unique_name("auto");
    let id = p.submit(&dl_args(&name, "100", "sleep 1")).expect("submit DL job");
    p.wait_state(id, &["COMPLETED"]);
    // slurmdbd records the job asynchronously: wait for its GPUs and decision there.
    let f = p.sacct(id, &["JobID", "AllocTRES", "AdminComment", "NodeList"], |m| {
        m["AllocTRES"].contains("gres/gpu") && Decision::parse_admin_comment(&m["AdminComment"]).is_some()
    });
    let want = format!("gres/gpu:{}={}", expected.cell.gpu_type, expected.cell.gpus);
    assert!(f["AllocTRES"].split(',').any(|t| t == want), "AllocTRES {} lacks {want}", f["AllocTRES"]);
    assert!(f["NodeList"].starts_with(&format!("{}-", expected.cell.gpu_type)), "{f:?}");
    let d = decision_of(&f["AdminComment"]);
    assert_eq!((d.cell.clone(), d.nodes, d.plan), (expected.cell.clone(), expected.nodes, expected.plan), "{f:?}");
    assert!((d.iter_s - expected.iter_time_s).abs() < 1e-5, "iter_s {} vs {}", d.iter_s, expected.iter_time_s);
    // The estimator data file is missing: logged, datasheet numbers used.
    assert_eq!(d.source.to_string(), "datasheet");
    let log = p.ctld_log_current();
    assert!(log.contains("estimator.profile_db") && log.contains("/nonexistent/cellsched-e2e/profiles.csv"), "no profile_db error logged");
    p.cancel(&[blocker]);
}

/// (c) A pending job whose type is busy is re-planned onto a type that
/// frees up and starts without user action; shown in the log and sacct.
#[test]
fn pending_job_is_replanned_onto_freed_type() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let blockers: Vec<(String, u32)> = p.nodes().into_iter().map(|(n, t, g)| (t.clone(), p.block(&n, &t, g))).collect();
    // The type that will free up: the best other type for the job.
    let (planned, other) = planned_and_other(p);
    let busy: Vec<(String, u32)> =
        p.nodes().into_iter().filter(|(_, t, _)| *t != other.cell.gpu_type).map(|(n, _, g)| (n, g)).collect();
    let busy_refs: Vec<(&str, u32)> = busy.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let expected = best(&p.offers(&busy_refs));
    assert!(expected.iter_time_s <= planned.iter_time_s * 10.0, "precondition: within replan_max_slowdown");

    let log_start = p.ctld_log().len();
    let name = common::unique_name("replan");
    let out = p.jobs_dir.join(format!("{name}.out"));
    let out_s = out.to_string_lossy().into_owned();
    // The batch step reports the decision its environment carries and the plan the SPANK plugin injected.
    let script = "echo \"DECISION=$CELLSCHED_DECISION\"; echo \"PLAN cell=$CELLSCHED_CELL src=$CELLSCHED_PLAN_SOURCE\"; sleep 2";
    let mut args = dl_args(&name, "100", script);
    args.extend(["-o", out_s.as_str()]);
    let id = p.submit(&args).expect("submit DL job");
    let j = p.job(id);
    assert_eq!(j["JobState"], "PENDING");
    assert_eq!(decision_of(&p.admin_comment(id)).cell, planned.cell);

    let freed: Vec<u32> = blockers.iter().filter(|(t, _)| *t == other.cell.gpu_type).map(|(_, b)| *b).collect();
    p.cancel(&freed);
    p.wait_state(id, &["RUNNING", "COMPLETED"]);
    let comment = p.admin_comment(id);
    assert!(comment.contains(&format!("replanned_from={}", planned.cell)), "{comment}");
    assert!(comment.contains(" moved_at="), "the move is stamped for the re-planning cool-down: {comment}");
    assert_eq!(decision_of(&comment).cell, expected.cell);
    let log = p.ctld_log();
    let line = format!("re-planned JobId={id} from {} to {}", planned.cell, expected.cell);
    assert!(log[log_start.min(log.len())..].contains(&line), "slurmctld.log lacks '{line}'");

    p.wait_state(id, &["COMPLETED"]);
    let f = p.sacct(id, &["JobID", "AllocTRES", "AdminComment"], |m| m["AllocTRES"].contains("gres/gpu") && m["AdminComment"].contains("replanned_from="));
    let want = format!("gres/gpu:{}={}", expected.cell.gpu_type, expected.cell.gpus);
    assert!(f["AllocTRES"].split(',').any(|t| t == want), "AllocTRES {} lacks {want}", f["AllocTRES"]);
    assert!(f["AdminComment"].contains("replanned_from="), "{f:?}");
    // The job's environment carries the new decision (env_sup overrides the one saved at submit).
    let text = common::read(&out);
    let env_decision = text.lines().find_map(|l| l.strip_prefix("DECISION=")).unwrap_or_else(|| panic!("no DECISION line: {text}"));
    assert_eq!(decision_of(env_decision).cell, expected.cell, "batch environment: {text}");
    assert!(!env_decision.contains("replanned_from") && !env_decision.contains("model="), "{env_decision}");
    if common::plugin_built("libspank_cellsched.so") {
        let want = format!("PLAN cell={} src=decision", expected.cell);
        assert!(text.lines().any(|l| l == want), "injected plan is not the re-planned decision ({want}): {text}");
    }
    let all: Vec<u32> = blockers.iter().map(|(_, b)| *b).collect();
    p.cancel(&all);
}

/// (c') The wait test: a pending job whose Cell Slurm's backfill expects to
/// free within minutes is not moved to a slower free Cell when the slower
/// Cell would lose more than that over its declared work; it starts on its
/// own Cell, no `replanned_from`. (In (c) the blockers have no time limit,
/// so backfill's forecast is beyond its window and the move wins.)
#[test]
fn pending_job_waits_for_its_cell_when_that_finishes_first() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let (planned, other) = planned_and_other(p);
    // The planned type's GPUs busy for at most 2 minutes, the others free.
    let blockers: Vec<u32> = p
        .nodes()
        .into_iter()
        .filter(|(_, t, _)| *t == planned.cell.gpu_type)
        .map(|(n, t, g)| p.block_with(&n, &t, g, &["--time=2"]))
        .collect();
    let busy: Vec<(String, u32)> = p.nodes().into_iter().filter(|(_, t, _)| *t == planned.cell.gpu_type).map(|(n, _, g)| (n, g)).collect();
    let busy_refs: Vec<(&str, u32)> = busy.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let slower = best(&p.offers(&busy_refs));
    assert!(slower.iter_time_s > planned.iter_time_s, "precondition: the free Cell ({}) is slower", slower.cell);
    assert!(slower.iter_time_s <= planned.iter_time_s * 10.0, "precondition: within replan_max_slowdown");
    // Work whose loss on the slower Cell is far beyond the 2 minutes (and not
    // too long to run once its Cell frees: the job sleeps 2 s whatever it declares).
    let iters = ((3600.0 / (slower.iter_time_s - planned.iter_time_s)).ceil() as u64).max(1).to_string();
    let log_start = p.ctld_log().len();
    let name = common::unique_name("waits");
    let id = p.submit(&dl_args(&name, &iters, "sleep 2")).expect("submit DL job");
    assert_eq!(decision_of(&p.admin_comment(id)).cell, planned.cell);
    // Several re-planning passes (every 2 s) and backfill cycles (every 1 s).
    std::thread::sleep(std::time::Duration::from_secs(12));
    assert_eq!(p.state(id), "PENDING", "{} (other type {} free)", p.admin_comment(id), other.cell.gpu_type);
    let comment = p.admin_comment(id);
    assert!(!comment.contains("replanned_from"), "moved although its Cell frees first: {comment}");
    let log = p.ctld_log();
    assert!(!log[log_start.min(log.len())..].contains(&format!("re-planned JobId={id} ")), "slurmctld.log shows a move of {id}");
    // Slurm's forecast the decision rested on: within the blockers' limit.
    let start = p.ok("squeue", &["-h", "-j", &id.to_string(), "--start", "-o", "%S"]);
    assert!(start.trim() != "N/A" && !start.trim().is_empty(), "no backfill forecast: {start:?}");
    p.cancel(&blockers);
    p.wait_state(id, &["RUNNING", "COMPLETED"]);
    assert_eq!(decision_of(&p.admin_comment(id)).cell, planned.cell);
    p.wait_state(id, &["COMPLETED"]);
}

/// (d) A job without DL options keeps its request, gets no site factor and
/// no AdminComment, while a DL job pending beside it gets both.
#[test]
fn job_without_dl_options_is_untouched() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let (node, ty, gpus) = p.nodes().into_iter().last().expect("a node");
    let blocker = p.block(&node, &ty, gpus);
    let gres = format!("--gres=gpu:{ty}:{gpus}");
    let w = ["-w", node.as_str()];
    let plain_name = common::unique_name("plain");
    let mut plain_args = vec!["-J", plain_name.as_str(), gres.as_str(), "--wrap", "sleep 1"];
    plain_args.extend_from_slice(&w);
    let plain = p.submit(&plain_args).expect("submit plain job");
    let dl_name = common::unique_name("dl-pinned");
    let cell = format!("--dl-cell={ty}x{gpus}");
    let dl = p
        .submit(&["-J", &dl_name, "--dl-model", SMALL_MODEL, "--dl-batch", "32", &cell, "-w", &node, "--wrap", "sleep 1"])
        .expect("submit pinned DL job");

    let j = p.job(plain);
    assert_eq!(j.get("Features").map(String::as_str), Some("(null)"), "{j:?}");
    assert_eq!(j.get("TresPerNode").map(String::as_str), Some(format!("gres:gpu:{ty}:{gpus}").as_str()), "{j:?}");
    assert!(p.admin_comment(plain).is_empty(), "{j:?}");
    assert!(p.admin_comment(dl).starts_with("cellsched:"));
    let t = Instant::now();
    let (pp, dp) = loop {
        if let (Some(a), Some(b)) = (p.sprio(plain), p.sprio(dl)) {
            break (a, b);
        }
        assert!(t.elapsed() < WAIT, "sprio does not list {plain} {dl}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(pp.1, 0, "plain job has a site factor: {pp:?}");
    assert!(dp.1 > 0, "DL job lacks the site factor: {dp:?}");

    p.cancel(&[blocker]);
    p.wait_state(plain, &["COMPLETED"]);
    let f = p.sacct(plain, &["AllocTRES", "AdminComment"], |m| m["AllocTRES"].contains("gres/gpu"));
    assert!(f["AllocTRES"].split(',').any(|t| t == format!("gres/gpu:{ty}={gpus}")), "{f:?}");
    assert!(f["AdminComment"].is_empty(), "{f:?}");
    p.cancel(&[dl]);
}

/// (e) Bad user input is rejected at submit with a clear message and no job,
/// and slurmctld keeps answering: an unknown model (SPANK refuses it) and a
/// pinned Cell the estimator finds infeasible (job_submit refuses it).
#[test]
fn bad_dl_input_is_rejected_with_a_message() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    common::cluster();
    let name = common::unique_name("badmodel");
    let e = common::submit(&["-J", &name, "--dl-model", "no_such_model_xyz", "--dl-batch", "8", "--wrap", "true"])
        .expect_err("unknown model must be refused");
    assert!(e.contains("--dl-model") && e.contains("no_such_model_xyz"), "{e}");
    let q = common::slurm_ok("squeue", &["-h", "-n", &name]);
    assert!(q.trim().is_empty(), "a job was created: {q}");

    let name = common::unique_name("infeasible");
    let e = common::submit(&["-J", &name, "--dl-model", "llama7b", "--dl-batch", "64", "--dl-cell=a10x1", "--wrap", "true"])
        .expect_err("a 7B model on one a10 must be refused");
    assert!(e.contains("cellsched") && e.contains("a10x1") && e.contains("cannot run"), "{e}");
    assert!(common::slurm_ok("squeue", &["-h", "-n", &name]).trim().is_empty());

    // A GPU type the cluster lacks, plans no job may run, heterogeneous jobs: refused, naming why.
    let script = common::cluster().jobs_dir.join("het.sh");
    std::fs::write(&script, "#!/bin/sh
true
").unwrap();
    let script_s = script.display().to_string();
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "8", "--dl-cell=h100x4", "--wrap", "true"], &["'h100'", "a10, a100, v100"]),
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "8", "--dl-plan=dp=1000000,tp=1000000,pp=1000000", "--wrap", "true"], &["--dl-plan", "1..=4096"]),
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "8", "--dl-plan=dp=4096,tp=4096,pp=4096", "--wrap", "true"], &["--dl-plan", "more than any job may use"]),
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "8", "--dl-plan=dp=2147483650,tp=2,pp=1", "--wrap", "true"], &["--dl-plan"]),
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "64", "--dl-plan=dp=32,tp=1,pp=1", "--wrap", "true"], &["32 GPUs", "most a job may use is 16"]),
        (&["--dl-model", SMALL_MODEL, "--dl-batch", "8", "--gres=gpu:1", ":", "--gres=gpu:1", &script_s], &["heterogeneous"]),
    ];
    for (args, needles) in cases {
        let name = common::unique_name("refused");
        let mut full = vec!["-J", name.as_str()];
        full.extend_from_slice(args);
        let e = common::submit(&full).expect_err(&format!("{args:?} must be refused"));
        for n in needles {
            assert!(e.contains(n), "{args:?}: message lacks {n:?}: {e}");
        }
        assert!(common::slurm_ok("squeue", &["-h", "-n", &name]).trim().is_empty(), "{args:?} created a job");
    }
    assert!(common::slurm_ok("scontrol", &["ping"]).contains("UP"));
}

/// (e) A broken config file never stops slurmctld: the plugins log the
/// error (file and line) and a DL job is scheduled the stock way; the good
/// config is restored afterwards.
#[test]
fn broken_config_falls_back_to_stock() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let mut guard = private();
    let p = guard.as_mut().unwrap();
    /// Restores the good config even if the test fails.
    struct Restore<'a>(&'a mut Private);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let spec = private_spec(None);
            match Cluster::up(&spec) {
                Ok(c) => self.0.cluster = c,
                Err(e) => eprintln!("cannot restore the placement cluster: {e}"),
            }
        }
    }
    let broken = private_spec(Some(BROKEN_TOML));
    p.cluster = Cluster::up(&broken).unwrap_or_else(|e| panic!("restart with a broken config: {e}"));
    let r = Restore(p);
    let p = &*r.0;
    let log = p.ctld_log_current();
    let toml = p.cluster.layout.cellsched_toml().display().to_string();
    for plugin in ["site_factor/cellsched", "job_submit/cellsched"] {
        assert!(
            log.lines().any(|l| l.contains(plugin) && l.contains("config error") && l.contains(&format!("{toml}:2")) && l.contains("max_gpu")),
            "{plugin} did not log the config error naming {toml}:2"
        );
    }
    let name = common::unique_name("stock");
    let id = p
        .submit(&["-J", &name, "--dl-model", MODEL, "--dl-batch", "32", "--dl-cell=auto", "--gres=gpu:1", "--wrap", "sleep 1"])
        .expect("a DL job is accepted with a broken config");
    let j = p.job(id);
    assert_eq!(j.get("Features").map(String::as_str), Some("(null)"), "{j:?}");
    assert_eq!(j.get("TresPerNode").map(String::as_str), Some("gres:gpu:1"), "{j:?}");
    p.wait_state(id, &["COMPLETED"]);
    let f = p.sacct(id, &["AllocTRES", "AdminComment"], |m| m["AllocTRES"].contains("gres/gpu"));
    assert!(f["AdminComment"].is_empty(), "{f:?}");
    // cellsched cannot decide: a pinned Cell is still requested as given ...
    let pinned = p
        .submit(&["-J", &common::unique_name("pinned"), "--dl-model", SMALL_MODEL, "--dl-batch", "8", "--dl-cell=a100x4", "--wrap", "sleep 1"])
        .expect("a pinned DL job is accepted with a broken config");
    p.wait_state(pinned, &["COMPLETED"]);
    let f = p.sacct(pinned, &["AllocTRES", "NodeList"], |m| m["AllocTRES"].contains("gres/gpu"));
    assert!(f["AllocTRES"].contains("gres/gpu=4") && f["NodeList"].starts_with("a100-"), "the pinned 4 x a100 were dropped: {f:?}");
    // ... and a DL job asking for no GPUs is refused, saying what to add.
    let e = p
        .submit(&["-J", &common::unique_name("nogpu"), "--dl-model", MODEL, "--dl-batch", "32", "--wrap", "true"])
        .expect_err("a DL job without GPUs must be refused while cellsched cannot place it");
    assert!(e.contains("--gres") && e.contains("cellsched.toml"), "{e}");
    assert!(p.ok("scontrol", &["ping"]).contains("UP"));
}

/// (6) A config error on reconfigure leaves the last good configuration in
/// force for both plugins (logged): new DL jobs are still placed and
/// ranked; the good file is restored afterwards.
#[test]
fn config_error_on_reconfigure_keeps_the_last_good_configuration() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let _restore = p.replace_toml(BROKEN_TOML);
    // site_factor reloads on reconfigure, job_submit's re-planning thread when the file changes.
    let logged = |plugin: &str| p.ctld_log().lines().any(|l| l.contains(plugin) && l.contains("config error") && l.contains("last good"));
    let t = Instant::now();
    while !(logged("site_factor/cellsched") && logged("job_submit/cellsched")) && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(300));
    }
    for plugin in ["site_factor/cellsched", "job_submit/cellsched"] {
        assert!(logged(plugin), "{plugin}: no 'last good' line");
    }
    let id = p
        .submit(&["-J", &common::unique_name("lastgood"), "--hold", "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "100", "--wrap", "true"])
        .expect("a DL job is placed with the last good configuration");
    let c = p.admin_comment(id);
    assert!(Decision::parse_admin_comment(&c).is_some(), "no decision: {c:?}");
    p.ok("scontrol", &["release", &id.to_string()]);
    p.cancel(&[id]);
}

/// (6) When the plan file cannot be written, the job is told why in
/// `CELLSCHED_ERROR` (here: an unsafe, world-writable plan_dir).
#[test]
fn a_missing_plan_file_is_explained_in_cellsched_error() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let pd = p.cluster.layout.run().join("plans");
    std::fs::create_dir_all(&pd).unwrap();
    use std::os::unix::fs::PermissionsExt;
    /// Makes plan_dir safe again, even if the test fails.
    struct Restore(std::path::PathBuf);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
    std::fs::set_permissions(&pd, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let _r = Restore(pd.clone());
    let out = p.jobs_dir.join(format!("{}.out", common::unique_name("noplan")));
    let out_s = out.display().to_string();
    let id = p
        .submit(&["-o", &out_s, "--dl-model", SMALL_MODEL, "--dl-batch", "8", "--gres=gpu:a100:1", "--wrap", "echo FILE=[$CELLSCHED_PLAN_FILE] ERR=[$CELLSCHED_ERROR] DP=$CELLSCHED_DP"])
        .expect("submit");
    p.wait_state(id, &["COMPLETED"]);
    let text = common::read(&out);
    assert!(text.contains("FILE=[]") && text.contains("plan file not written") && text.contains("writable only by root"), "{text}");
    assert!(text.contains("DP=1"), "the plan itself still reaches the job: {text}");
}

/// (4a) Without `--dl-iters`, the order uses the iterations predicted from
/// the job history: a recurring short job submitted after a recurring long
/// one gets the higher priority (without the predictor both would fall back
/// to the same default remaining time and tie on the site factor).
#[test]
fn predicted_iterations_order_jobs_without_dl_iters() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let t = Instant::now();
    while !p.ctld_log_current().contains("fitted the iteration predictor on 80 jobs") {
        assert!(t.elapsed() < WAIT, "site_factor/cellsched did not log fitting the predictor on the history");
        std::thread::sleep(Duration::from_millis(500));
    }
    // Held back by a begin time, so both stay pending whatever is free.
    let submit = |model: &str| {
        let name = common::unique_name("pred");
        p.submit(&["-J", &name, "--begin=now+3600", "--dl-model", model, "--dl-batch", "32", "--wrap", "true"])
            .unwrap_or_else(|e| panic!("submit {model}: {e}"))
    };
    let long = submit(LONG_MODEL);
    let short = submit(SHORT_MODEL);
    let prio = |id: u32| -> u64 { p.job(id)["Priority"].parse().expect("numeric Priority") };
    let (lp, sp) = (prio(long), prio(short));
    assert!(sp > lp, "predicted-short job {short} has priority {sp}, predicted-long job {long} {lp}");
    p.cancel(&[long, short]);
}

/// PID of a daemon of the private cluster.
fn daemon_pid(p: &Private, label: &str) -> i32 {
    let d = p.cluster.daemons().unwrap().into_iter().find(|d| d.label == label).unwrap_or_else(|| panic!("no daemon {label}"));
    d.running_pid().unwrap_or_else(|| panic!("{label} is not running"))
}

/// Sends `sig` to a daemon of the private cluster and waits until it is gone.
fn kill_daemon(p: &Private, label: &str, sig: i32) {
    common::stop_daemon(&p.cluster, label, sig, WAIT);
}

/// Brings the private cluster back with `cluster up` (repairing what is down).
fn repair(p: &mut Private) {
    p.cluster = Cluster::up(&p.spec).unwrap_or_else(|e| panic!("repairing the placement cluster: {e}"));
}

/// (14.6) `kill -9` of slurmctld with pending DL jobs, then `cluster up`:
/// their decisions and their order are kept.
#[test]
fn slurmctld_kill_9_keeps_decisions_and_order() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let mut guard = private();
    let p = guard.as_mut().unwrap();
    // Every GPU busy, so both DL jobs pend (and sprio lists them).
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push(p.block(&n, &t, g));
    }
    let (ln, sn) = (common::unique_name("k9-long"), common::unique_name("k9-short"));
    let long = p.submit(&dl_args(&ln, "1000000", "true")).expect("submit long");
    let short = p.submit(&dl_args(&sn, "10", "true")).expect("submit short");
    let before: Vec<String> = [long, short].iter().map(|id| p.admin_comment(*id)).collect();
    assert!(before.iter().all(|c| Decision::parse_admin_comment(c).is_some()), "{before:?}");
    let sprio = |p: &Private| -> ((u64, u64), (u64, u64)) {
        let t = Instant::now();
        loop {
            if let (Some(l), Some(s)) = (p.sprio(long), p.sprio(short)) {
                return (l, s);
            }
            assert!(t.elapsed() < WAIT, "sprio does not list jobs {long} {short}");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let (l0, s0) = sprio(p);
    assert!(s0.1 > l0.1, "short before long: {s0:?} {l0:?}");
    // slurmctld saves its job state a few seconds after a change (as any
    // Slurm does): kill it only once the saved state holds these jobs.
    let saved = p.cluster.layout.state().join("job_state");
    let since = std::time::SystemTime::now();
    let t = Instant::now();
    while std::fs::metadata(&saved).and_then(|m| m.modified()).map_or(true, |m| m <= since) && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(300));
    }
    kill_daemon(p, "slurmctld", libc::SIGKILL);
    repair(p);
    let after: Vec<String> = [long, short].iter().map(|id| p.admin_comment(*id)).collect();
    assert_eq!(after, before, "decisions changed across kill -9");
    let (l1, s1) = sprio(p);
    assert!(s1.1 > l1.1 && l1.1 > 0, "order lost across kill -9: short {s1:?} long {l1:?}");
    for id in &blockers {
        assert_eq!(p.state(*id), "RUNNING", "running job {id} across kill -9");
    }
    p.cancel(&[long, short]);
    p.cancel(&blockers);
}

/// (14.6) slurmdbd down while a DL job completes, then back: accounting
/// gets the job with its decision; nothing is lost.
#[test]
fn slurmdbd_down_while_jobs_complete_loses_nothing() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let mut guard = private();
    let p = guard.as_mut().unwrap();
    kill_daemon(p, "slurmdbd", libc::SIGTERM);
    let name = common::unique_name("dbd-down");
    let id = p.submit(&["-J", &name, "--dl-model", SMALL_MODEL, "--dl-batch", "8", "--gres=gpu:a100:1", "--wrap", "sleep 1"]).expect("submit");
    p.wait_state(id, &["COMPLETED"]);
    repair(p);
    let t = Instant::now();
    let f = loop {
        let text = p.ok("sacct", &["-X", "-n", "-P", "-j", &id.to_string(), "-o", "State,AdminComment"]);
        if let Some((state, comment)) = text.lines().next().and_then(|l| l.split_once('|')) {
            if state == "COMPLETED" && comment.contains("cellsched:") {
                break comment.to_string();
            }
        }
        assert!(t.elapsed() < Duration::from_secs(120), "job {id} not in accounting after slurmdbd came back: {text:?}");
        std::thread::sleep(Duration::from_millis(1000));
    };
    assert_eq!(Decision::parse_admin_comment(&f), Decision::parse_admin_comment(&p.admin_comment(id)));
}

/// (14.6) A slurmd killed while a DL job runs on it: Slurm requeues or
/// fails the job as it would any job; once slurmd is back its orphaned step
/// ends and the plan directory is removed.
#[test]
fn slurmd_killed_under_a_dl_job_leaves_no_plan_directory() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let mut guard = private();
    let p = guard.as_mut().unwrap();
    let plans = p.cluster.layout.run().join("plans");
    let dirs_of = |id: u32| -> Vec<String> {
        std::fs::read_dir(&plans)
            .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(&format!("{id}."))).collect())
            .unwrap_or_default()
    };
    let id = p
        .submit(&["-J", &common::unique_name("slurmd-kill"), "-w", "a10-1", "--dl-model", SMALL_MODEL, "--dl-batch", "8", "--gres=gpu:a10:1", "--wrap", "sleep 600"])
        .expect("submit");
    p.wait_state(id, &["RUNNING"]);
    let t = Instant::now();
    while dirs_of(id).is_empty() && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!dirs_of(id).is_empty(), "no plan directory for running job {id}");
    kill_daemon(p, "slurmd-a10-1", libc::SIGKILL);
    p.ok("scontrol", &["update", "nodename=a10-1", "state=down", "reason=cellsched-e2e"]);
    let state = {
        let t = Instant::now();
        loop {
            let s = p.state(id);
            if s != "RUNNING" && s != "COMPLETING" {
                break s;
            }
            assert!(t.elapsed() < WAIT, "job {id} still {s} after its node went down");
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    assert!(["PENDING", "REQUEUED", "NODE_FAIL", "FAILED", "CANCELLED"].contains(&state.as_str()), "job {id}: {state}");
    let _ = p.cmd("scancel", &[&id.to_string()]); // a requeued job must not start again on the same path
    repair(p);
    // ReturnToService=2 may have returned the node already; resume it otherwise.
    let _ = p.cmd("scontrol", &["update", "nodename=a10-1", "state=resume"]);
    let t = Instant::now();
    while !dirs_of(id).is_empty() && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(dirs_of(id).is_empty(), "job {id} left {:?}", dirs_of(id));
}

/// (14.6) The profile DB corrupted, then deleted, while slurmctld runs: one
/// clear log line naming the file each time, and DL jobs are still placed
/// from datasheet estimates.
#[test]
fn a_corrupt_or_deleted_profile_db_falls_back_to_datasheets() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let good = common::read(&p.cluster.layout.cellsched_toml());
    let db = p.spec.dir.join("profiles-e2e.csv");
    let with_db = |tag: &str| format!("# {tag}\n{}", good.replace("/nonexistent/cellsched-e2e/profiles.csv", &db.display().to_string()));
    for (tag, corrupt) in [("corrupt", true), ("deleted", false)] {
        if corrupt {
            std::fs::write(&db, "model,batch\ngpt2,abc\n").unwrap();
        } else {
            let _ = std::fs::remove_file(&db);
        }
        let before = p.ctld_log().len();
        let _restore = p.replace_toml(&with_db(tag));
        let db_s = db.display().to_string();
        let t = Instant::now();
        let line = loop {
            let log = p.ctld_log();
            if let Some(l) = log[before.min(log.len())..].lines().find(|l| l.contains("job_submit/cellsched") && l.contains("profile_db") && l.contains(&db_s)) {
                break l.to_string();
            }
            assert!(t.elapsed() < WAIT, "no log line about the {tag} profile DB {db_s}");
            std::thread::sleep(Duration::from_millis(300));
        };
        assert!(line.contains("analytical estimates"), "{line}");
        let id = p.submit(&["--begin=now+3600", "--dl-model", MODEL, "--dl-batch", "32", "--wrap", "true"]).expect("submit");
        let d = decision_of(&p.admin_comment(id));
        assert_eq!(d.source.to_string(), "datasheet", "{tag}: {d:?}");
        p.cancel(&[id]);
    }
}

/// (Issue 33 item 2) An elastic job's restart cost comes from the site's
/// profiles: with a profile DB row that measured the model's start to its
/// first iteration (`first_iter_s`), an elastic job's AdminComment carries
/// it as `restart_s=`; a job without `--dl-elastic` gets none.
#[test]
fn an_elastic_jobs_record_carries_its_models_measured_start() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let good = common::read(&p.cluster.layout.cellsched_toml());
    let db = p.spec.dir.join("profiles-first-iter.csv");
    let mut rows = String::from("model,batch,gpu_type,nodes,gpus_per_node,iter_time_s,plan,peak_mem_gib,first_iter_s\n");
    for t in ["a100", "v100", "a10"] {
        rows.push_str(&format!("{MODEL},32,{t},1,1,0.5,unknown,,42.5\n"));
    }
    std::fs::write(&db, rows).unwrap();
    let _restore = p.replace_toml(&format!("# first_iter_s\n{}", good.replace("/nonexistent/cellsched-e2e/profiles.csv", &db.display().to_string())));
    let t = Instant::now();
    let elastic = loop {
        let id = p.submit(&["--begin=now+3600", "--dl-elastic", "--dl-model", MODEL, "--dl-batch", "32", "--wrap", "true"]).expect("submit");
        let ac = p.admin_comment(id);
        p.cancel(&[id]);
        if ac.contains("restart_s=") {
            break ac;
        }
        assert!(t.elapsed() < WAIT, "the profile DB was not used within {WAIT:?}: {ac}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let rec = cellsched_core::record::DlRecord::parse(&elastic).expect("record");
    assert_eq!(rec.restart_s, Some(42.5), "{elastic}");
    let id = p.submit(&["--begin=now+3600", "--dl-model", MODEL, "--dl-batch", "32", "--wrap", "true"]).expect("submit");
    let plain = p.admin_comment(id);
    p.cancel(&[id]);
    assert!(plain.contains("cellsched:") && !plain.contains("restart_s="), "{plain}");
}

/// (14.6) 50 `scontrol reconfigure` in a row under a 1,000-job queue (half
/// DL): slurmctld keeps answering, keeps every job, and its RSS is printed
/// before and after (a gross leak fails the test).
#[test]
fn fifty_reconfigures_under_a_thousand_jobs() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let name = common::unique_name("reconf");
    for i in 0..1000 {
        let r = if i % 2 == 0 {
            p.submit(&["-J", &name, "--hold", "-o", "/dev/null", "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "100", "--wrap", "true"])
        } else {
            p.submit(&["-J", &name, "--hold", "-o", "/dev/null", "--wrap", "true"])
        };
        r.unwrap_or_else(|e| panic!("submit {i}: {e}"));
    }
    let rss = || -> u64 {
        let pid = daemon_pid(p, "slurmctld");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
    };
    let before = rss();
    let t = Instant::now();
    for _ in 0..50 {
        p.ok("scontrol", &["reconfigure"]);
    }
    let took = t.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let after = rss();
    eprintln!("slurmctld RSS with 1000 queued jobs: {before} kB before, {after} kB after 50 reconfigures ({:.1} s)", took.as_secs_f64());
    assert!(p.ok("scontrol", &["ping"]).contains("UP"));
    let n = p.ok("squeue", &["-h", "-n", &name, "-o", "%i"]).lines().count();
    assert_eq!(n, 1000, "jobs lost across reconfigures");
    assert!(after < before + before / 2 + 20_000, "slurmctld RSS grew from {before} kB to {after} kB over 50 reconfigures");
}

/// (18.3) A forged `--comment` changes nothing in a DL job's priority or
/// decision: two identical DL jobs, one with a Comment claiming one
/// iteration and a fast decision, get the same site factor and Cell.
#[test]
fn a_forged_comment_changes_nothing_in_priority_or_placement() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push(p.block(&n, &t, g));
    }
    let forged = "--comment=iters=1 time_scale=0.000001 model=gpt__125M batch=1 cellsched: cell=a10x1x1 nodes=1 dp=1 tp=1 pp=1 mb=1 zero=0 ckpt=0 iter_s=0.000001 src=measured";
    let (hn, fnm) = (common::unique_name("honest"), common::unique_name("forged"));
    let honest = p.submit(&dl_args(&hn, "100000", "true")).expect("submit honest");
    let forger = p.submit(&[&[forged][..], &dl_args(&fnm, "100000", "true")[..]].concat()).expect("submit forged");
    let (dh, df) = (decision_of(&p.admin_comment(honest)), decision_of(&p.admin_comment(forger)));
    assert_eq!(df.cell, dh.cell, "the Comment moved the job");
    assert!(!p.admin_comment(forger).contains("time_scale"), "{}", p.admin_comment(forger));
    let t = Instant::now();
    let (sh, sf) = loop {
        if let (Some(a), Some(b)) = (p.sprio(honest), p.sprio(forger)) {
            break (a, b);
        }
        assert!(t.elapsed() < WAIT, "sprio does not list jobs {honest} {forger}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(sf.1 <= sh.1, "the forged Comment raised the site factor: forged {sf:?}, honest {sh:?}");
    p.cancel(&[honest, forger]);
    p.cancel(&blockers);
}

/// Submits `sbatch --parsable -o /dev/null ARGS` as `user` on the private cluster; the job id.
fn sbatch_as(p: &Private, user: &str, args: &[&str]) -> u32 {
    let conf = p.cluster.layout.slurm_conf();
    let mut full = vec!["--parsable", "-o", "/dev/null"];
    full.extend_from_slice(args);
    let o = common::run_as(user, &p.spec.slurm_bin, &conf, "sbatch", &full);
    assert!(o.status.success(), "sbatch as {user}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().split(';').next().unwrap().parse().unwrap()
}

/// (13) Lying does not pay: a job declaring 1 iteration gets a time limit
/// from that declaration; once it runs past it (times the slack) its user
/// is distrusted, and that user's next one-iteration declaration no longer
/// outranks the same declaration from another user.
#[test]
fn a_job_overrunning_its_declared_work_is_bounded_and_its_user_distrusted() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let (liar, honest) = ("cs-e2e-bob", "cs-e2e-alice");
    let liar_uid = common::test_user(liar);
    common::test_user(honest);
    let submit_as = |user: &str, args: &[&str]| sbatch_as(p, user, args);
    let one_iter = ["--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "1"];
    let lie = submit_as(liar, &[&one_iter[..], &["--wrap", "sleep 600"]].concat());
    p.wait_state(lie, &["RUNNING"]);
    let comment = p.admin_comment(lie);
    let d = decision_of(&comment);
    let bound = cellsched_core::declared::time_bound_min(1, d.iter_s, &cellsched_core::declared::DeclaredConfig::default()).unwrap();
    assert!(comment.contains(&format!("limit_min={bound}")), "{comment}");
    let limit = p.job(lie)["TimeLimit"].clone();
    assert_eq!(limit, format!("{:02}:{:02}:00", bound / 60, bound % 60), "the declaration bounds the time limit");
    // The ranking thread sees it run past 1 iteration x slack and distrusts the user.
    let line = format!("of uid {liar_uid} ran");
    let t = Instant::now();
    while !p.ctld_log().contains(&line) && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(p.ctld_log().contains(&line), "no overrun logged for uid {liar_uid}");
    p.cancel(&[lie]);
    // Distrust survives a slurmctld restart: site_factor keeps it in StateSaveLocation.
    let kept = p.cluster.layout.state().join(cellsched_core::declared::Overruns::FILE_NAME);
    let kept_text = common::read(&kept);
    assert!(kept_text.lines().any(|l| l.starts_with(&format!("{liar_uid} "))), "{} lacks uid {liar_uid}:\n{kept_text}", kept.display());
    kill_daemon(p, "slurmctld", libc::SIGTERM);
    Cluster::up(&p.spec).unwrap_or_else(|e| panic!("slurmctld restart: {e}"));
    let log = p.ctld_log_current();
    assert!(log.contains("user(s) with overruns of declared work remembered"), "the restarted slurmctld did not read {}", kept.display());
    assert!(!log.contains(&line), "the restarted slurmctld saw the overrun again instead of remembering it");
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push(p.block(&n, &t, g));
    }
    let again = submit_as(liar, &[&one_iter[..], &["--wrap", "true"]].concat());
    let fair = submit_as(honest, &[&one_iter[..], &["--wrap", "true"]].concat());
    let t = Instant::now();
    let (l, h) = loop {
        if let (Some(l), Some(h)) = (p.sprio(again), p.sprio(fair)) {
            break (l, h);
        }
        assert!(t.elapsed() < WAIT, "sprio does not list jobs {again} {fair}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(h.1 > l.1, "the distrusted user's 1-iteration claim must rank below the other's: distrusted {l:?}, trusted {h:?}");
    p.cancel(&[again, fair]);
    p.cancel(&blockers);
}

/// The Cell `place()` (core) gives a `model`/`batch` job with no GPU request
/// on the private cluster with every GPU free, under `cfg`.
fn placed_on_idle(p: &Private, model: &str, batch: u32, cfg: &cellsched_core::config::PlacementConfig) -> Estimate {
    use cellsched_core::placement::{self, NodeGpus, Outcome, SubmitRequest};
    let nodes: Vec<NodeGpus> =
        p.nodes().into_iter().map(|(node, gpu_type, total)| NodeGpus { node, gpu_type, total, free: total }).collect();
    let req = SubmitRequest { env: vec![format!("CELLSCHED_DL_MODEL={model}"), format!("CELLSCHED_DL_BATCH={batch}")], ..Default::default() };
    match placement::place(&req, &nodes, cfg, &estimator()) {
        Outcome::Place(pl) => pl.estimate,
        other => panic!("{model} batch {batch} not placed: {other:?}"),
    }
}

/// (Issue 13) A 350M job with no GPU request gets the Cell the
/// marginal-value rule picks (core's `place()`): at a large batch (the
/// smallest of 256, 1024, 2048 and 4096 where they differ: with cross-node
/// all-reduce through each node's NIC, one node's GPUs are the fastest Cell
/// at the smaller batches), fewer GPUs than the cluster's fastest Cell; at
/// batch 8, not the whole partition. A 20-task batch-8 array runs tasks
/// side by side, each on such a Cell, and all complete.
#[test]
fn small_jobs_and_arrays_get_the_cells_that_pay() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    p.reset();
    let _sizing = p.replace_toml(&sizing_toml(&p.spec.dir));
    let cfg = cellsched_core::config::PlacementConfig { replan_interval_s: 2, replan_max_slowdown: 10.0, ..Default::default() };
    let model = SHORT_MODEL;
    // Where the rule and the fastest Cell differ: the rule's Cell.
    let differ = [256u32, 1024, 2048, 4096].into_iter().find_map(|b| {
        let rule = placed_on_idle(p, model, b, &cfg);
        let spec = JobSpec { model: ModelCatalog::builtin().resolve(model).unwrap(), global_batch: b };
        let fastest = estimator().rank_cells(&spec, &p.offers(&[]), cfg.max_gpus).into_iter().next().unwrap();
        (rule.cell.gpus < fastest.cell.gpus).then_some((b, rule))
    });
    let (big, want_big) = differ.expect("precondition: at some large batch the rule picks fewer GPUs than the fastest Cell");
    let big_s = big.to_string();
    let want = placed_on_idle(p, model, 8, &cfg);
    let partition: u32 = p.nodes().iter().filter(|(_, ty, _)| *ty == want.cell.gpu_type).map(|(_, _, g)| g).sum();
    assert!(want.cell.gpus < partition, "precondition: batch 8 is sized below the whole {} partition ({} GPUs): {}", want.cell.gpu_type, partition, want.cell);

    // One job each, held so it stays pending: its decision is the rule's Cell.
    for (batch, want) in [(big_s.as_str(), &want_big), ("8", &want)] {
        let name = common::unique_name("small");
        let id = p.submit(&["-J", &name, "-H", "--dl-model", model, "--dl-batch", batch, "--wrap", "true"]).expect("submit small DL job");
        let d = decision_of(&p.admin_comment(id));
        assert_eq!((d.cell.clone(), d.nodes), (want.cell.clone(), want.nodes), "batch {batch}: expected {} on {} node(s)", want.cell, want.nodes);
        p.cancel(&[id]);
    }

    // A 20-task array: one decision for the array (job_submit sees it once), tasks side by side.
    let name = common::unique_name("array");
    let out = p.jobs_dir.join(format!("{name}-%a.out"));
    let out_s = out.to_string_lossy().into_owned();
    let arr = p
        .submit(&["-J", &name, "--array=1-20", "--dl-model", model, "--dl-batch", "8", "--dl-iters", "100", "-o", &out_s, "--wrap", "sleep 3"])
        .expect("submit the array");
    assert_eq!(decision_of(&p.admin_comment(arr)).cell.gpus, want.cell.gpus);
    let (t, mut most) = (Instant::now(), 0usize);
    loop {
        let running = p.ok("squeue", &["-h", "-j", &arr.to_string(), "-t", "RUNNING", "-o", "%i"]);
        most = most.max(running.lines().filter(|l| !l.trim().is_empty()).count());
        if p.ok("squeue", &["-h", "-j", &arr.to_string(), "-o", "%i"]).trim().is_empty() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(240), "array {arr} still queued after 240 s");
        std::thread::sleep(Duration::from_millis(300));
    }
    let capacity: u32 = p.nodes().iter().filter(|(_, ty, _)| *ty == want.cell.gpu_type).map(|(_, _, g)| g).sum();
    assert!(most >= 2 && most as u32 >= capacity / want.cell.gpus.max(1), "at most {most} tasks ran at once on {capacity} {} GPUs", want.cell.gpu_type);
    // squeue forgets a task before slurmdbd records its end: wait for sacct to catch up.
    let t = Instant::now();
    let rows = loop {
        let rows = p.ok("sacct", &["-X", "-n", "-P", "-j", &arr.to_string(), "-o", "JobID,State,AllocTRES"]);
        let tasks = rows.lines().filter(|l| l.contains('_'));
        let ended = tasks.clone().filter(|l| l.split('|').nth(1).is_some_and(|s| common::TERMINAL_STATES.iter().any(|t| s.starts_with(t)))).count();
        if (tasks.count(), ended) == (20, 20) || t.elapsed() > Duration::from_secs(30) {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let tasks: Vec<&str> = rows.lines().filter(|l| l.contains('_')).collect();
    assert_eq!(tasks.len(), 20, "{rows}");
    for row in tasks {
        assert!(row.contains("COMPLETED"), "{row}");
        let gpus: u32 = row.split(',').find_map(|t| t.strip_prefix("gres/gpu=")).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(gpus >= 1 && gpus <= cfg.max_gpu_factor as u32, "a task got {gpus} GPUs: {row}");
    }
}

/// (Issue 13) `--dl-deadline` no Cell can meet: warned at submit (default
/// `deadline_policy = "warn"`) with the job accepted best effort and no
/// deadline in AdminComment, refused with `"strict"`; a reachable deadline
/// says nothing and is recorded.
#[test]
fn deadlines_too_close_are_warned_about_or_refused() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let sbatch = |extra: &[&str]| {
        let name = common::unique_name("deadline");
        let mut args = vec!["--parsable", "-H", "-J", name.as_str(), "--dl-model", SMALL_MODEL, "--dl-batch", "8"];
        args.extend_from_slice(extra);
        args.extend(["--wrap", "true"]);
        let o = p.cmd("sbatch", &args);
        (o.status.success(), String::from_utf8_lossy(&o.stdout).trim().to_string(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    // A billion iterations due in a minute: no Cell can, even alone; accepted
    // best effort, the deadline dropped (issue 31 item 3: it buys no urgency).
    let (ok, out, err) = sbatch(&["--dl-iters", "1000000000", "--dl-deadline", "now+60"]);
    assert!(ok, "warn policy must accept: {err}");
    assert!(err.contains("--dl-deadline") && err.contains("fastest Cell") && err.contains("best effort"), "{err}");
    let id: u32 = out.split(';').next().unwrap().parse().unwrap();
    let record = cellsched_core::record::DlRecord::parse(&p.admin_comment(id)).expect("a record");
    assert_eq!(record.deadline, None, "an infeasible deadline is not recorded");
    // A reachable deadline is recorded.
    let (ok, out3, err) = sbatch(&["--dl-iters", "10", "--dl-deadline", "now+600"]);
    assert!(ok, "{err}");
    let id3: u32 = out3.split(';').next().unwrap().parse().unwrap();
    let recorded = cellsched_core::record::DlRecord::parse(&p.admin_comment(id3)).and_then(|r| r.deadline).expect("deadline= in AdminComment");
    assert!((before + 600..=before + 600 + 30).contains(&recorded), "deadline {recorded} vs submit {before}");
    p.cancel(&[id3]);
    // Ten iterations in a day: nothing to say.
    let (ok, out2, err) = sbatch(&["--dl-iters", "10", "--dl-deadline", "now+1d"]);
    assert!(ok && !err.contains("warning"), "{err}");
    let id2: u32 = out2.split(';').next().unwrap().parse().unwrap();
    p.cancel(&[id, id2]);
    // Strict: refused, and no job is created.
    let strict = format!("{}deadline_policy = \"strict\"\n", private_toml(&p.spec.dir));
    let _t = p.replace_toml(&strict);
    let (ok, _, err) = sbatch(&["--dl-iters", "1000000000", "--dl-deadline", "now+60"]);
    assert!(!ok && err.contains("strict") && err.contains("--dl-deadline"), "strict policy must refuse: {err}");
    let (ok, _, err) = sbatch(&["--dl-deadline", "now+1h"]);
    assert!(!ok && err.contains("--dl-iters"), "strict needs declared work: {err}");
    // A malformed deadline is refused at submit whatever the policy.
    let (ok, _, err) = sbatch(&["--dl-deadline", "soonish"]);
    assert!(!ok && err.contains("--dl-deadline"), "{err}");
}

/// (Issue 31 item 4) A job array whose tasks fit on two GPU types, with one
/// node of each type free: its request names both types (`[a100|v100]`,
/// `types=` in AdminComment), its tasks run on both nodes at the same time,
/// and while a task waits neither node has room left for it. Each task gets
/// the plan made for the GPUs it was granted.
#[test]
fn an_arrays_tasks_start_in_parallel_on_every_free_type_that_serves_them() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    p.reset();
    let nodes = p.nodes();
    let first = |ty: &str| nodes.iter().find(|(_, t, g)| t == ty && *g >= 4).map(|(n, _, g)| (n.clone(), *g));
    let (Some((a_node, a_gpus)), Some((v_node, v_gpus))) = (first("a100"), first("v100")) else {
        eprintln!("skipped: the placement cluster has no a100 and v100 nodes of at least 4 GPUs");
        return;
    };
    // Every other node busy: one node of each type is free.
    let blockers: Vec<u32> = nodes.iter().filter(|(n, _, _)| *n != a_node && *n != v_node).map(|(n, t, g)| p.block(n, t, *g)).collect();
    let per_task = 4u32;
    let (a_slots, v_slots) = (a_gpus / per_task, v_gpus / per_task);
    let tasks = a_slots + v_slots + 1; // one more than fits at once: it waits
    let name = common::unique_name("array-types");
    let out = p.jobs_dir.join(format!("{name}-%a.out"));
    let out_s = out.to_string_lossy().into_owned();
    let range = format!("--array=0-{}", tasks - 1);
    let script = "echo \"NODE=$SLURMD_NODENAME TYPE=$CELLSCHED_GPU_TYPE CELL=$CELLSCHED_CELL SRC=$CELLSCHED_PLAN_SOURCE ERR=$CELLSCHED_ERROR\"; sleep 25";
    let arr = p
        .submit(&["-J", &name, &range, "--gres=gpu:4", "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "100", "-o", &out_s, "--wrap", script])
        .expect("submit the array");
    let record = cellsched_core::record::DlRecord::parse(&p.admin_comment(arr)).expect("the array's record");
    assert!(record.types.iter().any(|t| t == "a100") && record.types.iter().any(|t| t == "v100"), "the array may run on a100 and v100: {record}");
    let features = p.job(arr)["Features"].clone();
    assert!(features.starts_with('[') && features.contains("a100") && features.contains("v100"), "Features={features}");
    // Running tasks per node (`squeue -r`: one line per task).
    let running = || -> HashMap<String, u32> {
        let mut m = HashMap::new();
        for l in p.ok("squeue", &["-h", "-r", "-j", &arr.to_string(), "-t", "RUNNING", "-o", "%N"]).lines().filter(|l| !l.trim().is_empty()) {
            *m.entry(l.trim().to_string()).or_insert(0) += 1;
        }
        m
    };
    let pending = || p.ok("squeue", &["-h", "-r", "-j", &arr.to_string(), "-t", "PENDING", "-o", "%i"]).lines().filter(|l| !l.trim().is_empty()).count();
    let t = Instant::now();
    loop {
        let r = running();
        if r.get(&a_node).copied().unwrap_or(0) >= a_slots && r.get(&v_node).copied().unwrap_or(0) >= v_slots {
            break;
        }
        assert!(t.elapsed() < WAIT, "array {arr}: tasks never filled both free nodes ({a_node}, {v_node}); running per node {r:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // While a task waits, neither free node has room for it.
    for _ in 0..5 {
        let (r, waiting) = (running(), pending());
        if waiting == 0 {
            break;
        }
        assert!(
            r.get(&a_node).copied().unwrap_or(0) * per_task + per_task > a_gpus && r.get(&v_node).copied().unwrap_or(0) * per_task + per_task > v_gpus,
            "{waiting} task(s) wait while a node has room: {r:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // Every task ran with the plan made for its own GPUs.
    let t = Instant::now();
    while !p.ok("squeue", &["-h", "-j", &arr.to_string(), "-o", "%i"]).trim().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(240), "array {arr} still queued after 240 s");
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut seen_types = std::collections::BTreeSet::new();
    for i in 0..tasks {
        let path = p.jobs_dir.join(format!("{name}-{i}.out"));
        let text = common::read(&path);
        let line = text.lines().find(|l| l.starts_with("NODE=")).unwrap_or_else(|| panic!("task {i}: no report in {text:?}"));
        let kv = common::parse_key_values(line);
        let ty = if kv["NODE"] == a_node { "a100" } else { "v100" };
        assert_eq!(kv.get("TYPE").map(String::as_str), Some(ty), "task {i}: {line}");
        assert_eq!(kv.get("CELL").map(String::as_str), Some(format!("{ty}x4x1").as_str()), "task {i}: {line}");
        assert!(kv.get("ERR").map_or(true, |e| e.is_empty()), "task {i} on one of its array's types: no error expected: {line}");
        seen_types.insert(ty);
        let _ = std::fs::remove_file(path);
    }
    assert_eq!(seen_types.len(), 2, "tasks ran on both types");
    p.cancel(&blockers);
}

/// Probe round 3 (issue 31): slurmctld calls job_modify before it checks
/// the rest of an update, so `Features=OTHER Licenses=bogus:1` was refused
/// after job_modify had re-planned the record onto OTHER: the job stayed on
/// its type, ranked and limited as the other (a faster type ranks better).
/// Re-planning's pass brings request and record back together: the record
/// follows the request, and the slurmctld log says so.
#[test]
fn an_update_refused_after_job_modify_leaves_record_and_request_together() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    p.reset();
    const USER: &str = "cs-e2e-bob";
    common::test_user(USER);
    let as_user = |prog: &str, args: &[&str]| common::run_as(USER, &p.spec.slurm_bin, &p.cluster.layout.slurm_conf(), prog, args);
    let o = as_user("sbatch", &["--parsable", "-H", "-o", "/dev/null", "--gres=gpu:4", "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "100", "--wrap", "true"]);
    assert!(o.status.success(), "sbatch: {}", String::from_utf8_lossy(&o.stderr));
    let id: u32 = String::from_utf8_lossy(&o.stdout).trim().split(';').next().unwrap().parse().unwrap();
    let record = || cellsched_core::record::DlRecord::parse(&p.admin_comment(id)).expect("a record");
    let before = record();
    let per_node = before.decision.cell.gpus / before.decision.nodes.max(1);
    let Some(other) = p.nodes().into_iter().find(|(_, t, g)| *t != before.decision.cell.gpu_type && *g >= per_node).map(|(_, t, _)| t) else {
        eprintln!("skipped: no second GPU type holds {}", before.decision.cell);
        return;
    };
    let from = p.ctld_log().len();
    // An invalid license (checked before features), and the type in capitals (no node has that feature).
    for (features, extra) in [(other.clone(), Some("Licenses=bogus:1")), (other.to_uppercase(), None)] {
        let mut args = vec!["update".to_string(), format!("job={id}"), format!("Features={features}")];
        args.extend(extra.map(str::to_string));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let bad = args[2..].join(" ");
        let o = as_user("scontrol", &args);
        assert!(!o.status.success(), "the update '{bad}' was accepted");
        // Within a few re-planning passes (2 s here) the record names the type the request does.
        let t = Instant::now();
        loop {
            let (r, j) = (record(), p.job(id));
            let features = j.get("Features").cloned().unwrap_or_default();
            let gres = j.get("TresPerNode").cloned().unwrap_or_default();
            let agree = features.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == r.decision.cell.gpu_type)
                && gres.ends_with(&format!("gpu:{}", r.decision.cell.gpus / r.decision.nodes.max(1)));
            if agree {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{bad}: record {} and request Features={features} TresPerNode={gres} still apart", r.decision.cell);
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let log = p.ctld_log();
    let new = &log[from.min(log.len())..];
    assert!(new.contains(&format!("JobId={id}: request and record disagreed")), "no reconciliation line in slurmctld.log");
    p.cancel(&[id]);
}


/// Words `[privacy] admin_comment = "minimal"` keeps from other users.
const PRIVATE_WORDS: [&str; 4] = ["model=", "batch=", "iters=", "deadline="];

/// The `(priority, site factor)` of each of `ids` once sprio lists them all.
fn sprio_all(p: &Private, ids: &[u32]) -> Vec<(u64, u64)> {
    let t = Instant::now();
    loop {
        let got: Vec<Option<(u64, u64)>> = ids.iter().map(|id| p.sprio(*id)).collect();
        if got.iter().all(Option::is_some) {
            return got.into_iter().flatten().collect();
        }
        assert!(t.elapsed() < WAIT, "sprio does not list all of {ids:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits until `cond` holds for the site factors of `ids` (in that order).
fn wait_sites(p: &Private, ids: &[u32], what: &str, cond: impl Fn(&[u64]) -> bool) -> Vec<u64> {
    let t = Instant::now();
    loop {
        let sites: Vec<u64> = sprio_all(p, ids).into_iter().map(|(_, s)| s).collect();
        if cond(&sites) {
            return sites;
        }
        assert!(t.elapsed() < WAIT, "{what}: site factors of {ids:?} are {sites:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// (Issue 31, privacy) With `[privacy] admin_comment = "minimal"`, another
/// user's `scontrol show job` and `sacct -o AdminComment` show a DL job's
/// decision but not its model, batch, iterations or deadline (with the
/// default "full" they do), and the ranking still follows the declared
/// work: the short job ranks above the long one.
#[test]
fn minimal_admin_comment_hides_the_private_facts_and_ranking_still_follows_them() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let other = "cs-e2e-dave";
    common::test_user(other);
    let conf = p.cluster.layout.slurm_conf();
    let as_other = |prog: &str, args: &[&str]| {
        let o = common::run_as(other, &p.spec.slurm_bin, &conf, prog, args);
        assert!(o.status.success(), "{prog} {args:?} as {other}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let deadline = ["--dl-deadline", "now+1d"];
    // "full" (the default): every user reads the facts.
    let n0 = common::unique_name("full");
    let full = p.submit(&[&["-H"][..], &deadline, &dl_args(&n0, "1000", "true")].concat()).expect("submit");
    let seen = as_other("scontrol", &["show", "job", &full.to_string()]);
    assert!(PRIVATE_WORDS.iter().all(|w| seen.contains(w)), "premise: full records are readable by all:\n{seen}");
    p.cancel(&[full]);

    let minimal = format!("{}[privacy]\nadmin_comment = \"minimal\"\n", private_toml(&p.spec.dir));
    let _t = p.replace_toml(&minimal);
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push(p.block(&n, &t, g));
    }
    let (ln, sn) = (common::unique_name("private-long"), common::unique_name("private-short"));
    let long = p.submit(&[&deadline[..], &dl_args(&ln, "1000000", "true")].concat()).expect("submit long");
    let short = p.submit(&[&deadline[..], &dl_args(&sn, "10", "true")].concat()).expect("submit short");
    for id in [long, short] {
        let seen = as_other("scontrol", &["show", "job", "-dd", &id.to_string()]);
        let comment = common::admin_comment_of_scontrol(&seen).unwrap_or_default();
        assert!(comment.contains("cell=") && comment.contains(" private="), "the decision stays public: {comment:?}");
        for w in PRIVATE_WORDS {
            assert!(!seen.contains(w), "{other} reads {w} of job {id}:\n{seen}");
        }
        assert!(!seen.contains("CELLSCHED_PRIVATE_RECORD") && !seen.contains("1000000"), "{seen}");
        let sq = common::run_as(other, &p.spec.slurm_bin, &conf, "squeue", &["-h", "-j", &id.to_string(), "-O", "AdminComment:500"]);
        let squeue = String::from_utf8_lossy(&sq.stdout);
        assert!(PRIVATE_WORDS.iter().all(|w| !squeue.contains(w)), "{squeue}");
        // Root's AdminComment holds no more: the facts are in spank_job_env only.
        let rec = cellsched_core::record::DlRecord::parse(&p.admin_comment(id)).expect("a record");
        assert_eq!((rec.iters, rec.model.as_deref(), rec.batch, rec.deadline), (None, None, None, None));
    }
    // The ranking reads the declared iterations all the same.
    let sites = wait_sites(p, &[long, short], "short before long", |s| s[1] > s[0] && s[0] > 0);
    eprintln!("minimal records: site factors long {} short {}", sites[0], sites[1]);
    p.cancel(&[long, short]);
    // Accounting: what sacct gives another user.
    let ids = format!("{long},{short}");
    let t = Instant::now();
    let rows = loop {
        let rows = as_other("sacct", &["-a", "-X", "-n", "-P", "-j", &ids, "-o", "JobID,AdminComment"]);
        if rows.lines().filter(|l| l.contains("private=")).count() == 2 {
            break rows;
        }
        assert!(t.elapsed() < WAIT, "sacct has no records of {ids}: {rows:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    for w in PRIVATE_WORDS {
        assert!(!rows.contains(w), "sacct shows {other} {w}:\n{rows}");
    }
    p.cancel(&blockers);
}

/// (Issue 31 item 3) Deadlines as a priority lever: a 1,000,000-iteration
/// job whose deadline it can meet only by starting first ranks above an
/// honest queue while its user's deadline budget (`[deadline]
/// budget_gpu_hours`) covers it; beyond the budget, or once its user had a
/// deadline that was infeasible at submit, it ranks by its work (below the
/// honest jobs). The demotion is kept across a slurmctld restart in
/// StateSaveLocation (`cellsched-deadlines`, mode 0600).
#[test]
fn a_long_deadline_job_does_not_jump_the_queue_beyond_its_users_budget() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    // mallory plays the probe's attack; erin's small deadline jobs show each ranking pass applied deadlines.
    let (mallory, erin) = ("cs-e2e-mallory", "cs-e2e-erin");
    let mallory_uid = common::test_user(mallory);
    common::test_user(erin);
    let conf = p.cluster.layout.slurm_conf();
    let submit_as = |user: &str, args: &[&str]| sbatch_as(p, user, args);
    let cell = best(&p.offers(&[]));
    // The attack: 1,000,000 iterations due at 1.8 x their run alone (feasible; urgent from submit).
    let run_big = 1e6 * cell.iter_time_s;
    let big_gpu_hours = run_big * f64::from(cell.cell.gpus) / 3600.0;
    let run_small = 600.0;
    assert!(run_big > 4.0 * run_small, "premise: the attack job is long ({run_big} s)");
    let small_iters = (run_small / cell.iter_time_s).ceil().to_string();
    let big_due = format!("now+{}", (1.8 * run_big) as u64);
    let small_due = format!("now+{}", (1.8 * run_small) as u64);
    let dl = |iters: &str, due: Option<&str>| -> Vec<String> {
        let name = common::unique_name("deadline-rank");
        let mut a: Vec<String> = ["-J", &name, "--dl-model", MODEL, "--dl-batch", "32", "--dl-cell=auto", "--dl-iters", iters].iter().map(|s| s.to_string()).collect();
        if let Some(d) = due {
            a.extend(["--dl-deadline".to_string(), d.to_string()]);
        }
        a.extend(["--wrap".to_string(), "true".to_string()]);
        a
    };
    let submit = |user: &str, args: Vec<String>| submit_as(user, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut blockers = Vec::new();
    for (n, t, g) in p.nodes() {
        blockers.push(p.block(&n, &t, g));
    }
    let honest: Vec<u32> = (0..2).map(|_| submit(erin, dl("1000", None))).collect();
    let toml = |budget: f64| format!("{}[deadline]\nbudget_gpu_hours = {budget}\n", private_toml(&p.spec.dir));

    // 1. A budget of half the attack job's GPU-hours: it ranks by its work, below the honest jobs.
    let t1 = p.replace_toml(&toml(big_gpu_hours / 2.0));
    let big1 = submit(mallory, dl("1000000", Some(&big_due)));
    let ctl1 = submit(erin, dl(&small_iters, Some(&small_due)));
    let ids = [honest[0], honest[1], big1, ctl1];
    let s = wait_sites(p, &ids, "erin's deadline job first", |s| s[3] > s[0] && s[3] > s[1] && s[3] > s[2]);
    assert!(s[2] < s[0] && s[2] < s[1], "beyond its user's budget the deadline job must rank below the honest queue: {s:?}");
    p.cancel(&[big1, ctl1]);
    drop(t1);

    // 2. No limit (budget 0): the same attack jumps the honest queue (the probe's finding).
    let t2 = p.replace_toml(&toml(0.0));
    let big2 = submit(mallory, dl("1000000", Some(&big_due)));
    let s = wait_sites(p, &[honest[0], honest[1], big2], "the unbounded deadline job first", |s| s[2] > s[0] && s[2] > s[1]);
    eprintln!("no deadline budget: attack {} over honest {:?}", s[2], &s[..2]);

    // 3. A deadline infeasible at submit (dropped, best effort) costs mallory deadline urgency.
    let name = common::unique_name("infeasible");
    let args = ["-J", name.as_str(), "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "1000000000", "--dl-deadline", "now+60", "--wrap", "true"];
    let o = common::run_as(mallory, &p.spec.slurm_bin, &conf, "sbatch", &[&["--parsable", "-o", "/dev/null"][..], &args].concat());
    assert!(o.status.success() && String::from_utf8_lossy(&o.stderr).contains("best effort"), "{}", String::from_utf8_lossy(&o.stderr));
    let hopeless: u32 = String::from_utf8_lossy(&o.stdout).trim().split(';').next().unwrap().parse().unwrap();
    assert!(p.admin_comment(hopeless).contains("infeasible_deadline="), "{}", p.admin_comment(hopeless));
    let s = wait_sites(p, &[honest[0], honest[1], big2], "mallory demoted", |s| s[2] < s[0] && s[2] < s[1]);
    eprintln!("after an infeasible deadline: attack {} under honest {:?}", s[2], &s[..2]);
    p.cancel(&[hopeless]);
    let kept = p.cluster.layout.state().join(cellsched_core::deadline::DeadlineLedger::FILE_NAME);
    let text = common::read(&kept);
    assert!(text.lines().any(|l| l.starts_with(&format!("demoted {mallory_uid} "))), "{}:\n{text}", kept.display());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{} must be root-only, mode {mode:o}", kept.display());

    // 4. A slurmctld restart forgets nothing: once a pass ranked erin's new deadline job first, mallory's stays low.
    kill_daemon(p, "slurmctld", libc::SIGTERM);
    Cluster::up(&p.spec).unwrap_or_else(|e| panic!("slurmctld restart: {e}"));
    assert!(p.ctld_log_current().contains("deadline grants and demotions remembered"), "the restarted slurmctld did not read {}", kept.display());
    let ctl2 = submit(erin, dl(&small_iters, Some(&small_due)));
    let ids = [honest[0], honest[1], big2, ctl2];
    let s = wait_sites(p, &ids, "erin's deadline job first after the restart", |s| s[3] > s[0] && s[3] > s[1] && s[3] > s[2]);
    assert!(s[2] < s[0] && s[2] < s[1], "the demotion must survive the restart: {s:?}");
    drop(t2);
    p.cancel(&[big2, ctl2]);
    p.cancel(&honest);
    p.cancel(&blockers);
}

/// Puts `PrivateData=jobs` into the private cluster's slurm.conf until dropped.
struct PrivateDataJobs<'a>(&'a Private, String);

impl<'a> PrivateDataJobs<'a> {
    fn on(p: &'a Private) -> Self {
        let path = p.cluster.layout.slurm_conf();
        let before = common::read(&path);
        std::fs::write(&path, format!("{before}PrivateData=jobs\n")).unwrap();
        p.ok("scontrol", &["reconfigure"]);
        let t = Instant::now();
        while !p.ok("scontrol", &["show", "config"]).lines().any(|l| l.starts_with("PrivateData") && l.contains("jobs")) {
            assert!(t.elapsed() < WAIT, "PrivateData=jobs not in force");
            std::thread::sleep(Duration::from_millis(300));
        }
        PrivateDataJobs(p, before)
    }
}

impl Drop for PrivateDataJobs<'_> {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.cluster.layout.slurm_conf(), &self.1);
        let _ = self.0.cmd("scontrol", &["reconfigure"]);
    }
}

/// (Issue 31, privacy) slurm.conf's `PrivateData=jobs`: `sacct` (slurmdbd
/// has its own setting) still shows an ordinary user root's DL job with its
/// model and iterations, but `cellsched report` run by that user reports
/// only the user's own jobs and refuses `--user root`; `cellsched whatif`
/// says its forecast leaves hidden jobs out. Root's report is unchanged.
#[test]
fn report_and_whatif_follow_private_data_jobs() {
    require_e2e!();
    if !plugins_built() {
        return;
    }
    let guard = private();
    let p = guard.as_ref().unwrap();
    let user = "cs-e2e-frank";
    common::test_user(user);
    let conf = p.cluster.layout.slurm_conf();
    let bin = common::cellsched_bin();
    let as_user = |prog: &str, args: &[&str]| {
        let o = Command::new("runuser")
            .args(["-u", user, "--", "env", &format!("SLURM_CONF={}", conf.display()), &format!("PATH={}:/usr/bin:/bin", p.spec.slurm_bin.display()), prog])
            .args(args)
            .current_dir("/")
            .output()
            .expect("runuser");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let _private = PrivateDataJobs::on(p);
    let (rn, un) = (common::unique_name("root-dl"), common::unique_name("own-dl"));
    let root_job = p.submit(&dl_args(&rn, "1000", "true")).expect("root's job");
    let own = as_user("sbatch", &["--parsable", "-o", "/dev/null", "-J", &un, "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "1000", "--wrap", "true"]);
    assert!(own.0, "{}", own.2);
    let own_job: u32 = own.1.trim().split(';').next().unwrap().parse().unwrap();
    for id in [root_job, own_job] {
        p.wait_state(id, &["COMPLETED"]);
    }
    let ids = format!("{root_job},{own_job}");
    let t = Instant::now();
    while p.ok("sacct", &["-a", "-X", "-n", "-P", "-j", &ids, "-o", "AdminComment"]).lines().filter(|l| l.contains("iters=1000")).count() < 2 {
        assert!(t.elapsed() < WAIT, "sacct lacks the records of {ids}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // Premise: sacct itself shows the user root's job and its record (slurmdbd.conf sets no PrivateData).
    let (_, seen, _) = as_user("sacct", &["-a", "-X", "-n", "-P", "-j", &root_job.to_string(), "-o", "User,AdminComment"]);
    assert!(seen.contains("root|") && seen.contains("iters=1000"), "premise: sacct shows root's job to {user}: {seen:?}");
    // The user's report: root's job is not in it (the user's own job is, where
    // accounting recorded it under the user; a fresh slurmdbd may record it as root).
    let bin_s = bin.display().to_string();
    let (ok, csv, err) = as_user(&bin_s, &["report", "--csv", "-j", &ids]);
    assert!(ok || err.contains("no jobs in window"), "{err}");
    assert!(!csv.lines().any(|l| l.split(',').nth(2) == Some("root")), "{user}'s report shows root's job:\n{csv}");
    assert!(csv.lines().skip(1).all(|l| l.split(',').nth(2) == Some(user)), "{csv}");
    let (ok, _, err) = as_user(&bin_s, &["report", "--csv", "--user", "root", "-j", &ids]);
    assert!(!ok && err.contains("PrivateData=jobs") && err.contains("root"), "{err}");
    // Root still reports both.
    let all = p.slurm();
    let o = Command::new(&bin).args(["report", "--csv", "-j", &ids]).env("SLURM_CONF", &all.slurm_conf).env("PATH", format!("{}:/usr/bin:/bin", p.spec.slurm_bin.display())).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().skip(1).count(), 2, "{}", String::from_utf8_lossy(&o.stderr));
    // whatif as the user: Slurm hides root's jobs, and whatif says so.
    // (With the default configuration: this cluster's names a profile DB that does not exist.)
    let defaults = std::env::temp_dir().join(format!("cs-e2e-whatif-{}.toml", std::process::id()));
    std::fs::write(&defaults, "# defaults\n").unwrap();
    let (ok, _, err) = as_user(&bin_s, &["whatif", "--config", &defaults.display().to_string(), "--dl-model", MODEL, "--dl-batch", "32", "--dl-iters", "100"]);
    let _ = std::fs::remove_file(&defaults);
    assert!(ok && err.contains("PrivateData=jobs"), "{err}");
}

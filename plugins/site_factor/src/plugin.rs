//! Exported plugin symbols. `site_factor_p_set` (one job, at submit) and
//! `site_factor_p_update` run under slurmctld's job write lock: the first
//! parses that one job's strings; the second only copies the site factors a
//! background thread ranked from a snapshot taken under the read locks
//! ([`crate::job_ranker`]). The config file is read at `init`
//! and, on reconfigure, by a short background thread; the job history is
//! loaded and the iteration predictor fitted by a background thread started
//! at `init` and on reconfigure (no file I/O under the lock).
//!
//! Deadline urgency follows `cellsched_core::deadline::DeadlineLedger`
//! (per-user budget, demotion after infeasible or badly missed deadlines),
//! applied by the ranking thread and kept in StateSaveLocation
//! (`cellsched-deadlines`, mode 0600) so a restart resets no budget.
//!
//! After a config error the last good configuration stays in force for
//! every job (one consistent order; the error is logged); with no good
//! configuration yet, or `ordering.enabled = false`, site factors are stock,
//! and pending DL jobs ranked earlier get the stock factor back at the next update.
use cellsched_core::ordering::{self, JobFields, OrderingData};
use cellsched_core::ordering::Predictions;
use crate::job_ranker::{Distrust, JobRanker, Running, Snap, Stamp};
use cellsched_core::snapshot_cache;
use cellsched_core::declared::{DeclaredConfig, OverrunPolicy, Overruns};
use cellsched_core::deadline::{DeadlineConfig, DeadlineLedger};
use cellsched_core::asrpt::PendingJob;
use cellsched_core::record;
use cellsched_core::config::{Config, OrderingConfig};
use cellsched_core::job_env;
use cellsched_core::model::ModelCatalog;
use cellsched_slurm_ffi::ctld::{self, Job, LockKind};
use cellsched_slurm_ffi::host::Periodic;
use cellsched_slurm_ffi::{guard, log, version};
use slurm_sys::shim::cellsched_job_t;
use std::ffi::c_int;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

cellsched_slurm_ffi::plugin_identity!(name: "cellsched A-SRPT site factor", kind: "site_factor/cellsched");

/// The ordering settings in force; `None` = stock behaviour (no good config yet, or ordering disabled).
static ORDERING: RwLock<Option<Arc<OrderingConfig>>> = RwLock::new(None);
/// `[slurmctld] release_gres_select` of the configuration in force.
static RELEASE_GRES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set when ordering was switched off: the next update puts the stock factor back on pending DL jobs.
static RESET_TO_STOCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The iteration predictor fitted on the history; `None` until loaded or without history.
static PREDICTIONS: RwLock<Option<Arc<Predictions>>> = RwLock::new(None);
/// The built-in model catalog (names and layer counts), parsed at `init`.
static MODELS: OnceLock<ModelCatalog> = OnceLock::new();
/// Parses of the pending DL jobs, kept between ranking passes (ranking thread only).
static RANKER: Mutex<Option<JobRanker>> = Mutex::new(None);
/// The last ranking's site factors by job id: all `site_factor_p_update` reads.
static FACTORS: RwLock<Option<Arc<std::collections::HashMap<u32, u32>>>> = RwLock::new(None);
/// What happens to jobs that overrun their declared work (`[declared]`).
static DECLARED: RwLock<Option<Arc<DeclaredConfig>>> = RwLock::new(None);
/// Each user's last overrun of declared work, and where it is kept across restarts.
static OVERRUNS: Mutex<OverrunState> = Mutex::new(OverrunState { log: None, file: None, written_at: 0.0, dirty: false });
/// `[deadline]`: each user's deadline urgency budget and demotion.
static DEADLINE_CFG: RwLock<Option<Arc<DeadlineConfig>>> = RwLock::new(None);
/// The deadline ledger (ranking thread; loaded at init) and its file.
static DEADLINES: Mutex<DeadlineState> = Mutex::new(DeadlineState { ledger: None, file: None, written: String::new() });
/// Set by reloads: the next ranking pass parses every job again.
static INVALIDATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// A background thread's stop flag (set, then notified) and its handle.
/// The ranking thread.
static RANK_THREAD: Mutex<Option<Periodic>> = Mutex::new(None);
/// The background (re)load thread: config on reconfigure, history fit.
static RELOAD: Mutex<Reload> = Mutex::new(Reload { handle: None, running: false, again: false });

/// The overrun log and its file (`StateSaveLocation/cellsched-overruns`).
struct OverrunState {
    log: Option<Overruns>,
    file: Option<PathBuf>,
    /// When the file was last written (Unix seconds).
    written_at: f64,
    /// The log changed since the file was written.
    dirty: bool,
}

/// The deadline ledger and its file (`StateSaveLocation/cellsched-deadlines`).
struct DeadlineState {
    ledger: Option<DeadlineLedger>,
    file: Option<PathBuf>,
    /// The text last written (the file is rewritten only when it changes).
    written: String,
}

/// How often, at most, the overrun file is rewritten only because a
/// still-running job overran again (a new distrusted user writes at once).
const OVERRUN_WRITE_EVERY_S: f64 = 300.0;

/// State of the reload thread; a reconfigure while it runs makes it run once more.
struct Reload {
    handle: Option<JoinHandle<()>>,
    running: bool,
    again: bool,
}

fn info(msg: &str) {
    log::info(&format!("site_factor/cellsched: {msg}"));
}

fn error(msg: &str) {
    log::error(&format!("site_factor/cellsched: {msg}"));
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Reads the config file (outside slurmctld's locks) and installs it;
/// returns the history file to fit the predictor on (`Some(None)`: none),
/// or `None` after a config error (the last good state stays, predictor included).
fn load_config() -> Option<Option<PathBuf>> {
    let path = cellsched_slurm_ffi::host::config_path();
    let (new, history) = match Config::load(&path) {
        Ok(c) if c.ordering.enabled => {
            info(&format!(
                "loaded {}: A-SRPT ordering on (rank by {:?}, aging after {} s and {} x remaining time, aged lane {}, deadline slack factor {}, max site factor {})",
                path.display(),
                c.ordering.rank_by,
                c.ordering.aging_bound_s,
                c.ordering.aging_factor,
                c.ordering.aged_lane,
                c.ordering.deadline_slack_factor,
                c.ordering.site_factor_max
            ));
            *DECLARED.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(c.declared.clone()));
            *DEADLINE_CFG.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(c.deadline.clone()));
            RELEASE_GRES.store(c.slurmctld.release_gres_select, std::sync::atomic::Ordering::Relaxed);
            (Some(Arc::new(c.ordering)), c.estimator.history)
        }
        Ok(_) => {
            info(&format!("{}: ordering.enabled = false; site factors are stock", path.display()));
            (None, None)
        }
        Err(e) => {
            let last = current();
            error(&format!(
                "config error: {e}; {} until it is fixed and slurmctld reconfigured",
                if last.is_some() { "the last good ordering configuration stays in force" } else { "site factors are stock" }
            ));
            // Keep the predictor of the last good configuration too: return no new history.
            return None;
        }
    };
    let mut w = ORDERING.write().unwrap_or_else(|e| e.into_inner());
    if w.is_some() && new.is_none() {
        RESET_TO_STOCK.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    *w = new;
    drop(w);
    invalidate_ranking();
    Some(history)
}

/// Loads the job history and fits the iteration predictor (background
/// thread only: file I/O, NSS lookups and the fit take time), then installs it.
fn load_predictions(history: Option<Option<PathBuf>>) {
    let Some(history) = history else { return };
    let new = history.and_then(|path| {
        let t = Instant::now();
        match Predictions::load(&path, crate::users::uid_of) {
            Ok(p) if p.is_trained() => {
                info(&format!(
                    "fitted the iteration predictor on {} jobs of {} in {:.1} s; jobs without --dl-iters use its predictions",
                    p.n_train(),
                    path.display(),
                    t.elapsed().as_secs_f64()
                ));
                Some(Arc::new(p))
            }
            Ok(p) => {
                info(&format!(
                    "{}: {} jobs are too few to fit the iteration predictor; jobs without --dl-iters use their time limit",
                    path.display(),
                    p.n_train()
                ));
                None
            }
            Err(e) => {
                error(&format!("estimator.history: {e}; jobs without --dl-iters use their time limit"));
                None
            }
        }
    });
    *PREDICTIONS.write().unwrap_or_else(|e| e.into_inner()) = new;
    invalidate_ranking();
}

/// Every job is parsed again at the next ranking pass (config or predictor
/// changed). Only sets a flag: the ranking thread may hold its state while
/// it waits for slurmctld's locks.
fn invalidate_ranking() {
    INVALIDATE.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn declared_cfg() -> Arc<DeclaredConfig> {
    DECLARED.read().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default()
}

/// Users who overran declared work within `distrust_s`, and the policy for them.
fn distrust_now(cfg: &DeclaredConfig, now: f64) -> Distrust {
    let users = OVERRUNS.lock().unwrap_or_else(|e| e.into_inner()).log.as_ref().map(|m| m.distrusted(now, cfg)).unwrap_or_default();
    Distrust { users, demote: cfg.policy == OverrunPolicy::Demote }
}

/// Reads the overrun log a previous slurmctld left in StateSaveLocation
/// (slurmctld start, before the ranking thread): a restart forgives no one.
fn load_overruns() {
    let Some(dir) = cellsched_slurm_ffi::running_conf::state_save_location() else {
        info("no StateSaveLocation: distrust of users who overran declared work is kept in memory only");
        return;
    };
    let file = PathBuf::from(dir).join(Overruns::FILE_NAME);
    let log = match std::fs::read_to_string(&file) {
        Ok(text) => match Overruns::parse(&text, &file.display().to_string()) {
            Ok(o) => {
                if !o.is_empty() {
                    info(&format!("{}: {} user(s) with overruns of declared work remembered", file.display(), o.len()));
                }
                o
            }
            Err(e) => {
                error(&format!("{e}; starting with no remembered overruns (the file is rewritten at the next overrun)"));
                Overruns::default()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Overruns::default(),
        Err(e) => {
            error(&format!("cannot read {}: {e}; starting with no remembered overruns", file.display()));
            Overruns::default()
        }
    };
    let mut g = OVERRUNS.lock().unwrap_or_else(|e| e.into_inner());
    g.log = Some(log);
    g.file = Some(file);
}

/// Writes the overrun log (ranking thread, no slurmctld lock held): to a
/// temporary file renamed over the old one, so a crash leaves either.
fn write_overruns(file: &std::path::Path, text: &str) {
    if let Err(e) = write_state_file(file, text) {
        error(&format!("cannot write {}: {e}; distrust would not survive a restart", file.display()));
    }
}

/// Writes a state file readable by root (and the SlurmUser) only: a
/// temporary file of mode 0600 renamed over the old one, so a crash leaves either.
fn write_state_file(file: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = file.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, file)
}

fn deadline_cfg() -> Arc<DeadlineConfig> {
    DEADLINE_CFG.read().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default()
}

/// Reads the deadline ledger a previous slurmctld left in StateSaveLocation
/// (slurmctld start, before the ranking thread): a restart resets no budget
/// and forgives no demotion.
fn load_deadlines() {
    let Some(dir) = cellsched_slurm_ffi::running_conf::state_save_location() else {
        info("no StateSaveLocation: deadline budgets and demotions are kept in memory only");
        *DEADLINES.lock().unwrap_or_else(|e| e.into_inner()) = DeadlineState { ledger: Some(DeadlineLedger::default()), file: None, written: String::new() };
        return;
    };
    let file = PathBuf::from(dir).join(DeadlineLedger::FILE_NAME);
    let (ledger, written) = match std::fs::read_to_string(&file) {
        Ok(text) => match DeadlineLedger::parse(&text, &file.display().to_string()) {
            Ok(l) => {
                if l != DeadlineLedger::default() {
                    info(&format!("{}: deadline grants and demotions remembered", file.display()));
                }
                (l, text)
            }
            Err(e) => {
                error(&format!("{e}; starting with no deadline grants or demotions (the file is rewritten at the next change)"));
                (DeadlineLedger::default(), String::new())
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (DeadlineLedger::default(), String::new()),
        Err(e) => {
            error(&format!("cannot read {}: {e}; starting with no deadline grants or demotions", file.display()));
            (DeadlineLedger::default(), String::new())
        }
    };
    *DEADLINES.lock().unwrap_or_else(|e| e.into_inner()) = DeadlineState { ledger: Some(ledger), file: Some(file), written };
}

/// Writes the ledger when its text changed (ranking thread, no slurmctld lock held).
fn save_deadlines(state: &mut DeadlineState) {
    let Some(text) = state.ledger.as_ref().map(DeadlineLedger::to_text) else { return };
    if text == state.written {
        return;
    }
    if let Some(file) = &state.file {
        if let Err(e) = write_state_file(file, &text) {
            error(&format!("cannot write {}: {e}; deadline budgets would not survive a restart", file.display()));
            return;
        }
    }
    state.written = text;
}

/// Records overruns seen by a ranking pass; true when the set of distrusted users changed.
fn record_overruns(seen: &[(u32, u32, i64)], cfg: &DeclaredConfig, now: f64) -> bool {
    let mut g = OVERRUNS.lock().unwrap_or_else(|e| e.into_inner());
    let m = g.log.get_or_insert_with(Default::default);
    let before = m.distrusted(now, cfg);
    let had = m.len();
    for (job, uid, start) in seen {
        if !before.contains(uid) {
            info(&format!(
                "JobId={job} of uid {uid} ran {:.0} s, past its declared iterations x {} ({} policy): uid {uid}'s declared iterations are not trusted for {:.0} s",
                now - *start as f64,
                cfg.slack,
                match cfg.policy { OverrunPolicy::Demote => "demote", OverrunPolicy::Limit => "limit", OverrunPolicy::Off => "off" },
                cfg.distrust_s
            ));
        }
        m.record(*uid, now);
    }
    m.expire(now, cfg);
    let after = m.distrusted(now, cfg);
    let changed = before != after || m.len() != had;
    g.dirty |= changed || !seen.is_empty();
    let write = g.dirty && (changed || now - g.written_at >= OVERRUN_WRITE_EVERY_S);
    if let Some(file) = g.file.clone().filter(|_| write) {
        let text = g.log.as_ref().map(Overruns::to_text).unwrap_or_default();
        g.dirty = false;
        g.written_at = now;
        drop(g); // site_factor_p_set reads the log under slurmctld's locks: no I/O while holding it
        write_overruns(&file, &text);
    }
    before != after
}

/// What marks a job cellsched placed, in its AdminComment (core's [`record::PREFIX`]).
const MARKER: &[u8] = record::PREFIX.as_bytes();

/// One ranking pass (ranking thread): snapshot under the read locks, copying
/// only new or changed jobs; rank without locks; publish the factors.
fn rank_pass() {
    let Some(cfg) = current() else { return };
    let mut guard = RANKER.lock().unwrap_or_else(|e| e.into_inner());
    let ranker = guard.get_or_insert_with(JobRanker::default);
    if INVALIDATE.swap(false, std::sync::atomic::Ordering::SeqCst) {
        ranker.invalidate();
    }
    let declared = declared_cfg();
    let now = now_s();
    // The pass's lists reuse the last pass's buffers.
    let mut bufs = std::mem::take(&mut ranker.buffers);
    bufs.seen.clear();
    bufs.running.clear();
    // Under the read locks an unchanged job costs a byte scan and a hash of
    // its AdminComment and one lookup: no UTF-8 check, no parse, no
    // allocation. Only new or changed jobs are copied, and parsed after. The
    // walk releases the locks every `PIECE_HOLD` (see `for_each_job_in_pieces`).
    let (mut fresh, mut running_fresh) = (Vec::new(), Vec::new());
    let walked = ctld::for_each_job_in_pieces(LockKind::Read, false, ctld::PIECE_HOLD, |job| {
        let Some(comment) = job.admin_comment_bytes().filter(|c| snapshot_cache::contains(c, MARKER)) else { return };
        if !job.is_pending() {
            let running = job.state() & slurm_sys::JOB_STATE_BASE == slurm_sys::JOB_RUNNING;
            let start = job.start_time();
            if running && start > 0 {
                let (id, stamp) = (job.id(), Stamp::of_bytes(comment, None));
                if ranker.wants_running(id, stamp) {
                    let Some(text) = job.admin_comment() else { return };
                    let private = job.env().find_map(|e| record::private_entry(&[e]).map(str::to_string));
                    running_fresh.push((id, stamp, text.to_string(), private));
                }
                bufs.running.push(Running { id, user_id: job.user_id(), start_s: start, stamp });
            }
            return;
        }
        let limit = job.time_limit();
        let (id, stamp) = (job.id(), Stamp::of_bytes(comment, limit));
        if ranker.wants(id, &stamp) {
            // A comment that is not UTF-8 reads as absent, as in every parse.
            let Some(text) = job.admin_comment() else { return };
            fresh.push(Snap {
                id,
                user_id: job.user_id(),
                submit_time_s: job.submit_time(),
                admin_comment: text.to_string(),
                env: job.env().filter(|e| job_env::is_dl_entry(e) || record::is_private_entry(e)).map(str::to_string).collect(),
                time_limit_min: limit,
            });
        }
        bufs.seen.push((id, stamp));
    });
    // A walk cut short (no job list yet, slurmctld stopping) ranks nothing: the last factors stay.
    let walk = match walked {
        Ok(w) if w.complete => w,
        _ => {
            ranker.buffers = bufs;
            return;
        }
    };
    let overran = ranker.overruns(&bufs.running, running_fresh, now, &declared);
    if record_overruns(&overran, &declared, now) {
        // Parses made with the old trust are stale; those jobs are parsed again next pass.
        ranker.invalidate();
    }
    let dcfg = deadline_cfg();
    let misses = ranker.deadline_misses(&bufs.running, now, &dcfg);
    let copied = fresh.len();
    let t1 = Instant::now();
    let preds = predictions();
    let data = OrderingData { models: models(), predictions: preds.as_deref() };
    let mut deadlines = DEADLINES.lock().unwrap_or_else(|e| e.into_inner());
    let ledger = deadlines.ledger.get_or_insert_with(DeadlineLedger::default);
    for (uid, at) in &misses {
        if !ledger.is_demoted(*uid, now, &dcfg) {
            info(&format!("uid {uid} missed a deadline by more than {} x the job's predicted run time: no deadline urgency for {:.0} s", dcfg.miss_factor, dcfg.distrust_s));
        }
        ledger.demote(*uid, *at);
    }
    let live: std::collections::HashSet<u32> = bufs.seen.iter().map(|(id, _)| *id).chain(bufs.running.iter().map(|r| r.id)).collect();
    ledger.expire(now, &dcfg, &live);
    ranker.update(&bufs.seen, fresh, now, &cfg, &data, slurm_sys::NICE_OFFSET, &distrust_now(&declared, now), (ledger, &dcfg));
    save_deadlines(&mut deadlines);
    drop(deadlines);
    *FACTORS.write().unwrap_or_else(|e| e.into_inner()) = Some(ranker.factors());
    log::debug(&format!(
        "site_factor/cellsched: ranking pass over {} pending DL jobs ({copied} copied): snapshot {} us (the longest of {} read-lock holds; {} us held in all, {} us waiting for them), ranking {} us; plugin heap {} KiB (peak {} KiB)",
        bufs.seen.len(),
        walk.max_hold_us,
        walk.pieces,
        walk.total_hold_us,
        walk.wait_us,
        t1.elapsed().as_micros(),
        cellsched_slurm_ffi::heap::live_bytes() / 1024,
        cellsched_slurm_ffi::heap::peak_bytes() / 1024
    ));
    ranker.buffers = bufs;
}

/// Starts the ranking thread (slurmctld only).
fn start_ranker() {
    let interval = || current().map(|c| c.rank_interval_s).unwrap_or(5);
    match Periodic::start("site_factor/cellsched", "rank", interval, rank_pass) {
        Ok(p) => *RANK_THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(p),
        Err(e) => error(&format!("cannot start the ranking thread: {e}; DL jobs keep the site factor given at submit")),
    }
}

/// Stops the ranking thread, waiting a bounded time (fini may run under slurmctld's locks).
fn stop_ranker() {
    if let Some(p) = RANK_THREAD.lock().unwrap_or_else(|e| e.into_inner()).take() {
        p.stop("site_factor/cellsched", std::time::Duration::from_secs(5));
    }
}

/// Runs `first` on the reload thread, then a full reload (config and
/// predictor) for every reconfigure that came while it ran. If the thread
/// is running already, only asks it for one more full reload.
fn spawn_reload(first: impl FnOnce() + Send + 'static) {
    let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
    if r.running {
        r.again = true;
        return;
    }
    if let Some(h) = r.handle.take() {
        let _ = h.join(); // finished: it cleared `running` as its last step
    }
    let run = move || {
        cellsched_slurm_ffi::background::yield_cpu_or_log("site_factor/cellsched", "reload");
        guard("site_factor/cellsched reload", (), first);
        loop {
            let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
            if !r.again {
                r.running = false;
                return;
            }
            r.again = false;
            drop(r);
            guard("site_factor/cellsched reload", (), || load_predictions(load_config()));
        }
    };
    match std::thread::Builder::new().name("cellsched-sf-load".into()).spawn(run) {
        Ok(h) => {
            r.handle = Some(h);
            r.running = true;
        }
        Err(e) => error(&format!("cannot start the reload thread: {e}")),
    }
}

fn models() -> &'static ModelCatalog {
    MODELS.get_or_init(ModelCatalog::builtin)
}

fn current() -> Option<Arc<OrderingConfig>> {
    ORDERING.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn predictions() -> Option<Arc<Predictions>> {
    PREDICTIONS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The A-SRPT view of a job record, `None` if cellsched did not place it.
fn pending_of(job: &Job<'_>, cfg: &OrderingConfig, data: &OrderingData<'_>, distrusted: bool) -> Option<PendingJob> {
    let comment = job.admin_comment();
    // Cheap pre-check before copying the environment.
    if !comment.is_some_and(|c| c.contains(record::PREFIX)) {
        return None;
    }
    let f = JobFields {
        id: job.id(),
        user_id: job.user_id(),
        submit_time_s: job.submit_time(),
        admin_comment: comment,
        env: job.env().filter(|e| job_env::is_dl_entry(e) || record::is_private_entry(e)).map(str::to_string).collect(),
        time_limit_min: job.time_limit(),
        distrusted,
    };
    ordering::pending_job(&f, cfg, data)
}

#[no_mangle]
pub extern "C" fn init() -> c_int {
    guard("site_factor/cellsched init", slurm_sys::SLURM_ERROR, || {
        if let Err(e) = version::check_running_slurm() {
            error(&format!("{e}; refusing to load"));
            return slurm_sys::SLURM_ERROR;
        }
        models();
        let history = load_config();
        spawn_reload(move || load_predictions(history));
        if ctld::in_slurmctld() {
            load_overruns();
            load_deadlines();
            cellsched_slurm_ffi::plugin::pin_library();
            start_ranker();
        }
        slurm_sys::SLURM_SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn fini() -> c_int {
    guard("site_factor/cellsched fini", slurm_sys::SLURM_SUCCESS, || {
        let handle = {
            let mut r = RELOAD.lock().unwrap_or_else(|e| e.into_inner());
            r.again = false;
            r.handle.take()
        };
        if let Some(h) = handle {
            let _ = h.join();
        }
        stop_ranker();
        *FACTORS.write().unwrap_or_else(|e| e.into_inner()) = None;
        *ORDERING.write().unwrap_or_else(|e| e.into_inner()) = None;
        *PREDICTIONS.write().unwrap_or_else(|e| e.into_inner()) = None;
        slurm_sys::SLURM_SUCCESS
    })
}

/// Called under slurmctld's write locks: the file is re-read and the
/// predictor refitted by a thread.
#[no_mangle]
pub extern "C" fn site_factor_p_reconfig() {
    guard("site_factor_p_reconfig", (), || spawn_reload(|| load_predictions(load_config())))
}

/// Puts the stock site factor back on every pending job cellsched placed (job write lock held).
fn reset_to_stock() {
    let mut n = 0;
    ctld::for_each_job(true, |job| {
        if job.admin_comment().is_some_and(|c| c.contains(record::PREFIX)) && job.site_factor() != slurm_sys::NICE_OFFSET {
            job.set_site_factor(slurm_sys::NICE_OFFSET);
            n += 1;
        }
        ControlFlow::Continue(())
    });
    info(&format!("ordering off: {n} pending DL jobs got the stock site factor back"));
}

/// At submit (job write lock held): this job's A-SRPT priority on its own.
#[no_mangle]
pub extern "C" fn site_factor_p_set(job_ptr: *mut cellsched_job_t) {
    guard("site_factor_p_set", (), || {
        let Some(cfg) = current() else { return };
        if job_ptr.is_null() {
            return;
        }
        let id = unsafe { slurm_sys::shim::cellsched_job_id(job_ptr) };
        let preds = predictions();
        let data = OrderingData { models: models(), predictions: preds.as_deref() };
        let now = now_s();
        let distrust = distrust_now(&declared_cfg(), now);
        ctld::with_job(id, |job| {
            let distrusted = distrust.users.contains(&job.user_id());
            if distrusted && distrust.demote {
                return; // stock site factor
            }
            // Deadline urgency is granted only by the ranking pass, which
            // applies each user's deadline budget (within rank_interval_s).
            if let Some(p) = pending_of(job, &cfg, &data, distrusted).map(|p| p.with_deadline(None)) {
                job.set_site_factor(ordering::site_factor_one(&p, now, &cfg, slurm_sys::NICE_OFFSET));
            }
        });
    })
}

/// Longest [`release_gres_select`] works in one `site_factor_p_update`
/// (under the job write lock); the next call goes on where it stopped.
const RELEASE_BUDGET: std::time::Duration = std::time::Duration::from_micros(500);
/// Where the next [`release_gres_select`] starts in the ranked jobs.
static RELEASE_CURSOR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What one [`release_gres_select`] did.
#[derive(Debug, Default, Clone, Copy)]
struct Released {
    jobs: usize,
    bytes: u64,
    visited: usize,
    us: u128,
}

/// Frees, in ranked pending DL jobs, the per-node GRES selection arrays
/// Slurm's scheduling tests left there (`SlurmctldConfig::release_gres_select`;
/// caller holds the job write lock). A pointer test per job, for at most
/// [`RELEASE_BUDGET`]; the next call resumes after the last job looked at,
/// so every ranked job is reached within a few calls.
fn release_gres_select(factors: &std::collections::HashMap<u32, u32>) -> Released {
    let t = Instant::now();
    let n = factors.len();
    let mut r = Released::default();
    if n == 0 {
        return r;
    }
    let start = RELEASE_CURSOR.load(std::sync::atomic::Ordering::Relaxed) % n;
    for &id in factors.keys().cycle().skip(start).take(n) {
        if r.visited % 64 == 0 && r.visited > 0 && t.elapsed() >= RELEASE_BUDGET {
            break;
        }
        r.visited += 1;
        ctld::with_job(id, |job| {
            let b = job.release_gres_select();
            r.jobs += usize::from(b > 0);
            r.bytes += b;
        });
    }
    RELEASE_CURSOR.store((start + r.visited) % n, std::sync::atomic::Ordering::Relaxed);
    r.us = t.elapsed().as_micros();
    r
}

/// Every PriorityCalcPeriod (job write lock held): copies the site factors
/// the ranking thread computed last (a hash lookup per pending job), and
/// with `release_gres_select` frees leftover GRES selection arrays for at
/// most [`RELEASE_BUDGET`].
#[no_mangle]
pub extern "C" fn site_factor_p_update() {
    guard("site_factor_p_update", (), || {
        if current().is_none() {
            if RESET_TO_STOCK.swap(false, std::sync::atomic::Ordering::SeqCst) {
                reset_to_stock();
            }
            return;
        }
        let Some(factors) = FACTORS.read().unwrap_or_else(|e| e.into_inner()).clone() else { return };
        if factors.is_empty() {
            return;
        }
        let started = Instant::now();
        let mut changed = 0usize;
        // Only the ranked jobs, found through slurmctld's job hash: the other
        // pending jobs (plain ones) are not even visited.
        for (&id, &f) in factors.iter() {
            ctld::with_job(id, |job| {
                if job.is_pending() && job.site_factor() != f {
                    job.set_site_factor(f);
                    changed += 1;
                }
            });
        }
        let copied_us = started.elapsed().as_micros();
        let released = if RELEASE_GRES.load(std::sync::atomic::Ordering::Relaxed) && current().is_some() { release_gres_select(&factors) } else { Released::default() };
        // The cost of this call under the job write lock (shown with `scontrol setdebug debug`).
        log::debug(&format!(
            "site_factor/cellsched: update copied {} ranked site factors ({changed} changed) in {copied_us} us; GRES selection arrays of {} jobs freed ({} KiB; {} of the ranked jobs looked at) in {} us; total {} us",
            factors.len(),
            released.jobs,
            released.bytes / 1024,
            released.visited,
            released.us,
            started.elapsed().as_micros()
        ));
    })
}

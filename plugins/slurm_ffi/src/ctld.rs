//! Safe wrappers over the slurm-sys shim for code running inside slurmctld
//! (site_factor and job_submit plugins). Outside slurmctld every entry point
//! returns `None` / [`CtldError::NotInSlurmctld`] instead of crashing.
//!
//! Locking: [`Job`] values only exist inside callbacks that run while the
//! caller holds slurmctld's job lock ([`for_each_job`] inside
//! `site_factor_p_update`, or inside [`with_lock`]); they cannot escape them.
use crate::cstr::{borrow_bytes, borrow_str, take_xstr, to_cstring, CStrError};
use cellsched_core::job_env;
use slurm_sys::shim as s;
use std::ffi::CString;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::os::raw::{c_int, c_void};

/// Errors from slurmctld operations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CtldError {
    /// slurmctld's API (locks, job list, update_job) is not in this process.
    #[error("not running inside slurmctld (lock_slurmctld/job_list/update_job not found)")]
    NotInSlurmctld,
    /// `update_job` failed with a Slurm error code.
    #[error("update_job for JobId={job_id} failed: Slurm error {code}")]
    UpdateFailed {
        /// Job updated.
        job_id: u32,
        /// Slurm error code (`slurm_strerror` gives the text).
        code: i32,
    },
    /// A slurmctld job operation (signal, requeue) failed with a Slurm error code.
    #[error("{op} of JobId={job_id} failed: Slurm error {code}")]
    Failed {
        /// What was asked.
        op: &'static str,
        /// Job.
        job_id: u32,
        /// Slurm error code (`slurm_strerror` gives the text).
        code: i32,
    },
    /// A string could not be passed to C.
    #[error(transparent)]
    CStr(#[from] CStrError),
    /// Setting a job field failed (allocation unavailable).
    #[error("cannot set {field} of JobId={job_id}")]
    SetFailed {
        /// Field name.
        field: &'static str,
        /// Job.
        job_id: u32,
    },
}

/// 22.05's `ESLURM_JOB_SETTING_DB_INX`: a job update refused while
/// slurmctld still sets the job's accounting index (e.g. right after its
/// own restart). 24.11 removed the error and leaves the code unused, so the
/// number is written here rather than taken from the headers.
const JOB_SETTING_DB_INX: i32 = 2103;

impl CtldError {
    /// Whether the same update may succeed in a moment ([`JOB_SETTING_DB_INX`]).
    pub fn is_transient(&self) -> bool {
        matches!(self, CtldError::UpdateFailed { code, .. } if *code == JOB_SETTING_DB_INX)
    }
}

/// Whether slurmctld's API is reachable (false in slurmd, slurmstepd, clients, tests).
pub fn in_slurmctld() -> bool {
    unsafe { s::cellsched_in_slurmctld() == 1 }
}

/// Lock sets for [`with_lock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// conf R, job R, node R, part R.
    Read,
    /// conf R, job W, node W, part R, fed R (what the update-job RPC takes).
    Write,
}

/// A job record borrowed while a job lock is held.
pub struct Job<'a> {
    ptr: *mut s::cellsched_job_t,
    _lock: PhantomData<&'a mut ()>,
}

macro_rules! str_getters {
    ($($(#[$m:meta])* $name:ident => $f:ident;)*) => {$(
        $(#[$m])*
        pub fn $name(&self) -> Option<&'a str> { unsafe { borrow_str(s::$f(self.ptr)) } }
    )*};
}
macro_rules! bytes_getters {
    ($($(#[$m:meta])* $name:ident => $f:ident;)*) => {$(
        $(#[$m])*
        pub fn $name(&self) -> Option<&'a [u8]> { unsafe { borrow_bytes(s::$f(self.ptr)) } }
    )*};
}
macro_rules! num_getters {
    ($($(#[$m:meta])* $name:ident: $t:ty => $f:ident;)*) => {$(
        $(#[$m])*
        pub fn $name(&self) -> $t { unsafe { s::$f(self.ptr) } }
    )*};
}

impl<'a> Job<'a> {
    /// Wraps the `job_record_t *` Slurm passes to a plugin callback
    /// (e.g. `site_factor_p_set`); `None` for NULL.
    ///
    /// # Safety
    /// `ptr` must be a live `job_record_t *` and the job lock must be held for `'a`.
    pub unsafe fn from_raw(ptr: *mut c_void) -> Option<Job<'a>> {
        (!ptr.is_null()).then(|| Job { ptr: ptr.cast(), _lock: PhantomData })
    }

    num_getters! {
        /// Job id.
        id: u32 => cellsched_job_id;
        /// Submitting user's uid.
        user_id: u32 => cellsched_job_user_id;
        /// Full `job_state` (base state | flags).
        state: u32 => cellsched_job_state;
        /// `enum job_state_reason`.
        state_reason: u32 => cellsched_job_state_reason;
        /// `details->min_nodes` (`NO_VAL` without details).
        min_nodes: u32 => cellsched_job_min_nodes;
        /// `details->max_nodes` (0 or `NO_VAL` when unset).
        max_nodes: u32 => cellsched_job_max_nodes;
        /// `details->num_tasks`.
        num_tasks: u32 => cellsched_job_num_tasks;
        /// Time limit in minutes (`NO_VAL`/`INFINITE` when unset/unlimited).
        time_limit_min: u32 => cellsched_job_time_limit;
        /// Current priority.
        priority: u32 => cellsched_job_priority;
        /// Current site factor (`NICE_OFFSET` is neutral).
        site_factor: u32 => cellsched_job_site_factor;
        /// Submit time (Unix seconds).
        submit_time: i64 => cellsched_job_submit_time;
        /// Earliest begin time (Unix seconds, 0 = none).
        begin_time: i64 => cellsched_job_begin_time;
        /// Start time (Unix seconds, 0 = not started).
        start_time: i64 => cellsched_job_start_time;
        /// End time (Unix seconds; for a running job, its expected end).
        end_time: i64 => cellsched_job_end_time;
        /// The batch script's `wait(2)` status once it ended (exit code in bits 8-15).
        exit_status: u32 => cellsched_job_exit_code;
        /// Times the job was requeued (Slurm's `restart_cnt`, `SLURM_RESTART_COUNT`).
        restart_count: u32 => cellsched_job_restart_cnt;
    }
    str_getters! {
        /// Job name.
        name => cellsched_job_name;
        /// Partition name(s).
        partition => cellsched_job_partition;
        /// AdminComment.
        admin_comment => cellsched_job_admin_comment;
        /// Comment.
        comment => cellsched_job_comment;
        /// Required node features (`details->features`).
        features => cellsched_job_features;
        /// Per-node TRES request, e.g. `gres:gpu:a100:4` (see `cellsched_core::slurm_text::gpu_request`).
        tres_per_node => cellsched_job_tres_per_node;
        /// Requested TRES string.
        tres_req_str => cellsched_job_tres_req_str;
        /// Allocated TRES string.
        tres_alloc_str => cellsched_job_tres_alloc_str;
        /// Allocated node list.
        nodes => cellsched_job_nodes;
    }

    bytes_getters! {
        /// AdminComment as bytes (no UTF-8 check: for change tests; [`Job::admin_comment`] for the text).
        admin_comment_bytes => cellsched_job_admin_comment;
        /// `details->features` as bytes.
        features_bytes => cellsched_job_features;
        /// Per-node TRES request as bytes.
        tres_per_node_bytes => cellsched_job_tres_per_node;
    }

    /// Time limit in minutes, `None` when unset or infinite.
    pub fn time_limit(&self) -> Option<u32> {
        let limit = self.time_limit_min();
        (limit != slurm_sys::NO_VAL && limit != slurm_sys::INFINITE && limit > 0).then_some(limit)
    }

    /// True while pending.
    pub fn is_pending(&self) -> bool {
        unsafe { s::cellsched_job_is_pending(self.ptr) == 1 }
    }

    /// Base state and flags as [`JobPhase`].
    pub fn phase(&self) -> JobPhase {
        JobPhase::of(self.state())
    }

    /// True while a node of the job has not registered with this slurmctld
    /// yet and is neither DOWN nor not responding (it is expected to
    /// register). Right after a slurmctld restart a node is in the
    /// recovered table before its slurmd registers, and until then
    /// slurmctld's count of the node's GRES in use is not reliable: freeing
    /// or allocating the node's GPUs then (a requeue, a new start) can
    /// leave one counted as in use. Needs the node read lock ([`LockKind::Read`]).
    pub fn awaits_node_registration(&self) -> bool {
        unsafe { s::cellsched_job_awaits_registration(self.ptr) == 1 }
    }

    /// True when Slurm may requeue the job (`--requeue`, `details->requeue`).
    pub fn requeue_allowed(&self) -> bool {
        unsafe { s::cellsched_job_requeue_allowed(self.ptr) == 1 }
    }

    /// The batch script's exit code once it ended (`None` when a signal ended it).
    pub fn exit_code(&self) -> Option<u8> {
        let st = self.exit_status();
        (st & 0x7f == 0).then_some(((st >> 8) & 0xff) as u8)
    }

    /// `spank_job_env` entries (`NAME=value`).
    pub fn env(&self) -> impl Iterator<Item = &'a str> + '_ {
        let n = unsafe { s::cellsched_job_env_count(self.ptr) };
        (0..n).filter_map(move |i| unsafe { borrow_str(s::cellsched_job_env_at(self.ptr, i)) })
    }

    /// Value of `key` in `spank_job_env`, by the precedence rule of
    /// `cellsched_core::job_env` (`key`, then `SPANK_key`, then `SLURM_SPANK_key`;
    /// the last entry of a name).
    pub fn env_get(&self, key: &str) -> Option<&'a str> {
        let entries: Vec<&'a str> = self.env().collect();
        job_env::lookup_entries(entries.iter().copied(), key)
    }

    /// Sets `site_factor` (needs the job write lock, e.g. in `site_factor_p_update`).
    pub fn set_site_factor(&mut self, factor: u32) {
        unsafe { s::cellsched_job_set_site_factor(self.ptr, factor) }
    }

    /// Frees what Slurm's last scheduling test that fitted this pending job
    /// left in its GRES request: cons_tres's per-node selection arrays (8
    /// bytes per node of the cluster each), which slurmctld keeps until
    /// the job ends and rebuilds, zeroed, at the next test that fits it.
    /// Returns the bytes freed (0 for a job not pending, or outside
    /// slurmctld). Needs the job write lock (e.g. in `site_factor_p_update`).
    pub fn release_gres_select(&mut self) -> u64 {
        unsafe { s::cellsched_job_release_gres_select(self.ptr) }
    }

    /// Replaces AdminComment.
    pub fn set_admin_comment(&mut self, text: &str) -> Result<(), CtldError> {
        let c = to_cstring(text)?;
        match unsafe { s::cellsched_job_set_admin_comment(self.ptr, c.as_ptr()) } {
            0 => Ok(()),
            _ => Err(CtldError::SetFailed { field: "admin_comment", job_id: self.id() }),
        }
    }

    /// Sets `name=value` in `spank_job_env` (overwrites).
    pub fn env_set(&mut self, name: &str, value: &str) -> Result<(), CtldError> {
        let (n, v) = (to_cstring(name)?, to_cstring(value)?);
        match unsafe { s::cellsched_job_env_set(self.ptr, n.as_ptr(), v.as_ptr()) } {
            0 => Ok(()),
            _ => Err(CtldError::SetFailed { field: "spank_job_env", job_id: self.id() }),
        }
    }
}

impl<'a> Job<'a> {
    /// True for a batch job (one with a job script).
    pub fn is_batch(&self) -> bool {
        unsafe { s::cellsched_job_is_batch(self.ptr) == 1 }
    }

    /// `details->env_sup` entries (`NAME=value`): the supplemental environment
    /// slurmctld adds to the batch step at launch and sends to srun/salloc in
    /// the allocation response.
    pub fn env_sup(&self) -> impl Iterator<Item = &'a str> + '_ {
        let n = unsafe { s::cellsched_job_env_sup_count(self.ptr) };
        (0..n).filter_map(move |i| unsafe { borrow_str(s::cellsched_job_env_sup_at(self.ptr, i)) })
    }

    /// Sets `name=value` in `details->env_sup` (overwrites; needs the job write lock).
    /// At launch it overrides the same name in the submitted batch environment.
    pub fn env_sup_set(&mut self, name: &str, value: &str) -> Result<(), CtldError> {
        let (n, v) = (to_cstring(name)?, to_cstring(value)?);
        match unsafe { s::cellsched_job_env_sup_set(self.ptr, n.as_ptr(), v.as_ptr()) } {
            0 => Ok(()),
            _ => Err(CtldError::SetFailed { field: "env_sup", job_id: self.id() }),
        }
    }
}


/// Calls `f` for each job (pending ones only when `pending_only`) until it
/// returns `Break`. The caller must already hold the job lock (as
/// `site_factor_p_update` does). Returns jobs visited, or `None` outside slurmctld.
pub fn for_each_job<F>(pending_only: bool, mut f: F) -> Option<usize>
where
    F: FnMut(&mut Job<'_>) -> ControlFlow<()>,
{
    unsafe extern "C" fn tramp<F: FnMut(&mut Job<'_>) -> ControlFlow<()>>(
        job: *mut s::cellsched_job_t,
        arg: *mut c_void,
    ) -> c_int {
        let f = &mut *(arg as *mut F);
        let mut j = Job { ptr: job, _lock: PhantomData };
        // A panic must not unwind through C: stop the walk and re-raise after.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut j))) {
            Ok(ControlFlow::Continue(())) => 0,
            Ok(ControlFlow::Break(())) => 1,
            Err(p) => {
                PANIC.with(|c| *c.borrow_mut() = Some(p));
                1
            }
        }
    }
    let n = unsafe { s::cellsched_for_each_job(pending_only as c_int, Some(tramp::<F>), &mut f as *mut F as *mut c_void) };
    resume_panic();
    (n >= 0).then_some(n as usize)
}

/// The longest a walk in pieces ([`for_each_job_in_pieces`]) holds the
/// locks at once, before it lets slurmctld's other threads in: a fifth of
/// the 10 ms a snapshot may hold them (issue 15), leaving room for a thread
/// preempted while it holds them.
pub const PIECE_HOLD: std::time::Duration = std::time::Duration::from_millis(2);

/// What a walk in pieces did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Lock holds (pieces) taken.
    pub pieces: u32,
    /// Longest hold in microseconds, from taking the locks to releasing them
    /// (the clock is read just before the release: a thread the release
    /// wakes may preempt this one, and that time is not a hold).
    pub max_hold_us: u128,
    /// All holds together, microseconds.
    pub total_hold_us: u128,
    /// Time spent waiting for the locks, microseconds.
    pub wait_us: u128,
    /// Jobs visited.
    pub jobs: usize,
    /// True when every job was visited; false when the walk was cut short
    /// (no job list yet, or slurmctld shutting down): absence means nothing then.
    pub complete: bool,
}

/// Calls `f` for each job (pending ones only when `pending_only`), holding
/// `kind` locks for pieces of the walk of about `max_hold` each and
/// releasing them in between, so slurmctld's RPCs and schedulers are never
/// kept out for the whole list. Slurm's list keeps the walk's position valid
/// while jobs are added or purged between pieces: every job present for the
/// whole walk is visited once; one added or removed meanwhile may be visited
/// or not. Each job's fields are read under the locks, but different pieces
/// see different moments. Never call it while holding the locks.
/// `Err(NotInSlurmctld)` outside slurmctld; a panic in `f` ends the walk
/// (locks released) and is re-raised.
pub fn for_each_job_in_pieces<F>(kind: LockKind, pending_only: bool, max_hold: std::time::Duration, mut f: F) -> Result<WalkStats, CtldError>
where
    F: FnMut(&mut Job<'_>),
{
    use std::time::Instant;
    struct Piece<'f, F> {
        f: &'f mut F,
        until: Instant,
        jobs: usize,
    }
    unsafe extern "C" fn tramp<F: FnMut(&mut Job<'_>)>(job: *mut s::cellsched_job_t, arg: *mut c_void) -> c_int {
        let p = &mut *(arg as *mut Piece<'_, F>);
        let mut j = Job { ptr: job, _lock: PhantomData };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (p.f)(&mut j))) {
            Ok(()) => {
                p.jobs += 1;
                // The clock is read every 8 jobs (a job costs far less than the budget).
                c_int::from(p.jobs % 8 == 0 && Instant::now() >= p.until)
            }
            Err(e) => {
                PANIC.with(|c| *c.borrow_mut() = Some(e));
                1
            }
        }
    }
    let mut stats = WalkStats::default();
    let mut walk: *mut s::cellsched_job_walk_t = std::ptr::null_mut();
    let mut started = false;
    loop {
        let asked = Instant::now();
        let (rc, held, hold) = with_lock(kind, || {
            let held = Instant::now();
            if !started {
                started = true;
                walk = unsafe { s::cellsched_job_walk_start() };
                if walk.is_null() {
                    return (-1, held, held.elapsed().as_micros());
                }
            }
            let mut piece = Piece { f: &mut f, until: held + max_hold, jobs: 0 };
            let rc = unsafe { s::cellsched_job_walk_next(walk, pending_only as c_int, Some(tramp::<F>), &mut piece as *mut Piece<'_, F> as *mut c_void) };
            stats.jobs += piece.jobs;
            if rc != 1 {
                walk = std::ptr::null_mut(); // freed by the shim
            }
            if PANIC.with(|c| c.borrow().is_some()) {
                if !walk.is_null() {
                    unsafe { s::cellsched_job_walk_stop(walk) };
                    walk = std::ptr::null_mut();
                }
                resume_panic();
            }
            (rc, held, held.elapsed().as_micros())
        })?;
        stats.pieces += 1;
        stats.max_hold_us = stats.max_hold_us.max(hold);
        stats.total_hold_us += hold;
        stats.wait_us += held.duration_since(asked).as_micros();
        match rc {
            1 => continue,
            0 => stats.complete = true,
            _ => stats.complete = false,
        }
        return Ok(stats);
    }
}

thread_local! {
    static PANIC: std::cell::RefCell<Option<Box<dyn std::any::Any + Send>>> = const { std::cell::RefCell::new(None) };
}

fn resume_panic() {
    if let Some(p) = PANIC.with(|c| c.borrow_mut().take()) {
        std::panic::resume_unwind(p);
    }
}

/// Runs `f` with the job `id` (caller holds the job lock); `None` if absent or outside slurmctld.
pub fn with_job<T>(id: u32, f: impl FnOnce(&mut Job<'_>) -> T) -> Option<T> {
    let ptr = unsafe { s::cellsched_find_job(id) };
    if ptr.is_null() {
        return None;
    }
    Some(f(&mut Job { ptr, _lock: PhantomData }))
}

/// Runs `f` holding slurmctld's locks (from a plugin thread; never from a
/// callback that already holds them). `Err(NotInSlurmctld)` outside slurmctld.
pub fn with_lock<T, F: FnOnce() -> T>(kind: LockKind, f: F) -> Result<T, CtldError> {
    struct Ctx<G, T> {
        f: Option<G>,
        out: Option<std::thread::Result<T>>,
    }
    unsafe extern "C" fn tramp<G: FnOnce() -> T, T>(arg: *mut c_void) -> c_int {
        let ctx = &mut *(arg as *mut Ctx<G, T>);
        let g = ctx.f.take().expect("called once");
        ctx.out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(g)));
        0
    }
    let kind = match kind {
        LockKind::Read => s::CELLSCHED_LOCK_READ,
        LockKind::Write => s::CELLSCHED_LOCK_WRITE,
    };
    let mut ctx: Ctx<F, T> = Ctx { f: Some(f), out: None };
    let rc = unsafe { s::cellsched_with_lock(kind, Some(tramp::<F, T>), &mut ctx as *mut Ctx<F, T> as *mut c_void) };
    match ctx.out {
        Some(Ok(v)) => Ok(v),
        Some(Err(p)) => std::panic::resume_unwind(p), // locks already released
        None if rc < 0 => Err(CtldError::NotInSlurmctld),
        None => unreachable!("cellsched_with_lock returned without running the callback"),
    }
}

/// Where a job is in its life, from `job_state` (base state and the
/// `COMPLETING` flag), as the elastic thread needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPhase {
    /// Pending, nothing of an earlier run still cleaning up.
    Pending,
    /// Pending after a requeue while its earlier run still completes (epilog).
    PendingCompleting,
    /// Running (or suspended).
    Running,
    /// Ended (any terminal state), possibly still completing.
    Ended,
}

impl JobPhase {
    /// `JOB_COMPLETING` in `job_state`.
    pub const COMPLETING: u32 = 0x8000;

    /// The phase of a full `job_state` value.
    pub fn of(state: u32) -> JobPhase {
        let completing = state & Self::COMPLETING != 0;
        match state & slurm_sys::JOB_STATE_BASE {
            0 if completing => JobPhase::PendingCompleting,
            0 => JobPhase::Pending,
            1 | 2 => JobPhase::Running, // JOB_RUNNING, JOB_SUSPENDED
            _ => JobPhase::Ended,
        }
    }
}

/// Sends `signal` to job `job_id`'s batch script and all its steps, as
/// `scancel --full --signal` by root (slurmctld's `job_signal_id`). The
/// caller holds the [`LockKind::Write`] locks, e.g. inside [`with_lock`].
pub fn signal_job(job_id: u32, signal: u16) -> Result<(), CtldError> {
    match unsafe { s::cellsched_job_signal(job_id, signal) } {
        0 => Ok(()),
        -1 => Err(CtldError::NotInSlurmctld),
        code => Err(CtldError::Failed { op: "signal", job_id, code }),
    }
}

/// Requeues batch job `job_id` (running, or ended but not yet purged) as
/// `scontrol requeue` by root (slurmctld's `job_requeue`): same job id,
/// AdminComment and accounting history (a `REQUEUED` record), Slurm's
/// `restart_cnt` + 1, pending again once the old run has completed. The
/// caller holds the [`LockKind::Write`] locks.
pub fn requeue_job(job_id: u32) -> Result<(), CtldError> {
    match unsafe { s::cellsched_job_requeue(job_id) } {
        0 => Ok(()),
        -1 => Err(CtldError::NotInSlurmctld),
        code => Err(CtldError::Failed { op: "requeue", job_id, code }),
    }
}

/// Asks slurmctld to run its scheduler soon.
pub fn queue_scheduler() -> Result<(), CtldError> {
    match unsafe { s::cellsched_queue_scheduler() } {
        0 => Ok(()),
        _ => Err(CtldError::NotInSlurmctld),
    }
}

/// A change to a pending job, applied by slurmctld's own `update_job()` as root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobUpdate {
    /// Job to change.
    pub job_id: u32,
    /// New feature expression (e.g. `"a100"`); `Some("")` clears.
    pub features: Option<String>,
    /// New per-node GRES as users write it (e.g. `"gpu:4"`; untyped: typed GRES updates leave jobs unrunnable).
    pub gres: Option<String>,
    /// New AdminComment.
    pub admin_comment: Option<String>,
    /// New min nodes.
    pub min_nodes: Option<u32>,
    /// New max nodes.
    pub max_nodes: Option<u32>,
    /// New task count.
    pub num_tasks: Option<u32>,
    /// New time limit in minutes.
    pub time_limit_min: Option<u32>,
    /// New earliest begin time (Unix seconds), e.g. now for a requeued job
    /// Slurm would hold back for the credential window.
    pub begin_time: Option<i64>,
}

/// Applies `u` (caller holds the [`LockKind::Write`] locks, e.g. inside [`with_lock`]).
pub fn update_job(u: &JobUpdate) -> Result<(), CtldError> {
    if !in_slurmctld() {
        return Err(CtldError::NotInSlurmctld);
    }
    let cs = |o: &Option<String>| o.as_deref().map(to_cstring).transpose();
    let (features, gres, comment): (Option<CString>, Option<CString>, Option<CString>) =
        (cs(&u.features)?, cs(&u.gres)?, cs(&u.admin_comment)?);
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    let mut raw = unsafe { std::mem::zeroed::<s::cellsched_job_update_t>() };
    unsafe { s::cellsched_job_update_init(&mut raw, u.job_id) };
    raw.features = ptr(&features);
    raw.gres = ptr(&gres);
    raw.admin_comment = ptr(&comment);
    raw.min_nodes = u.min_nodes.unwrap_or(slurm_sys::NO_VAL);
    raw.max_nodes = u.max_nodes.unwrap_or(slurm_sys::NO_VAL);
    raw.num_tasks = u.num_tasks.unwrap_or(slurm_sys::NO_VAL);
    raw.time_limit = u.time_limit_min.unwrap_or(slurm_sys::NO_VAL);
    raw.begin_time = u.begin_time.unwrap_or(0);
    match unsafe { s::cellsched_update_job(&raw) } {
        0 => Ok(()),
        -1 => Err(CtldError::NotInSlurmctld),
        code => Err(CtldError::UpdateFailed { job_id: u.job_id, code }),
    }
}

/// A copy of one node's scheduling facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Active features (comma separated as configured).
    pub features: Option<String>,
    /// Configured GRES, e.g. `gpu:a100:4`.
    pub gres: Option<String>,
    /// GRES in use, e.g. `gpu:a100:2(IDX:0-1)`.
    pub gres_used: Option<String>,
    /// `node_state`.
    pub state: u32,
    /// Usable for new work (registered; not down/drained/failed/future/not responding).
    pub available: bool,
    /// CPUs.
    pub cpus: u16,
}

/// Entries in the node table (0 outside slurmctld).
pub fn node_count() -> usize {
    usize::try_from(unsafe { s::cellsched_node_count() }).unwrap_or(0)
}

/// Copies the node table (caller holds at least the node read lock). Empty outside slurmctld.
pub fn nodes() -> Vec<NodeInfo> {
    let n = unsafe { s::cellsched_node_count() };
    let own = |p| unsafe { borrow_str(p) }.map(str::to_string);
    (0..n)
        .filter_map(|i| unsafe {
            let name = own(s::cellsched_node_name(i))?;
            Some(NodeInfo {
                name,
                features: own(s::cellsched_node_features(i)),
                gres: own(s::cellsched_node_gres(i)),
                gres_used: take_xstr(s::cellsched_node_gres_used(i)),
                state: s::cellsched_node_state(i),
                available: s::cellsched_node_is_available(i) == 1,
                cpus: s::cellsched_node_cpus(i),
            })
        })
        .collect()
}

/// slurmctld's `last_node_update` (Unix seconds): it changes whenever a
/// node's state or allocation changes (a job starts or ends, a node goes
/// down). `None` outside slurmctld. Read it under the node read lock.
pub fn last_node_update() -> Option<i64> {
    let t = unsafe { s::cellsched_last_node_update() };
    (t >= 0).then_some(t)
}

/// Sets `name=value` in a job descriptor's `spank_job_env` (job_submit), keeping its size in step.
pub fn desc_env_set(desc: &mut slurm_sys::job_desc_msg_t, name: &str, value: &str) -> Result<(), CtldError> {
    let (n, v) = (to_cstring(name)?, to_cstring(value)?);
    let rc = unsafe {
        s::cellsched_env_array_set(&mut desc.spank_job_env, &mut desc.spank_job_env_size, n.as_ptr(), v.as_ptr())
    };
    match rc {
        0 => Ok(()),
        _ => Err(CtldError::SetFailed { field: "spank_job_env", job_id: desc.job_id }),
    }
}

/// Sets `name=value` in a job descriptor's `environment` (job_submit): the
/// batch script's environment, saved with the job. Only batch jobs
/// ([`desc_is_batch`]) use it; `Ok(false)` (nothing set) for others.
pub fn desc_environment_set(desc: &mut slurm_sys::job_desc_msg_t, name: &str, value: &str) -> Result<bool, CtldError> {
    if !desc_is_batch(desc) {
        return Ok(false);
    }
    let (n, v) = (to_cstring(name)?, to_cstring(value)?);
    let rc = unsafe { s::cellsched_env_array_set(&mut desc.environment, &mut desc.env_size, n.as_ptr(), v.as_ptr()) };
    match rc {
        0 => Ok(true),
        _ => Err(CtldError::SetFailed { field: "environment", job_id: desc.job_id }),
    }
}

/// True when the descriptor submits a batch job (it carries a script).
pub fn desc_is_batch(desc: &slurm_sys::job_desc_msg_t) -> bool {
    !desc.script.is_null()
}

/// `spank_job_env` entries of a job descriptor.
pub fn desc_env(desc: &slurm_sys::job_desc_msg_t) -> Vec<&str> {
    if desc.spank_job_env.is_null() {
        return Vec::new();
    }
    (0..desc.spank_job_env_size as usize)
        .filter_map(|i| unsafe { borrow_str(*desc.spank_job_env.add(i)) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_slurmctld_nothing_runs() {
        assert!(!in_slurmctld());
        assert_eq!(with_lock(LockKind::Write, || 1), Err(CtldError::NotInSlurmctld));
        assert_eq!(for_each_job(true, |_| ControlFlow::Continue(())), None);
        assert_eq!(for_each_job_in_pieces(LockKind::Read, true, PIECE_HOLD, |_| panic!("no jobs here")), Err(CtldError::NotInSlurmctld));
        assert_eq!(with_job(1, |j| j.id()), None);
        assert_eq!(queue_scheduler(), Err(CtldError::NotInSlurmctld));
        assert_eq!(update_job(&JobUpdate { job_id: 1, ..Default::default() }), Err(CtldError::NotInSlurmctld));
        assert_eq!(signal_job(1, 10), Err(CtldError::NotInSlurmctld));
        assert_eq!(requeue_job(1), Err(CtldError::NotInSlurmctld));
        assert!(nodes().is_empty());
        assert_eq!(last_node_update(), None);
        assert_eq!(node_count(), 0);
    }

    #[test]
    fn job_phases_from_job_state() {
        // slurm.h: JOB_PENDING 0, JOB_RUNNING 1, JOB_SUSPENDED 2, JOB_COMPLETE 3, JOB_CANCELLED 4, JOB_COMPLETING 0x8000.
        assert_eq!(JobPhase::of(0), JobPhase::Pending);
        assert_eq!(JobPhase::of(0x8000), JobPhase::PendingCompleting);
        assert_eq!(JobPhase::of(1), JobPhase::Running);
        assert_eq!(JobPhase::of(2), JobPhase::Running);
        assert_eq!(JobPhase::of(3 | 0x8000), JobPhase::Ended);
        assert_eq!(JobPhase::of(4), JobPhase::Ended);
    }

    #[test]
    fn desc_env_reads_entries() {
        let mut entries: Vec<*mut std::os::raw::c_char> =
            [c"SPANK_CELLSCHED_DL_MODEL=bert".as_ptr(), c"X=1".as_ptr()].iter().map(|p| *p as *mut _).collect();
        let desc = slurm_sys::job_desc_msg_t {
            spank_job_env: entries.as_mut_ptr(),
            spank_job_env_size: 2,
            ..Default::default()
        };
        let env = desc_env(&desc);
        assert_eq!(env, vec!["SPANK_CELLSCHED_DL_MODEL=bert", "X=1"]);
        assert_eq!(job_env::lookup_entries(env.iter().copied(), "CELLSCHED_DL_MODEL"), Some("bert"));
    }

    #[test]
    fn desc_environment_only_for_batch_jobs() {
        let mut entries: Vec<*mut std::os::raw::c_char> = vec![c"A=1".as_ptr() as *mut _, std::ptr::null_mut()];
        let mut desc = slurm_sys::job_desc_msg_t { environment: entries.as_mut_ptr(), env_size: 1, ..Default::default() };
        assert!(!desc_is_batch(&desc));
        // No script: not a batch job, nothing is set (and no Slurm allocator is needed).
        assert_eq!(desc_environment_set(&mut desc, "B", "2"), Ok(false));
        assert_eq!(desc.env_size, 1);
        desc.script = c"#!/bin/sh".as_ptr() as *mut _;
        assert!(desc_is_batch(&desc));
    }
}

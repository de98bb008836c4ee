//! The plugins' background threads give the CPU to slurmctld's own threads.
//!
//! The ranking and re-planning passes are periodic work nobody waits for,
//! while slurmctld's main scheduler, backfill and RPC threads are what users
//! wait on. On a busy controller a pass that runs beside the main scheduler
//! takes a core from it; [`yield_cpu_to_slurmctld`] makes the calling thread
//! a batch thread at a lower priority (`SCHED_BATCH`, nice
//! [`BACKGROUND_NICE`]), so the kernel runs slurmctld's threads first and
//! the pass in what is left. slurmctld's threads are unchanged.

/// Nice value of the plugins' background threads (slurmctld's run at 0).
pub const BACKGROUND_NICE: i32 = 10;

/// Makes the calling thread `SCHED_BATCH` at nice [`BACKGROUND_NICE`] (or
/// its current nice, when that is higher).
/// Lowering a thread's priority needs no privilege; an error says which call
/// failed (the thread then keeps running at its old priority).
pub fn yield_cpu_to_slurmctld() -> Result<(), String> {
    // SAFETY: plain syscalls on the calling thread with valid arguments.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) != 0 {
            return Err(format!("sched_setscheduler(SCHED_BATCH): {}", std::io::Error::last_os_error()));
        }
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // Never raise it: a slurmctld started at a higher nice keeps that.
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        let now = if now == -1 && *libc::__errno_location() != 0 { 0 } else { now };
        if libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE.max(now)) != 0 {
            return Err(format!("setpriority(nice {BACKGROUND_NICE}): {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// [`yield_cpu_to_slurmctld`] for a plugin's background thread, logging
/// through Slurm (`"<plugin>: the <thread> thread keeps slurmctld's CPU
/// priority: <why>"`) when it cannot.
pub fn yield_cpu_or_log(plugin: &str, thread: &str) {
    if let Err(e) = yield_cpu_to_slurmctld() {
        crate::log::info(&format!("{plugin}: the {thread} thread keeps slurmctld's CPU priority: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread, and only it, becomes a batch thread at nice 10.
    #[test]
    fn lowers_only_the_calling_thread() {
        let main_tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
        let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, main_tid) };
        let (policy, nice) = std::thread::spawn(|| {
            yield_cpu_to_slurmctld().expect("lowering the priority");
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
            unsafe { (libc::sched_getscheduler(0), libc::getpriority(libc::PRIO_PROCESS, tid)) }
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_BATCH);
        assert_eq!(nice, BACKGROUND_NICE.max(before));
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, main_tid) }, before);
        assert_ne!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_BATCH);
    }
}

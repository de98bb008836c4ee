//! Ctrl-C / SIGTERM during a replay: a flag the loops check, so the run
//! cancels its jobs and brings the cluster down instead of dying mid-way.
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT/SIGTERM handler (a second Ctrl-C still sets the flag only).
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether a stop was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Sets the flag as a signal would (for tests and callers that stop a run).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

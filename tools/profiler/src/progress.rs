//! The terminal progress bar of a profiling run (indicatif; hidden when
//! stderr is not a terminal).
use crate::runner::Progress;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// A bar over the run's time limit; returns it and the callback that feeds it.
pub fn bar(limit: Duration) -> (ProgressBar, impl FnMut(Progress)) {
    let pb = ProgressBar::new(limit.as_secs().max(1));
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}s {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let p2 = pb.clone();
    let cb = move |p: Progress| {
        p2.set_position(p.elapsed.as_secs().min(p2.length().unwrap_or(u64::MAX)));
        let last = p
            .last_s
            .map(|s| format!(", last {s:.4} s"))
            .unwrap_or_default();
        p2.set_message(format!("{} iterations{last}", p.iters));
    };
    (pb, cb)
}

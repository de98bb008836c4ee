//! A progress bar for long simulations (stderr; hidden when stderr is not a terminal).
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A callback for [`crate::Sim::run`] drawing "arrived/total jobs".
pub fn bar(label: &str) -> impl FnMut(u64, u64) {
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} jobs ({elapsed})") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(label.to_string());
    move |done, total| {
        pb.set_length(total);
        pb.set_position(done);
        if done >= total {
            pb.finish_and_clear();
        }
    }
}

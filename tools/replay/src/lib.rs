//! cellsched-replay: replays a small job trace on the live local Slurm
//! cluster twice — stock Slurm with the users' own typed GRES, then with
//! cellsched's plugins choosing the Cells — and compares the two from
//! `sacct`, next to the simulator's view of the same trace.
//!
//! - [`workload`]: trace rows → compressed submission times and `sbatch`
//!   arguments per [`workload::Mode`] (pure, unit tested);
//! - [`runner`]: cluster up per mode, timed submissions, polling, stuck-job
//!   and timeout handling, cluster down;
//! - [`slurm`]: the client commands with a clean environment;
//! - [`results`]: per-mode statistics (via `cellsched-report`), ratios, tables;
//! - [`sim`]: the simulator's `slurm` vs `cellsched` on the same trace;
//! - [`interrupt`]: Ctrl-C handling so a run always cleans up.
pub mod error;
pub mod interrupt;
pub mod results;
pub mod runner;
pub mod sim;
pub mod slurm;
pub mod workload;

pub use error::ReplayError;
pub use results::{Comparison, ModeResult, Ratios, SimSide};
pub use runner::{run_modes, LiveOptions};
pub use workload::{prepare, Mode, ReplayJob, Settings};

/// Node shapes of a live cluster spec: `type → (gpus_per_node, nodes)`.
pub fn shapes_of_cluster(spec: &cellsched_cluster::ClusterSpec) -> std::collections::BTreeMap<String, (u32, u32)> {
    let mut m = std::collections::BTreeMap::new();
    for g in &spec.groups {
        let e = m.entry(g.gpu_type.clone()).or_insert((g.gpus_per_node, 0));
        e.0 = e.0.max(g.gpus_per_node);
        e.1 += g.count;
    }
    m
}

/// The emulated trainer the replay submits (`etc/examples/emulated-train.sh`),
/// run directly: its plan handling is part of what the replay measures.
#[cfg(test)]
mod emulated_trainer_tests {
    use std::path::PathBuf;
    use std::process::Command;

    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../etc/examples/emulated-train.sh")
    }

    fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut c = Command::new("bash");
        c.arg(script()).args(args);
        for k in ["CELLSCHED_ITER_TIME_S", "CELLSCHED_FREEZE_SCHEDULE", "CELLSCHED_FREEZE_MODE", "CELLSCHED_DL_ITERS", "CELLSCHED_PLAN_FILE", "CELLSCHED_EMU_SCALE"] {
            c.env_remove(k);
        }
        c.envs(env.iter().copied());
        let o = c.output().expect("bash runs");
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
    }

    #[test]
    fn injected_plan_wins_and_freezing_speeds_up_late_chunks() {
        // 400 iterations × 1.05 (auto penalty) = 420, 1 s each, scale 0.005:
        // chunks of 100 start at progress 0, .24, .48, .71, .95; half the
        // layers freeze at 0.5 → the last two chunks run at 1 - 2/3 × 0.5.
        let env = [
            ("CELLSCHED_ITER_TIME_S", "1.0"),
            ("CELLSCHED_FREEZE_MODE", "auto"),
            ("CELLSCHED_FREEZE_SCHEDULE", "0.5:0.5"),
            ("CELLSCHED_EMU_SCALE", "0.005"),
        ];
        let (rc, out, err) = run(&["--iters", "400", "--iter-time", "9"], &env);
        assert_eq!(rc, 0, "{err}");
        let iters: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("cellsched-iter ")).collect();
        assert_eq!(iters, ["1.000000", "1.000000", "1.000000", "0.666667", "0.666667"], "{out}");
        assert!(out.contains("done: 420 iterations, 380.0 predicted s"), "{out}");
        assert!(out.contains("(plan (cellsched))"), "{out}");
    }

    #[test]
    fn stock_mode_uses_the_declared_time_and_bad_input_is_refused() {
        let (rc, out, err) = run(&["--iters", "10", "--iter-time", "0.05", "--scale", "1", "--quiet"], &[]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("declared (--iter-time)") && out.contains("done: 10 iterations, 0.5 predicted s"), "{out}");
        assert!(!out.contains("cellsched-iter"), "--quiet prints no per-chunk lines: {out}");
        let (rc, _, err) = run(&["--iters", "10"], &[]);
        assert_eq!(rc, 2);
        assert!(err.contains("no iteration time"), "{err}");
        let (rc, _, err) = run(&["--iters", "-3", "--iter-time", "1"], &[]);
        assert_eq!(rc, 2);
        assert!(err.contains("--iters must be a positive integer"), "{err}");
        let (rc, _, err) = run(&["--iters", "3", "--iter-time", "1"], &[("CELLSCHED_FREEZE_SCHEDULE", "half")]);
        assert_eq!(rc, 2);
        assert!(err.contains("CELLSCHED_FREEZE_SCHEDULE 'half'"), "{err}");
    }
}

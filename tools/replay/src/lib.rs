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
//! - [`jobs`]: per-job times live and simulated on one clock, compared;
//! - [`interrupt`]: Ctrl-C handling so a run always cleans up.
#![deny(missing_docs)]
mod error;
pub mod interrupt;
pub mod jobs;
pub mod results;
pub mod runner;
pub mod sim;
mod slurm;
pub mod workload;

pub use error::ReplayError;
pub use results::{Comparison, ModeResult, Ratios, SimSide};
pub use runner::{run_modes, LiveOptions};
pub use workload::{prepare, Mode, ReplayJob, Settings};

/// Node shapes of a live cluster spec: `type → (gpus_per_node, nodes)`.
pub fn shapes_of_cluster(spec: &cellsched_devcluster::LocalClusterSpec) -> std::collections::BTreeMap<String, (u32, u32)> {
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
        for (k, _) in std::env::vars() {
            if k.starts_with("CELLSCHED_") || k.starts_with("SLURM") {
                c.env_remove(k);
            }
        }
        c.envs(env.iter().copied());
        let o = c.output().expect("bash runs");
        (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into(), String::from_utf8_lossy(&o.stderr).into())
    }

    /// A truth table in a temp file: resnet50 batch 128 takes 1 s on one
    /// v100 and 0.5 s on 2 v100s on one node; batch 512 does not fit on k80.
    /// Removes the truth table's temp dir when dropped.
    struct TempTruth(PathBuf);

    impl Drop for TempTruth {
        fn drop(&mut self) {
            if let Some(d) = self.0.parent() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }

    fn truth() -> (TempTruth, String) {
        let d = std::env::temp_dir().join(format!("cs-emu-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("truth.csv");
        std::fs::write(&p, "# test truth\nmodel,batch,gpu_type,nodes,gpus_per_node,iter_time_s\nresnet50,128,v100,1,1,1.0\nresnet50,128,v100,1,2,0.5\nresnet50,512,k80,1,4,0\n").unwrap();
        let s = p.display().to_string();
        (TempTruth(p), s)
    }

    #[test]
    fn runs_at_the_measured_speed_of_the_granted_gpus_not_the_injected_prediction() {
        // 400 iterations × 1.05 (auto penalty) = 420 at the measured 0.5 s on
        // 2 v100 (the injected prediction, 9 s, is ignored), scale 0.005:
        // chunks of 200 start at progress 0, .48, .95; half the layers
        // freeze at 0.5 → the last chunk (20 iterations) runs at 1 - 2/3 × 0.5:
        // 400 × 0.5 + 20 × 0.5/3 = 206.7 measured s.
        let (_p, t) = truth();
        let env = [
            ("CELLSCHED_ITER_TIME_S", "9.0"),
            ("CELLSCHED_GPU_TYPE", "v100"),
            ("SLURM_GPUS_ON_NODE", "2"),
            ("SLURM_JOB_NUM_NODES", "1"),
            ("CELLSCHED_FREEZE_MODE", "auto"),
            ("CELLSCHED_FREEZE_SCHEDULE", "0.5:0.5"),
            ("CELLSCHED_EMU_SCALE", "0.005"),
        ];
        let (rc, out, err) = run(&["--iters", "400", "--model", "resnet50", "--batch", "128", "--truth", &t], &env);
        assert_eq!(rc, 0, "{err}");
        let iters: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("cellsched-iter ")).collect();
        assert_eq!(iters, ["0.500000", "0.500000", "0.333333"], "{out}");
        assert!(out.contains("iter_time_s=0.5 (measured") && out.contains("predicted=9.0 (injected, not used)"), "{out}");
        assert!(out.contains("done: 420 iterations, 206.7 measured s"), "{out}");
        // The same job granted one v100 runs at that Cell's measured speed.
        let (rc, out, err) = run(&["--iters", "10", "--model", "ResNet50", "--batch", "128", "--truth", &t, "--gpu-type", "V100", "--gpus-per-node", "1", "--quiet"], &[]);
        assert_eq!(rc, 0, "{err}");
        assert!(out.contains("done: 10 iterations, 10.0 measured s"), "{out}");
        assert!(!out.contains("cellsched-iter"), "--quiet prints no per-chunk lines: {out}");
        // GPUs per node from SLURM_JOB_GPUS when SLURM_GPUS_ON_NODE is absent.
        let (rc, out, _) = run(&["--iters", "2", "--model", "resnet50", "--batch", "128", "--truth", &t, "--gpu-type", "v100", "--scale", "0.001"], &[("SLURM_JOB_GPUS", "0,1")]);
        assert!(rc == 0 && out.contains("gpus_per_node=2"), "{out}");
    }

    #[test]
    fn missing_points_and_no_fit_fail_clearly_never_inventing_a_speed() {
        let (_p, t) = truth();
        let (rc, _, err) = run(&["--iters", "10", "--model", "resnet50", "--batch", "128", "--truth", &t, "--gpu-type", "a100", "--gpus-per-node", "2"], &[("CELLSCHED_ITER_TIME_S", "0.1")]);
        assert_eq!(rc, 4, "{err}");
        assert!(err.contains("no measured iteration time for model=resnet50 batch=128 gpu_type=a100 nodes=1 gpus_per_node=2") && err.contains("refusing to invent a speed"), "{err}");
        let (rc, _, err) = run(&["--iters", "10", "--model", "resnet50", "--batch", "512", "--truth", &t, "--gpu-type", "k80", "--gpus-per-node", "4"], &[]);
        assert_eq!(rc, 3, "{err}");
        assert!(err.contains("does not fit in memory"), "{err}");
        for (args, needle) in [
            (vec!["--iters", "10", "--model", "resnet50", "--batch", "128", "--gpu-type", "v100", "--gpus-per-node", "1"], "no truth table"),
            (vec!["--iters", "-3", "--model", "resnet50", "--batch", "128", "--truth", &t], "--iters must be a positive integer"),
            (vec!["--iters", "3", "--batch", "128", "--truth", &t], "no model"),
            (vec!["--iters", "3", "--model", "resnet50", "--batch", "128", "--truth", &t, "--gpus-per-node", "1"], "granted GPU type unknown"),
            (vec!["--iters", "3", "--model", "resnet50", "--batch", "128", "--truth", "/nonexistent/t.csv"], "not readable"),
        ] {
            let (rc, _, err) = run(&args, &[]);
            assert_eq!(rc, 2, "{args:?}: {err}");
            assert!(err.contains(needle), "{args:?}: {err}");
        }
        let (rc, _, err) = run(&["--iters", "3", "--model", "resnet50", "--batch", "128", "--truth", &t, "--gpu-type", "v100", "--gpus-per-node", "1"], &[("CELLSCHED_FREEZE_SCHEDULE", "half")]);
        assert_eq!(rc, 2);
        assert!(err.contains("CELLSCHED_FREEZE_SCHEDULE 'half'"), "{err}");
    }
}

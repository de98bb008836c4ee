//! Converts Gavel's Philly-derived traces (`philly-*.trace`) into the trace CSV.
//!
//! Input: tab-separated, 7 fields per line: job type (`ResNet-50 (batch size
//! 64)`), command, step-argument name, needs-data-dir flag, total steps,
//! arrival time (s), GPU count. Assumptions (documented in the output's
//! conversion report):
//! - model: the job type's name before ` (batch size N)` mapped through the
//!   model catalog's aliases (`ResNet-50` → `resnet50`, `LM` →
//!   `lstm_wikitext2`, `Recommendation` → `autoencoder_ml20m`, ...); Gavel's
//!   `N` is the per-worker batch, so the global batch is `N` x GPU count
//!   (A3C: 4 and CycleGAN: 1 per worker, which Gavel names without a batch size);
//! - `num_iteration` = total steps; `submission_time` = arrival time;
//!   `num_gpu` = GPU count; `job_id` = line number;
//! - `gpu_type`: Philly jobs name no GPU type, so each job asks for a type
//!   drawn (seeded) in proportion to the cluster's GPUs of each type among
//!   the types where its request fits (all types if it fits none: such jobs
//!   are kept, and the simulator reports them as unfinished);
//! - `deadline` (declared time limit): 1.5-3x the true run time on the
//!   requested GPUs, rounded up to minutes (users over-estimate); 0 (none)
//!   for jobs that fit nowhere.
use crate::cluster::{ClusterSpec, ClusterState};
use crate::error::SimError;
use crate::rng::Rng;
use crate::times::TimeCache;
use crate::trace::TraceJob;

/// What a conversion did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvertReport {
    /// Jobs written.
    pub jobs: usize,
    /// Jobs (kept) whose request fits no GPU type of the cluster.
    pub infeasible: usize,
}

fn split_type(s: &str) -> (String, Option<u32>) {
    match s.split_once(" (batch size ") {
        Some((name, rest)) => (name.trim().to_string(), rest.trim_end_matches(')').trim().parse().ok()),
        None => (s.trim().to_string(), None),
    }
}

/// Converts trace text; `canonical` maps a model name or alias to its catalog name.
pub fn convert_gavel(
    text: &str,
    path: &str,
    spec: &ClusterSpec,
    times: &mut TimeCache,
    canonical: &dyn Fn(&str) -> Option<String>,
    seed: u64,
) -> Result<(Vec<TraceJob>, ConvertReport), SimError> {
    let c = ClusterState::new(spec);
    let mut rng = Rng::new(seed);
    let mut jobs = Vec::new();
    let mut report = ConvertReport::default();
    for (n, line) in text.lines().enumerate() {
        let lineno = Some(n + 1);
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 7 {
            return Err(SimError::input(path, lineno, "line", format!("has {} tab-separated fields, expected 7", f.len())));
        }
        let (name, batch) = split_type(f[0]);
        let model = canonical(&name)
            .ok_or_else(|| SimError::input(path, lineno, "job type", format!("'{name}' is not a catalog model or alias")))?;
        let per_worker = batch.unwrap_or(if model.starts_with("a3c") { 4 } else { 1 });
        let steps: u64 = f[4].trim().parse().ok().filter(|s| *s > 0)
            .ok_or_else(|| SimError::input(path, lineno, "total steps", format!("'{}' is not a positive integer", f[4])))?;
        let arrival: f64 = f[5].trim().parse().ok().filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| SimError::input(path, lineno, "arrival time", format!("'{}' is not a non-negative number", f[5])))?;
        let gpus: u32 = f[6].trim().parse().ok().filter(|g| *g > 0)
            .ok_or_else(|| SimError::input(path, lineno, "GPU count", format!("'{}' is not a positive integer", f[6])))?;
        let batch = per_worker * gpus;
        // Types where the request fits, weighted by their GPU capacity.
        let mut opts = Vec::new();
        for t in 0..c.types.len() {
            if let Some(s) = c.place_idle(t, gpus) {
                if let Some(it) = times.iter_time(&model, batch, &c.types[t], s.nodes, s.gpus_per_node) {
                    opts.push((t, it, c.total_of_type(t) as f64));
                }
            }
        }
        let (t, limit) = if opts.is_empty() {
            report.infeasible += 1;
            log::debug!("{path}:{}: {model} (batch {batch}) on {gpus} GPUs fits no GPU type of the cluster", n + 1);
            let w: Vec<f64> = (0..c.types.len()).map(|t| c.total_of_type(t) as f64).collect();
            (rng.weighted(&w), 0.0)
        } else {
            let w: Vec<f64> = opts.iter().map(|o| o.2).collect();
            let (t, iter_s, _) = opts[rng.weighted(&w)];
            (t, (((steps as f64 * iter_s * rng.range(1.5, 3.0)) / 60.0).ceil() * 60.0).max(60.0))
        };
        jobs.push(TraceJob {
            job_id: (n + 1).to_string(),
            submission_time: arrival,
            num_iteration: steps,
            model_name: model,
            deadline: limit,
            batch_size: batch,
            num_gpu: gpus,
            gpu_type: c.types[t].clone(),
            user: None,
            freeze: None,
            due_s: None,
            elastic: false,
        });
    }
    report.jobs = jobs.len();
    Ok((jobs, report))
}

/// Builds a truth table from Gavel's measured throughputs
/// (`simulation_throughputs.json`): for each consolidated worker type (`k80`,
/// `p100`, `v100`; the `*_unconsolidated` entries are left out) and each
/// `('<Model> (batch size N)', scale)` key, the isolated throughput (`null`
/// entry, steps/s of `scale` workers, each with batch N) becomes one point:
/// model through `canonical`, global batch `N x scale` (A3C: 4, CycleGAN: 1
/// per worker, as in [`convert_gavel`]), one node of `scale` GPUs,
/// `scale / throughput` seconds per iteration. Keys whose model `canonical`
/// does not know are errors naming them.
pub fn throughputs_to_truth(
    text: &str,
    path: &str,
    canonical: &dyn Fn(&str) -> Option<String>,
) -> Result<crate::truth::TruthTable, SimError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| SimError::input(path, Some(e.line()), "json", e.to_string()))?;
    let mut t = crate::truth::TruthTable::new(path);
    for gpu in ["k80", "p100", "v100"] {
        let Some(obj) = v.get(gpu).and_then(|o| o.as_object()) else {
            return Err(SimError::input(path, None, gpu, "missing worker type"));
        };
        for (key, val) in obj {
            let bad = |msg: &str| SimError::input(path, None, &format!("{gpu}/{key}"), msg.to_string());
            let inner = key.trim_start_matches("('");
            let (job, rest) = inner.split_once("',").ok_or_else(|| bad("is not ('<job type>', scale)"))?;
            let scale: u32 = rest.trim().trim_end_matches(')').trim().parse().ok().filter(|s| *s > 0).ok_or_else(|| bad("scale is not a positive integer"))?;
            let (name, bs) = split_type(job);
            let model = canonical(&name).ok_or_else(|| bad(&format!("'{name}' is not a catalog model or alias")))?;
            let per_worker = bs.unwrap_or(if model.starts_with("a3c") { 4 } else { 1 });
            let tput = val.get("null").and_then(|x| x.as_f64()).ok_or_else(|| bad("has no isolated ('null') throughput"))?;
            let iter_time_s = (tput > 0.0 && tput.is_finite()).then(|| scale as f64 / tput);
            t.insert(crate::truth::TruthPoint { model, batch: per_worker * scale, gpu_type: gpu.into(), nodes: 1, gpus_per_node: scale, iter_time_s });
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_times::CoreTimes;

    #[test]
    fn gavel_throughputs_become_truth_points() {
        let spec = ClusterSpec::parse("[[group]]\ngpu_type = \"v100\"\nnodes = 1\ngpus_per_node = 8\n", "c").unwrap();
        let ct = CoreTimes::new(&spec, None).unwrap();
        let canon = |n: &str| ct.estimator().model_catalog().canonical_name(n).map(str::to_string);
        let json = r#"{"k80": {"('ResNet-50 (batch size 64)', 4)": {"null": 2.0}}, "p100": {"('A3C', 1)": {"null": 10.0, "x": [1, 1]}},
                      "v100": {}, "v100_unconsolidated": {"('ResNet-50 (batch size 64)', 4)": {"null": 9.0}}}"#;
        let t = throughputs_to_truth(json, "g.json", &canon).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup("resnet50", 256, "k80", 1, 4), Some(Some(2.0)));
        assert_eq!(t.lookup("a3c_pong", 4, "p100", 1, 1), Some(Some(0.1)));
        let e = throughputs_to_truth(r#"{"k80": {"('Foo', 1)": {"null": 1}}, "p100": {}, "v100": {}}"#, "g.json", &canon).unwrap_err();
        assert!(e.to_string().contains("g.json") && e.to_string().contains("Foo"), "{e}");
        let e = throughputs_to_truth(r#"{"k80": {}}"#, "g.json", &canon).unwrap_err();
        assert!(e.to_string().contains("p100"), "{e}");
    }

    #[test]
    fn converts_lines_and_names_bad_ones() {
        let spec = ClusterSpec::parse("[[group]]\ngpu_type = \"v100\"\nnodes = 2\ngpus_per_node = 8\n", "c").unwrap();
        let ct = CoreTimes::new(&spec, None).unwrap();
        let canon = |n: &str| ct.estimator().model_catalog().canonical_name(n).map(str::to_string);
        let mut t = TimeCache::new(Box::new(CoreTimes::new(&spec, None).unwrap()));
        let text = "ResNet-50 (batch size 64)\tcmd\t-n\t1\t1000\t5.000000\t4\nA3C\tcmd\t-n\t0\t200\t7\t1\n";
        let (jobs, rep) = convert_gavel(text, "p.trace", &spec, &mut t, &canon, 1).unwrap();
        assert_eq!(rep, ConvertReport { jobs: 2, infeasible: 0 });
        assert_eq!((jobs[0].model_name.as_str(), jobs[0].batch_size, jobs[0].num_gpu), ("resnet50", 256, 4));
        assert_eq!((jobs[0].submission_time, jobs[0].num_iteration, jobs[0].gpu_type.as_str()), (5.0, 1000, "v100"));
        assert!(jobs[0].deadline >= 60.0);
        assert_eq!((jobs[1].model_name.as_str(), jobs[1].batch_size), ("a3c_pong", 4));
        // 32 GPUs fit nowhere on 16: kept, no declared limit.
        let (jobs, rep) = convert_gavel("ResNet-50 (batch size 64)\tc\t-n\t1\t10\t0\t32\n", "p.trace", &spec, &mut t, &canon, 1).unwrap();
        assert_eq!((rep.infeasible, jobs.len(), jobs[0].deadline), (1, 1, 0.0));
        let e = convert_gavel("Foo (batch size 2)\tc\t-n\t1\t10\t0\t1\n", "p.trace", &spec, &mut t, &canon, 1).unwrap_err();
        assert!(e.to_string().contains("p.trace:1") && e.to_string().contains("Foo"), "{e}");
        let e = convert_gavel("ResNet-50 (batch size 64)\tc\t-n\t1\tx\t0\t1\n", "p.trace", &spec, &mut t, &canon, 1).unwrap_err();
        assert!(e.to_string().contains("total steps"), "{e}");
    }
}

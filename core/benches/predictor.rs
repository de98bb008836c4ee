//! Benchmark of the A-SRPT scheduling helpers: random-forest iteration
//! predictor (fit and predict times, holdout error against naive baselines)
//! on synthetic recurring-job histories, and the cost of `asrpt::order` on
//! large pending queues. Prints measurements; asserts nothing.
//!
//! Run: `cargo bench -p cellsched-core --bench predictor`
use cellsched_core::asrpt::{order, AsrptConfig, PendingJob};
use cellsched_core::history::{synthetic, SyntheticSpec};
use cellsched_core::rng::SplitMix64;
use cellsched_core::predictor::{evaluate_holdout, HistoryQuery, IterationPredictor};
use std::hint::black_box;
use std::time::Instant;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    println!("== iteration predictor (random forest, 60 trees; synthetic recurring-job history) ==");
    println!("{:>7} {:>5} {:>6} {:>9} {:>11}  holdout (20%)", "records", "users", "noise", "fit_ms", "predict_us");
    for &(records, users, noise) in
        &[(500, 20, 0.10), (2000, 40, 0.10), (2000, 40, 0.30), (10_000, 150, 0.10), (10_000, 150, 0.30)]
    {
        let spec = SyntheticSpec { users, records, noise, seed: 42, ..Default::default() };
        let recs = synthetic(&spec);
        let t = Instant::now();
        let p = IterationPredictor::fit(&recs);
        let fit_ms = ms(t);
        let queries: Vec<HistoryQuery> = recs.iter().take(1000).map(HistoryQuery::from).collect();
        let t = Instant::now();
        let mut sum = 0.0;
        for q in &queries {
            sum += p.predict(black_box(q)).unwrap_or(0.0);
        }
        black_box(sum);
        let predict_us = ms(t) * 1e3 / queries.len() as f64;
        let report = evaluate_holdout(&recs, 0.2, 7).expect("holdout");
        println!("{records:>7} {users:>5} {noise:>6.2} {fit_ms:>9.1} {predict_us:>11.2}  {report}");
    }
    let recs = synthetic(&SyntheticSpec { users: 40, records: 2000, seed: 42, ..Default::default() });
    if let Some(imp) = IterationPredictor::fit(&recs).feature_importances() {
        let top: Vec<String> = imp.iter().take(5).map(|(n, v)| format!("{n}={:.2}", v)).collect();
        println!("feature importances (2000 records): {}", top.join(" "));
    }

    println!("\n== A-SRPT order (sort + priorities) ==");
    let cfg = AsrptConfig { aging_bound_s: 86_400.0, ..Default::default() };
    for &n in &[1_000usize, 10_000, 100_000] {
        let mut rng = SplitMix64::new(n as u64);
        let jobs: Vec<PendingJob> = (0..n)
            .map(|i| PendingJob {
                id: i as u32,
                submit_time_s: 200_000.0 * rng.next_f64(),
                remaining_s: 10f64.powf(1.0 + 5.0 * rng.next_f64()),
                gpus: 1,
                deadline_s: None,
            })
            .collect();
        let reps = (200_000 / n).max(3);
        let t = Instant::now();
        for _ in 0..reps {
            black_box(order(black_box(&jobs), 200_000.0, &cfg));
        }
        let per = ms(t) / reps as f64;
        let aged = jobs.iter().filter(|j| 200_000.0 - j.submit_time_s > cfg.aging_bound_s).count();
        println!("{n:>7} jobs ({aged} aged): {per:.3} ms per order() ({:.0} ns/job)", per * 1e6 / n as f64);
    }
}

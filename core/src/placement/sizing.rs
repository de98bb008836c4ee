//! Cell sizing by marginal value: how many GPUs (and which type) a job gets.
//!
//! The estimator ranks every feasible Cell fastest first; taking the head of
//! that list hands a job every GPU that makes it a little faster (a batch-8
//! 350M model got 8 A100s over 2 nodes), and the GPUs it barely uses are
//! taken from the jobs queued behind it. The rule here (Crius's cluster-wide
//! Cell choice, Pollux/Sia's goodput) grows a job only while the extra GPUs
//! pay:
//!
//! 1. The *base* is the job's GPU request when it has one that is a hint
//!    (simulator traces), else the fewest GPUs any feasible Cell needs.
//!    The *cap* is `min(max_gpus, floor(base × max_gpu_factor))`, never
//!    below the base.
//! 2. Among Cells within the cap, keep the fastest Cell of each GPU count.
//! 3. Start at the smallest count; move to a larger count `g` (iteration
//!    time `t`) from the current one (`g0`, `t0`) only if its *marginal
//!    efficiency* `(t0/t - 1) / (g/g0 - 1)` — the speed-up gained per unit
//!    of relative GPU growth — is at least `min_marginal_efficiency`.
//!    Doubling the GPUs must make the job at least `1 + θ` times faster.
//!
//! 4. Against a load ([`SizingRule::choose_under_load`], `super::load`): a
//!    job also grows into GPUs no pending job waits for — the fastest Cell
//!    within the cap, faster than step 3's choice, whose GPUs all fit in
//!    its type's unwanted GPUs and whose marginal efficiency over step 3's
//!    choice is at least `min_marginal_efficiency` × the type's load after
//!    taking them (busy or wanted share). The bound guards the jobs that
//!    would want the GPUs; GPUs nobody waits for are wanted later only in
//!    proportion to how busy the type is. Under contention, step 3's choice.
//!
//! A user's own fixed count (untyped `--gres=gpu:N`) or pinned Cell is
//! honoured by the callers and never resized. The same function decides in
//! job_submit (submit and re-planning), `whatif` and the simulator.
use super::load::LoadView;
use crate::estimator::Estimate;

/// The admin's sizing knobs (`[placement]` in cellsched.toml).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizingRule {
    /// Most GPUs one job may get (`placement.max_gpus`).
    pub max_gpus: u32,
    /// Most GPUs over the base (`placement.max_gpu_factor`, ≥ 1).
    pub max_gpu_factor: f64,
    /// Least marginal efficiency for growing a job (`placement.min_marginal_efficiency`, 0..=1).
    pub min_marginal_efficiency: f64,
}

/// A ranked Cell as sizing sees it.
pub trait Sizable {
    /// GPUs of the Cell.
    fn gpus(&self) -> u32;
    /// Predicted seconds per iteration on it.
    fn iter_s(&self) -> f64;
    /// Its GPU type.
    fn gpu_type(&self) -> &str;
}

impl Sizable for Estimate {
    fn gpus(&self) -> u32 {
        self.cell.gpus
    }
    fn iter_s(&self) -> f64 {
        self.iter_time_s
    }
    fn gpu_type(&self) -> &str {
        &self.cell.gpu_type
    }
}

impl SizingRule {
    /// The rule `[placement]` configures.
    pub fn from_config(cfg: &crate::config::PlacementConfig) -> SizingRule {
        SizingRule { max_gpus: cfg.max_gpus, max_gpu_factor: cfg.max_gpu_factor, min_marginal_efficiency: cfg.min_marginal_efficiency }
    }

    /// The GPU cap for a job whose base is `base` GPUs.
    pub fn cap(&self, base: u32) -> u32 {
        let grown = (f64::from(base.max(1)) * self.max_gpu_factor).floor();
        let grown = if grown.is_finite() && grown < f64::from(u32::MAX) { grown as u32 } else { u32::MAX };
        grown.max(base).min(self.max_gpus.max(base))
    }

    /// Marginal efficiency of going from `(g0, t0)` to `(g, t)` (`g > g0`).
    pub fn marginal_efficiency(g0: u32, t0: f64, g: u32, t: f64) -> f64 {
        if g <= g0 || !(t > 0.0) || !(t0 > 0.0) {
            return f64::NEG_INFINITY;
        }
        (t0 / t - 1.0) / (f64::from(g) / f64::from(g0) - 1.0)
    }

    /// The index in `ranked` (any order) of the Cell the rule picks, with
    /// `hint` the job's GPU request when it is a hint; `None` when nothing
    /// is within the cap.
    pub fn choose<T: Sizable>(&self, ranked: &[T], hint: Option<u32>) -> Option<usize> {
        let smallest = ranked.iter().map(Sizable::gpus).filter(|g| *g > 0).min()?;
        let cap = self.cap(hint.unwrap_or(smallest).max(1));
        // Fastest Cell of each GPU count within the cap (first on ties: the ranking's order).
        let mut best: Vec<usize> = Vec::new();
        for (i, c) in ranked.iter().enumerate() {
            let (g, t) = (c.gpus(), c.iter_s());
            if g == 0 || g > cap || !t.is_finite() || t <= 0.0 {
                continue;
            }
            match best.iter_mut().find(|j| ranked[**j].gpus() == g) {
                Some(j) if t < ranked[*j].iter_s() => *j = i,
                Some(_) => {}
                None => best.push(i),
            }
        }
        best.sort_by_key(|i| ranked[*i].gpus());
        let mut cur = *best.first()?;
        for &i in &best[1..] {
            let (c0, c) = (&ranked[cur], &ranked[i]);
            if Self::marginal_efficiency(c0.gpus(), c0.iter_s(), c.gpus(), c.iter_s()) >= self.min_marginal_efficiency {
                cur = i;
            }
        }
        Some(cur)
    }

    /// [`Self::choose`] against `load` (step 4 of the module doc): the
    /// fastest Cell within the cap, faster than the efficient choice, whose
    /// GPUs all fit in the unwanted GPUs of its type and whose marginal
    /// efficiency over the efficient choice is at least
    /// `min_marginal_efficiency` × [`LoadView::load_after`]; else the
    /// efficient choice. `load` must not count the job's own demand
    /// ([`LoadView::without_wanted`]); `None` is [`Self::choose`].
    pub fn choose_under_load<T: Sizable>(&self, ranked: &[T], hint: Option<u32>, load: Option<&LoadView>) -> Option<usize> {
        let k = self.choose(ranked, hint)?;
        let Some(load) = load else { return Some(k) };
        let smallest = ranked.iter().map(Sizable::gpus).filter(|g| *g > 0).min()?;
        let cap = self.cap(hint.unwrap_or(smallest).max(1));
        let (g0, t0) = (ranked[k].gpus(), ranked[k].iter_s());
        let mut best = k;
        for (i, c) in ranked.iter().enumerate() {
            let (g, t) = (c.gpus(), c.iter_s());
            if g == 0 || g > cap || !t.is_finite() || t <= 0.0 || t >= ranked[best].iter_s() {
                continue;
            }
            if u64::from(g) > load.unwanted(c.gpu_type()) || u64::from(g) > load.unwanted_anywhere() {
                continue;
            }
            // Fewer or as many GPUs and faster: better on both counts.
            let pays = g <= g0 || Self::marginal_efficiency(g0, t0, g, t) >= self.min_marginal_efficiency * load.load_after(c.gpu_type(), u64::from(g));
            if pays {
                best = i;
            }
        }
        Some(best)
    }
}

/// The work a deadline job has left and the time left to its deadline:
/// a Cell meets the deadline when `iters` × its seconds per iteration fit
/// in `left_s` (predicted, if it started now).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeadlineWork {
    /// Iterations left (declared or known; fractional for a job under way).
    pub iters: f64,
    /// Seconds left until the deadline.
    pub left_s: f64,
}

impl DeadlineWork {
    /// Whether `iters` iterations at `iter_s` seconds each finish in time.
    pub fn met_by(&self, iter_s: f64) -> bool {
        self.iters * iter_s <= self.left_s
    }
}

impl SizingRule {
    /// [`Self::choose`] for a job that may have a deadline: with `work`,
    /// only the Cells that meet it count, and `None` means none of
    /// `ranked` does (callers decide: job_submit takes the fastest Cell of
    /// the cluster, re-planning moves nothing). Without `work`, [`Self::choose`].
    pub fn choose_in_time<T: Sizable>(&self, ranked: &[T], hint: Option<u32>, work: Option<DeadlineWork>) -> Option<usize> {
        self.choose_in_time_under_load(ranked, hint, work, None)
    }

    /// [`Self::choose_in_time`] against `load` ([`Self::choose_under_load`]).
    pub fn choose_in_time_under_load<T: Sizable>(&self, ranked: &[T], hint: Option<u32>, work: Option<DeadlineWork>, load: Option<&LoadView>) -> Option<usize> {
        let Some(w) = work else { return self.choose_under_load(ranked, hint, load) };
        let in_time: Vec<usize> = (0..ranked.len()).filter(|&i| w.met_by(ranked[i].iter_s())).collect();
        let view: Vec<&T> = in_time.iter().map(|&i| &ranked[i]).collect();
        self.choose_under_load(&view, hint, load).map(|k| in_time[k])
    }
}

impl<T: Sizable> Sizable for &T {
    fn gpus(&self) -> u32 {
        (*self).gpus()
    }
    fn iter_s(&self) -> f64 {
        (*self).iter_s()
    }
    fn gpu_type(&self) -> &str {
        (*self).gpu_type()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct C(u32, f64);
    impl Sizable for C {
        fn gpus(&self) -> u32 {
            self.0
        }
        fn iter_s(&self) -> f64 {
            self.1
        }
        fn gpu_type(&self) -> &str {
            "a100"
        }
    }

    /// A Cell of a named type.
    #[derive(Debug)]
    struct T(&'static str, u32, f64);
    impl Sizable for T {
        fn gpus(&self) -> u32 {
            self.1
        }
        fn iter_s(&self) -> f64 {
            self.2
        }
        fn gpu_type(&self) -> &str {
            self.0
        }
    }

    fn rule(factor: f64, theta: f64) -> SizingRule {
        SizingRule { max_gpus: 16, max_gpu_factor: factor, min_marginal_efficiency: theta }
    }

    #[test]
    fn grows_into_gpus_no_pending_job_wants() {
        // 1 -> 2 GPUs: 1.25x (marginal 0.25 < 0.5): the efficient choice is 1 GPU.
        let ranked = [T("v100", 4, 0.5), T("v100", 2, 0.8), T("v100", 1, 1.0), T("k80", 4, 0.9)];
        let r = rule(4.0, 0.5);
        assert_eq!(r.choose(&ranked, Some(1)), Some(2));
        assert_eq!(r.choose_under_load(&ranked, Some(1), None), Some(2), "no load view: the efficient rule");
        let view = |total: u64, wanted: u64| {
            let mut v = LoadView::new();
            v.add_total("v100", total);
            v.add_free("v100", total);
            v.add_wanted("v100", wanted);
            v.add_total("k80", 8);
            v.add_free("k80", 8);
            v
        };
        // 16 idle v100, nobody waits: 4 GPUs leave 12 idle (load 0.25, bar
        // 0.125); 1 -> 4 gains 1.0 / 0.5 - 1 = 1 over 3x the GPUs: 0.33. Grows.
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(16, 0))), Some(0));
        // 4 wanted: 4 GPUs leave 8 idle (load 0.5, bar 0.25 <= 0.33): grows.
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(16, 4))), Some(0));
        // 12 wanted: 4 unwanted; 4 GPUs leave none (bar 0.5 > 0.33); 2 GPUs
        // leave 2 (load 0.875, bar 0.44 > 0.25): the efficient 1 GPU.
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(16, 12))), Some(2));
        // All wanted: the unwanted k80 Cell is slower than the efficient choice.
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(16, 16))), Some(2));
        // The job's own demand does not hold it back.
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(16, 16).without_wanted("v100", 16))), Some(0));
        // A small type: taking 2 of 4 idle leaves half idle (bar 0.25 <= 0.25).
        assert_eq!(r.choose_under_load(&ranked, Some(1), Some(&view(4, 0))), Some(1));
        // The cap still bounds growth: factor 2 over a hint of 1.
        assert_eq!(rule(2.0, 0.5).choose_under_load(&ranked, Some(1), Some(&view(16, 0))), Some(1));
        // Deadlines first: only Cells meeting it count, then the load rule among them.
        let ranked = [T("v100", 4, 0.7), T("v100", 2, 0.8), T("v100", 1, 1.0)];
        let w = DeadlineWork { iters: 10.0, left_s: 9.0 };
        assert_eq!(r.choose_in_time_under_load(&ranked, Some(1), Some(w), Some(&view(16, 16))), Some(1), "2 GPUs: the 1-GPU Cell misses it");
        assert_eq!(r.choose_in_time_under_load(&ranked, Some(1), Some(w), Some(&view(16, 0))), Some(0));
    }

    #[test]
    fn a_deadline_keeps_only_the_cells_that_meet_it() {
        // 1 GPU at 1.0 s, 2 at 0.75 s: 0.33 efficiency, below 0.5: 1 GPU.
        let ranked = [C(2, 0.75), C(1, 1.0)];
        let r = rule(2.0, 0.5);
        assert_eq!(r.choose_in_time(&ranked, Some(1), None), Some(1));
        // 1,000 iterations in 800 s: only the 2-GPU Cell.
        let tight = DeadlineWork { iters: 1000.0, left_s: 800.0 };
        assert!(tight.met_by(0.75) && !tight.met_by(1.0));
        assert_eq!(r.choose_in_time(&ranked, Some(1), Some(tight)), Some(0));
        // A loose deadline changes nothing; an impossible one leaves no Cell.
        assert_eq!(r.choose_in_time(&ranked, Some(1), Some(DeadlineWork { iters: 1000.0, left_s: 1e4 })), Some(1));
        assert_eq!(r.choose_in_time(&ranked, Some(1), Some(DeadlineWork { iters: 1000.0, left_s: 500.0 })), None);
    }

    #[test]
    fn grows_only_while_the_extra_gpus_pay() {
        // 1 → 2 GPUs: 1.8× faster (marginal 0.8); 2 → 4: 1.25× (0.25); 4 → 8 from 2: 1.5× over 4× GPUs (0.17).
        let ranked = [C(8, 0.3), C(4, 0.4), C(2, 0.5), C(1, 0.9)];
        assert_eq!(rule(8.0, 0.5).choose(&ranked, None), Some(2), "stops at 2 GPUs");
        assert_eq!(rule(8.0, 0.0).choose(&ranked, None), Some(0), "θ = 0: any speed-up pays, the fastest wins");
        assert_eq!(rule(8.0, 0.9).choose(&ranked, None), Some(3), "θ = 0.9: not even 1 → 2");
        // Hand check of the number the rule compares.
        assert!((SizingRule::marginal_efficiency(1, 0.9, 2, 0.5) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn the_cap_bounds_growth_over_the_base() {
        let linear = [C(1, 8.0), C(2, 4.0), C(4, 2.0), C(8, 1.0), C(16, 0.5)];
        // Perfect scaling always pays; the cap decides: base 1 × factor 2.
        assert_eq!(linear[rule(2.0, 0.5).choose(&linear, None).unwrap()].0, 2);
        // A hint of 4 GPUs (a trace's request) × 2 = 8.
        assert_eq!(linear[rule(2.0, 0.5).choose(&linear, Some(4)).unwrap()].0, 8);
        // max_gpus bounds everything, a factor of 1 keeps the request.
        assert_eq!(linear[SizingRule { max_gpus: 4, ..rule(100.0, 0.5) }.choose(&linear, None).unwrap()].0, 4);
        assert_eq!(linear[rule(1.0, 0.5).choose(&linear, Some(4)).unwrap()].0, 4);
        // A job that needs more GPUs than max_gpus (memory) is still sized from its base.
        assert_eq!(SizingRule { max_gpus: 4, ..rule(2.0, 0.5) }.cap(8), 8);
        assert_eq!(rule(2.0, 0.5).cap(0), 2);
        assert_eq!(rule(f64::MAX, 0.5).cap(3), 16);
    }

    #[test]
    fn faster_type_at_the_same_count_and_no_candidates() {
        // Two types at 1 GPU: the faster one is the start.
        let ranked = [C(2, 0.95), C(1, 1.0), C(1, 2.0)];
        assert_eq!(rule(4.0, 0.5).choose(&ranked, None), Some(1));
        assert_eq!(rule(4.0, 0.5).choose::<C>(&[], None), None);
        // Nothing within the cap: hint 1 × factor 1 with only 2-GPU Cells feasible → base is the hint, cap 1.
        assert_eq!(rule(1.0, 0.5).choose(&[C(2, 1.0)], Some(1)), None);
        // Broken times are skipped, not chosen.
        assert_eq!(rule(4.0, 0.0).choose(&[C(1, 1.0), C(2, f64::NAN), C(4, 0.0)], None), Some(0));
    }
}

//! Held-out accuracy of the cellsched estimator on measured reference data
//! (Gavel k80/p100/v100, Rubick A800, H100; see `../shared/README.md`), and
//! its plan-search and `rank_cells` speed: the library behind `cellsched
//! bench estimator`, whose CLI only parses arguments and prints.
//!
//! Measured points are truth; the estimator's output is knowledge. A point
//! is never scored by an estimator calibrated with it ([`protocol`]).
#![deny(missing_docs)]
pub mod data;
pub mod error;
pub mod floor;
pub mod memory;
pub mod protocol;
pub mod score;
pub mod speed;

pub use data::{dataset_gpus, load_points, published_points, Point, DATASET_SERVERS, PUBLISHED_RESNET50};
pub use error::BenchError;
pub use floor::{cross_type_floor, TypeFloor};
pub use protocol::{protocols, published_protocols, Protocol, Split};
pub use score::{Pick, Row, Scored};

use cellsched_core::estimator::weak_scaling_contradictions;
use cellsched_core::profile_db::ProfileRecord;

/// Truth checked against itself, no estimator involved: the multi-GPU points
/// of in-node weak-scaling series (same job, GPU type and per-GPU batch) in
/// which an iteration on more GPUs is clearly faster than on fewer
/// ([`weak_scaling_contradictions`], as calibration warns of them).
pub fn contradictory_points(points: &[Point]) -> Vec<usize> {
    let keyed: Vec<(&str, &ProfileRecord)> = points.iter().map(|p| (p.job.as_str(), &p.rec)).collect();
    weak_scaling_contradictions(&keyed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench keys series by job: a job whose 4-GPU iteration is slower
    /// than its 8-GPU one has its multi-GPU points reported.
    #[test]
    fn contradictory_points_are_keyed_by_job() {
        let mut points = Vec::new();
        for (job, times) in [("bad", [0.10, 0.10, 0.30, 0.12]), ("good", [0.10, 0.11, 0.13, 0.15])] {
            for (g, t) in [1, 2, 4, 8].into_iter().zip(times) {
                points.push(Point::new(
                    "gavel",
                    format!("j:{job}"),
                    ProfileRecord { model: job.into(), batch: 8 * g, gpu_type: "v100".into(), nodes: 1, gpus_per_node: g, iter_time_s: t, plan: None, peak_mem_gib: None, first_iter_s: None },
                ));
            }
        }
        assert_eq!(contradictory_points(&points), vec![1, 2, 3]);
    }
}

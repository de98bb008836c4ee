//! Collective microbenchmarks in the profile DB (`cellsched profile comm`)
//! and the link scales the estimator derives from them.
//!
//! A measurement is a profile row whose model is `comm:<collective>:<bytes>`
//! (`all_reduce`, `all_gather` or `p2p`; bytes per rank), batch 1, the shape
//! measured (nodes × GPUs per node) and the median seconds per call in
//! `iter_time_s`. One file, one format: import, merge and list work as for
//! training rows. Per GPU type, the measured times over the α–β model's times
//! give a multiplier for the links inside a node (single-node rows) and for
//! the network (multi-node rows, net of their intra-node part); the
//! estimator applies them under the fitted framework constants.
use super::topology::{p2p_s, Group, LinkScale, Placement};
use crate::error::CoreError;
use crate::gpu::GpuCatalog;
use crate::profile_db::ProfileRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Model-name prefix of a collective measurement row.
pub const COMM_MODEL_PREFIX: &str = "comm:";

/// A measured collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Collective {
    /// Ring all-reduce of `bytes` per rank.
    AllReduce,
    /// All-gather producing `bytes` per rank.
    AllGather,
    /// One send of `bytes` between two ranks.
    P2p,
}

impl Collective {
    /// Name in rows and in the benchmark's output.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::P2p => "p2p",
        }
    }

    /// Parses a name written by [`Collective::name`].
    pub fn parse(s: &str) -> Result<Collective, CoreError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "all_reduce" | "allreduce" => Ok(Collective::AllReduce),
            "all_gather" | "allgather" => Ok(Collective::AllGather),
            "p2p" | "send" | "sendrecv" => Ok(Collective::P2p),
            _ => Err(CoreError::invalid("collective", s, "all_reduce, all_gather or p2p")),
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One collective measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommPoint {
    /// The collective.
    pub collective: Collective,
    /// Bytes per rank.
    pub bytes: u64,
    /// GPU type (as stored in the profile DB).
    pub gpu_type: String,
    /// Nodes spanned.
    pub nodes: u32,
    /// Ranks (GPUs) per node.
    pub gpus_per_node: u32,
    /// Median seconds per call.
    pub time_s: f64,
}

impl CommPoint {
    /// The profile row storing this measurement.
    pub fn to_record(&self) -> ProfileRecord {
        ProfileRecord {
            model: format!("{COMM_MODEL_PREFIX}{}:{}", self.collective, self.bytes),
            batch: 1,
            gpu_type: self.gpu_type.clone(),
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            iter_time_s: self.time_s,
            plan: None,
            peak_mem_gib: None,
            first_iter_s: None,
        }
    }

    /// The measurement a profile row stores: `None` for training rows, an
    /// error naming the row for a malformed `comm:` row.
    pub fn from_record(rec: &ProfileRecord) -> Option<Result<CommPoint, CoreError>> {
        let rest = rec.model.trim().strip_prefix(COMM_MODEL_PREFIX)?;
        let parsed = (|| {
            let (c, b) = rest.split_once(':').ok_or_else(|| CoreError::invalid("collective row model", &rec.model, "comm:<collective>:<bytes>"))?;
            let bytes = b.trim().parse::<u64>().ok().filter(|b| *b > 0).ok_or_else(|| CoreError::invalid("collective row bytes", b, "a positive integer"))?;
            Ok(CommPoint { collective: Collective::parse(c)?, bytes, gpu_type: rec.gpu_type.clone(), nodes: rec.nodes, gpus_per_node: rec.gpus_per_node, time_s: rec.iter_time_s })
        })();
        Some(parsed)
    }

    /// The α–β model's seconds for this call under link scales `k`.
    pub(crate) fn modelled_s(&self, gpus: &GpuCatalog, k: LinkScale) -> Option<f64> {
        let gpu = gpus.get(&self.gpu_type).ok()?;
        let p = Placement { nodes: self.nodes.max(1), per_node: self.gpus_per_node.max(1) };
        let b = self.bytes as f64;
        Some(match self.collective {
            Collective::AllReduce => Group::new(p.nodes * p.per_node, 1, p).all_reduce_s(b, gpu, k),
            Collective::AllGather => Group::new(p.nodes * p.per_node, 1, p).all_gather_s(b, gpu, k),
            Collective::P2p => p2p_s(b, p.nodes > 1, gpu, 1, k),
        })
    }
}

/// Link multipliers measured for one GPU type's servers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredLinks {
    /// GPU type.
    pub gpu_type: String,
    /// Measured over modelled time inside a node (1 when no single-node rows).
    pub intra: f64,
    /// Measured over modelled time of the network part (1 when no multi-node rows).
    pub net: f64,
    /// Single-node and multi-node rows used.
    pub points: (usize, usize),
}

impl MeasuredLinks {
    /// As link scales.
    pub(crate) fn scale(&self) -> LinkScale {
        LinkScale { intra: self.intra, net: self.net }
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

/// Per GPU type: the intra-node multiplier is the median measured/modelled
/// ratio of single-node rows with more than one rank; the network multiplier
/// the median, over multi-node rows, of what is left after the (measured)
/// intra-node part, over the modelled network part. Ratios are clamped to
/// 1/20..50.
pub fn fit_links(points: &[CommPoint], gpus: &GpuCatalog) -> Vec<MeasuredLinks> {
    let mut by_type: BTreeMap<String, Vec<&CommPoint>> = BTreeMap::new();
    for p in points {
        if let Ok(g) = gpus.get(&p.gpu_type) {
            by_type.entry(g.name.clone()).or_default().push(p);
        }
    }
    let clamp = |x: f64| x.clamp(0.05, 50.0);
    let mut out = Vec::new();
    for (gpu_type, pts) in by_type {
        let mut intra: Vec<f64> = pts
            .iter()
            .filter(|p| p.nodes == 1 && p.gpus_per_node > 1)
            .filter_map(|p| p.modelled_s(gpus, LinkScale { intra: 1.0, net: 1.0 }).filter(|m| *m > 0.0).map(|m| clamp(p.time_s / m)))
            .collect();
        let n_intra = intra.len();
        let intra_k = median(&mut intra).unwrap_or(1.0);
        let mut net: Vec<f64> = pts
            .iter()
            .filter(|p| p.nodes > 1)
            .filter_map(|p| {
                let inside = p.modelled_s(gpus, LinkScale { intra: intra_k, net: 0.0 })?;
                let network = p.modelled_s(gpus, LinkScale { intra: 0.0, net: 1.0 })?;
                (network > 0.0).then(|| clamp((p.time_s - inside).max(0.1 * p.time_s) / network))
            })
            .collect();
        let n_net = net.len();
        let net_k = median(&mut net).unwrap_or(1.0);
        if n_intra + n_net > 0 {
            out.push(MeasuredLinks { gpu_type, intra: intra_k, net: net_k, points: (n_intra, n_net) });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(c: Collective, bytes: u64, nodes: u32, per_node: u32, t: f64) -> CommPoint {
        CommPoint { collective: c, bytes, gpu_type: "v100".into(), nodes, gpus_per_node: per_node, time_s: t }
    }

    #[test]
    fn rows_round_trip_and_bad_rows_are_named() {
        let p = pt(Collective::AllGather, 1 << 20, 2, 8, 0.004);
        let rec = p.to_record();
        assert_eq!(rec.model, "comm:all_gather:1048576");
        assert_eq!(CommPoint::from_record(&rec).unwrap().unwrap(), p);
        let train = ProfileRecord { model: "gpt__350M".into(), ..rec.clone() };
        assert!(CommPoint::from_record(&train).is_none());
        let bad = ProfileRecord { model: "comm:all_scatter:10".into(), ..rec.clone() };
        assert!(CommPoint::from_record(&bad).unwrap().unwrap_err().to_string().contains("all_scatter"));
        let bad = ProfileRecord { model: "comm:p2p:-3".into(), ..rec };
        assert!(CommPoint::from_record(&bad).unwrap().is_err());
    }

    /// Rows generated with intra-node links 2x and the network 3x slower than
    /// modelled give back those multipliers.
    #[test]
    fn fitted_links_recover_the_measured_slowdown() {
        let gpus = GpuCatalog::builtin();
        let truth = LinkScale { intra: 2.0, net: 3.0 };
        let mut pts = Vec::new();
        for bytes in [1u64 << 20, 1 << 24, 1 << 28] {
            for (nodes, per_node) in [(1, 2), (1, 8), (2, 8), (4, 1)] {
                for c in [Collective::AllReduce, Collective::AllGather, Collective::P2p] {
                    let mut p = pt(c, bytes, nodes, per_node, 0.0);
                    p.time_s = p.modelled_s(&gpus, truth).unwrap();
                    pts.push(p);
                }
            }
        }
        let fit = fit_links(&pts, &gpus);
        assert_eq!(fit.len(), 1);
        assert!((fit[0].intra - 2.0).abs() < 1e-6 && (fit[0].net - 3.0).abs() < 1e-6, "{fit:?}");
        assert_eq!(fit[0].points, (18, 18));
    }
}

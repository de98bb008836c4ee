//! The simulated cluster: the TOML spec (`[[group]]` tables) and the live
//! free-GPU state per node, with O(1) node lookup by free-GPU count.
//!
//! ```toml
//! [[group]]
//! gpu_type = "a100"
//! nodes = 2
//! gpus_per_node = 4
//! inter_node_gbps = 200   # optional
//! ```
//! A job's GPUs always come from one group (same type and interconnect); a
//! placement is a *shape*: `nodes` nodes with `gpus_per_node` GPUs each.
use crate::error::SimError;
use serde::Deserialize;

/// One `[[group]]` table: identical nodes of one GPU type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Canonical GPU type (`a100`, `v100`, ...).
    pub gpu_type: String,
    /// Number of nodes.
    pub nodes: u32,
    /// GPUs on each node.
    pub gpus_per_node: u32,
    /// Inter-node bandwidth in Gbit/s (informational; the estimator's GPU
    /// catalog carries the bandwidth it models).
    #[serde(default)]
    pub inter_node_gbps: Option<f64>,
}

/// A cluster spec: the node groups.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// The node groups, in file order.
    #[serde(rename = "group", default)]
    pub groups: Vec<GroupSpec>,
}

impl ClusterSpec {
    /// Parses and validates TOML text; `path` names the source in errors.
    pub fn parse(text: &str, path: &str) -> Result<Self, SimError> {
        let spec: ClusterSpec = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            SimError::input(path, line, "toml", e.message().to_string())
        })?;
        if spec.groups.is_empty() {
            return Err(SimError::input(path, None, "group", "no [[group]] tables: the cluster has no nodes"));
        }
        for (i, g) in spec.groups.iter().enumerate() {
            let field = |f: &str| format!("group[{i}].{f}");
            let t = &g.gpu_type;
            if t.is_empty() || !t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-') {
                return Err(SimError::input(path, None, &field("gpu_type"), format!("'{t}' is not a canonical lower-case GPU type (e.g. a100)")));
            }
            let (nodes, per_node) = (cellsched_core::limits::NODES, cellsched_core::limits::GPUS_PER_NODE);
            if g.nodes == 0 || g.nodes > nodes.max_u32() {
                return Err(SimError::input(path, None, &field("nodes"), format!("{} is outside 1..={}", g.nodes, nodes.max)));
            }
            if g.gpus_per_node == 0 || g.gpus_per_node > per_node.max_u32() {
                return Err(SimError::input(path, None, &field("gpus_per_node"), format!("{} is outside 1..={}", g.gpus_per_node, per_node.max)));
            }
            if let Some(bw) = g.inter_node_gbps {
                if !(bw.is_finite() && bw > 0.0) {
                    return Err(SimError::input(path, None, &field("inter_node_gbps"), format!("{bw} is not a positive number")));
                }
            }
        }
        Ok(spec)
    }

    /// Reads and parses a cluster TOML file.
    pub fn load(path: &str) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path).map_err(|error| SimError::Io { path: path.to_string(), error })?;
        Self::parse(&text, path)
    }

    /// The same cluster with about `k` times fewer GPUs of every type: each
    /// group keeps `nodes / k` nodes (rounded down) when it has at least
    /// `k`, else one node with `gpus_per_node × nodes / k` GPUs (rounded
    /// down, at least 1). `k` = 1 is the cluster itself.
    pub fn shrink(&self, k: u32) -> Result<ClusterSpec, SimError> {
        if k == 0 {
            return Err(SimError::invalid("shrink factor", "0", "an integer >= 1"));
        }
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let (nodes, gpn) = if g.nodes >= k { (g.nodes / k, g.gpus_per_node) } else { (1, (g.gpus_per_node * g.nodes / k).max(1)) };
                GroupSpec { nodes, gpus_per_node: gpn, ..g.clone() }
            })
            .collect();
        Ok(ClusterSpec { groups })
    }

    /// The cluster with every group's node count multiplied by `k` (a
    /// cluster `k` times larger, same node shapes): the light-load end of a
    /// load sweep.
    pub fn grow(&self, k: u32) -> Result<ClusterSpec, SimError> {
        if k == 0 {
            return Err(SimError::invalid("grow factor", "0", "an integer >= 1"));
        }
        let groups = self.groups.iter().map(|g| GroupSpec { nodes: g.nodes.saturating_mul(k), ..g.clone() }).collect();
        Ok(ClusterSpec { groups })
    }

    /// Lowers each job's requested GPU count to the most GPUs of its
    /// requested type that one job can get on this cluster (all of the
    /// type's nodes of one group), so that a shrunk cluster can still run
    /// every job as requested. Returns how many requests were lowered.
    pub fn clamp_requests(&self, jobs: &mut [crate::trace::TraceJob]) -> usize {
        let mut n = 0;
        for j in jobs {
            let most = self.groups.iter().filter(|g| g.gpu_type == j.gpu_type).map(|g| g.nodes * g.gpus_per_node).max();
            if let Some(m) = most {
                if j.num_gpu > m {
                    j.num_gpu = m;
                    n += 1;
                }
            }
        }
        n
    }

    /// Total nodes over all groups.
    pub fn total_nodes(&self) -> u64 {
        self.groups.iter().map(|g| g.nodes as u64).sum()
    }
}

/// Where a job runs: `nodes` nodes of `group` with `gpus_per_node` GPUs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Index of the node group.
    pub group: usize,
    /// Nodes spanned.
    pub nodes: u32,
    /// GPUs used on each node.
    pub gpus_per_node: u32,
}

impl Shape {
    /// Total GPUs of the shape.
    pub fn gpus(&self) -> u32 {
        self.nodes * self.gpus_per_node
    }
}

/// Nodes bucketed by free-GPU count with O(1) insert/remove (swap-remove).
#[derive(Debug, Clone)]
struct Buckets {
    members: Vec<Vec<u32>>,
    pos: Vec<u32>,
}

impl Buckets {
    fn new(nodes: u32, full: u32) -> Self {
        let mut members = vec![Vec::new(); full as usize + 1];
        // Reverse so that pops hand out low node numbers first.
        members[full as usize] = (0..nodes).rev().collect();
        let pos = (0..nodes).map(|n| nodes - 1 - n).collect();
        Buckets { members, pos }
    }
    fn remove(&mut self, node: u32, count: u32) {
        let b = &mut self.members[count as usize];
        let p = self.pos[node as usize] as usize;
        let last = *b.last().expect("node in bucket");
        b.swap_remove(p);
        if last != node {
            self.pos[last as usize] = p as u32;
        }
    }
    fn insert(&mut self, node: u32, count: u32) {
        let b = &mut self.members[count as usize];
        self.pos[node as usize] = b.len() as u32;
        b.push(node);
    }
}

/// Live state of one group.
#[derive(Debug, Clone)]
pub struct GroupState {
    /// The group's spec.
    pub spec: GroupSpec,
    /// Index of the group's GPU type in [`ClusterState::types`].
    pub type_idx: usize,
    free: Vec<u32>,
    buckets: Buckets,
    free_total: u64,
}

impl GroupState {
    /// Total GPUs in the group.
    pub fn total_gpus(&self) -> u64 {
        self.spec.nodes as u64 * self.spec.gpus_per_node as u64
    }
    /// Free GPUs per node, in node order.
    pub fn free_per_node(&self) -> &[u32] {
        &self.free
    }
    /// Number of nodes with at least `k` free GPUs.
    pub fn nodes_with_free(&self, k: u32) -> usize {
        if k > self.spec.gpus_per_node {
            return 0;
        }
        self.buckets.members[k.max(1) as usize..].iter().map(Vec::len).sum()
    }
    /// Free-GPU counts of the nodes with any free GPU, largest first, at most `limit` of them.
    pub fn top_free(&self, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for c in (1..self.buckets.members.len()).rev() {
            let n = self.buckets.members[c].len().min(limit - out.len());
            out.extend(std::iter::repeat(c as u32).take(n));
            if out.len() >= limit {
                break;
            }
        }
        out
    }
    fn set_free(&mut self, node: u32, new: u32) {
        let old = self.free[node as usize];
        self.buckets.remove(node, old);
        self.buckets.insert(node, new);
        self.free[node as usize] = new;
        self.free_total = self.free_total + new as u64 - old as u64;
    }
}

/// The live cluster: free GPUs per node of every group.
#[derive(Debug, Clone)]
pub struct ClusterState {
    /// Per-group state, in spec order.
    pub groups: Vec<GroupState>,
    /// Distinct GPU types, in first-seen order.
    pub types: Vec<String>,
    /// Group indices of each type.
    pub type_groups: Vec<Vec<usize>>,
    /// Jobs span exactly the fewest nodes their GPU count needs, as when
    /// they are submitted with `--nodes=ceil(gpus / gpus_per_node)` and a
    /// per-node GRES count (`cellsched bench replay`); off: any node count
    /// that divides the GPUs ([`ClusterState::shapes`]).
    pub fewest_nodes_only: bool,
}

/// GPUs held by a running job: (node, gpus) pairs in its group.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// The shape the job runs in.
    pub shape: Shape,
    /// Node indices within the group.
    pub nodes: Vec<u32>,
}

impl ClusterState {
    /// An idle cluster from a spec.
    pub fn new(spec: &ClusterSpec) -> Self {
        let mut types: Vec<String> = Vec::new();
        let mut type_groups: Vec<Vec<usize>> = Vec::new();
        let mut groups = Vec::new();
        for (gi, g) in spec.groups.iter().enumerate() {
            let t = match types.iter().position(|t| *t == g.gpu_type) {
                Some(t) => t,
                None => {
                    types.push(g.gpu_type.clone());
                    type_groups.push(Vec::new());
                    types.len() - 1
                }
            };
            type_groups[t].push(gi);
            groups.push(GroupState {
                spec: g.clone(),
                type_idx: t,
                free: vec![g.gpus_per_node; g.nodes as usize],
                buckets: Buckets::new(g.nodes, g.gpus_per_node),
                free_total: g.nodes as u64 * g.gpus_per_node as u64,
            });
        }
        ClusterState { groups, types, type_groups, fewest_nodes_only: false }
    }

    /// Index of a GPU type, if the cluster has it.
    pub fn type_index(&self, gpu_type: &str) -> Option<usize> {
        self.types.iter().position(|t| t == gpu_type)
    }

    /// Free GPUs of a type over all its groups.
    pub fn free_of_type(&self, t: usize) -> u64 {
        self.type_groups[t].iter().map(|&g| self.groups[g].free_total).sum()
    }

    /// Total GPUs of a type.
    pub fn total_of_type(&self, t: usize) -> u64 {
        self.type_groups[t].iter().map(|&g| self.groups[g].total_gpus()).sum()
    }

    /// Free GPUs in the whole cluster.
    pub fn free_total(&self) -> u64 {
        self.groups.iter().map(|g| g.free_total).sum()
    }

    /// Whether `shape` can be allocated now.
    pub fn fits(&self, s: &Shape) -> bool {
        self.groups[s.group].nodes_with_free(s.gpus_per_node) >= s.nodes as usize
    }

    /// The shapes of `gpus` GPUs in group `g` that could exist in an idle
    /// group, fewest nodes first (`nodes` divides `gpus`).
    pub fn shapes(&self, g: usize, gpus: u32) -> impl Iterator<Item = Shape> + '_ {
        let spec = &self.groups[g].spec;
        let lo = gpus.div_ceil(spec.gpus_per_node).max(1);
        let hi = if self.fewest_nodes_only { lo.min(spec.nodes) } else { gpus.min(spec.nodes) };
        (lo..=hi)
            .filter(move |n| gpus % n == 0)
            .map(move |n| Shape { group: g, nodes: n, gpus_per_node: gpus / n })
    }

    /// The fewest-node shape of `gpus` GPUs of type `t` that fits now, trying
    /// the type's groups in spec order.
    pub fn place_now(&self, t: usize, gpus: u32) -> Option<Shape> {
        let mut best: Option<Shape> = None;
        for &g in &self.type_groups[t] {
            if self.groups[g].free_total < gpus as u64 {
                continue;
            }
            if let Some(s) = self.shapes(g, gpus).find(|s| self.fits(s)) {
                if best.map_or(true, |b| s.nodes < b.nodes) {
                    best = Some(s);
                }
            }
        }
        best
    }

    /// The fewest-node shape of `gpus` GPUs of type `t` in an idle cluster.
    pub fn place_idle(&self, t: usize, gpus: u32) -> Option<Shape> {
        self.type_groups[t]
            .iter()
            .filter_map(|&g| self.shapes(g, gpus).next())
            .min_by_key(|s| s.nodes)
    }

    /// Allocates `shape`, best fit: nodes with the fewest sufficient free GPUs first.
    /// Returns `None` (and changes nothing) if it does not fit.
    pub fn allocate(&mut self, shape: Shape) -> Option<Allocation> {
        if !self.fits(&shape) {
            return None;
        }
        let g = &mut self.groups[shape.group];
        let k = shape.gpus_per_node;
        let mut picked = Vec::with_capacity(shape.nodes as usize);
        let mut c = k.max(1);
        while picked.len() < shape.nodes as usize {
            while g.buckets.members[c as usize].is_empty() {
                c += 1;
            }
            let node = *g.buckets.members[c as usize].last().expect("non-empty bucket");
            g.set_free(node, c - k);
            picked.push(node);
        }
        Some(Allocation { shape, nodes: picked })
    }

    /// Allocates `gpus_per_node` GPUs on each of the given nodes (indices
    /// in `group`), e.g. a job already running in a snapshot. Returns `None`
    /// (and changes nothing) if a node is missing, repeated or lacks them.
    pub fn allocate_on(&mut self, group: usize, nodes: &[u32], gpus_per_node: u32) -> Option<Allocation> {
        let g = self.groups.get_mut(group)?;
        let mut seen = std::collections::HashSet::new();
        if nodes.is_empty()
            || !nodes.iter().all(|&n| seen.insert(n) && g.free.get(n as usize).is_some_and(|&f| f >= gpus_per_node))
        {
            return None;
        }
        for &n in nodes {
            let f = g.free[n as usize] - gpus_per_node;
            g.set_free(n, f);
        }
        Some(Allocation { shape: Shape { group, nodes: nodes.len() as u32, gpus_per_node }, nodes: nodes.to_vec() })
    }

    /// Returns an allocation's GPUs.
    pub fn release(&mut self, a: &Allocation) {
        let g = &mut self.groups[a.shape.group];
        for &n in &a.nodes {
            let f = g.free[n as usize] + a.shape.gpus_per_node;
            debug_assert!(f <= g.spec.gpus_per_node);
            g.set_free(n, f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "[[group]]\ngpu_type = \"a100\"\nnodes = 2\ngpus_per_node = 4\n\n[[group]]\ngpu_type = \"v100\"\nnodes = 3\ngpus_per_node = 8\ninter_node_gbps = 100\n";

    #[test]
    fn fewest_nodes_only_keeps_a_job_on_the_nodes_its_count_needs() {
        let mut c = ClusterState::new(&ClusterSpec::parse(TWO, "c.toml").unwrap());
        let all: Vec<(u32, u32)> = c.shapes(1, 8).map(|s| (s.nodes, s.gpus_per_node)).collect();
        assert_eq!(all, vec![(1, 8), (2, 4)]);
        c.fewest_nodes_only = true;
        let fewest: Vec<(u32, u32)> = c.shapes(1, 8).map(|s| (s.nodes, s.gpus_per_node)).collect();
        assert_eq!(fewest, vec![(1, 8)]);
        // Two 4-GPU halves free on two v100 nodes: 8 GPUs fit only when spreading is allowed.
        let t = c.type_index("v100").unwrap();
        for (node, gpus) in [(0, 4), (1, 4), (2, 8)] {
            c.allocate_on(1, &[node], gpus).unwrap();
        }
        assert_eq!(c.place_now(t, 8), None);
        c.fewest_nodes_only = false;
        assert_eq!(c.place_now(t, 8).map(|s| s.nodes), Some(2));
    }

    #[test]
    fn shrink_and_clamp_requests() {
        // a100: 2 nodes x 4; v100: 3 nodes x 8.
        let s = ClusterSpec::parse(TWO, "c.toml").unwrap();
        assert_eq!(s.shrink(1).unwrap(), s);
        let two = s.shrink(2).unwrap();
        assert_eq!((two.groups[0].nodes, two.groups[0].gpus_per_node), (1, 4));
        assert_eq!((two.groups[1].nodes, two.groups[1].gpus_per_node), (1, 8));
        let four = s.shrink(4).unwrap();
        assert_eq!((four.groups[0].nodes, four.groups[0].gpus_per_node), (1, 2)); // 8 GPUs / 4
        assert_eq!((four.groups[1].nodes, four.groups[1].gpus_per_node), (1, 6)); // 24 GPUs / 4
        assert_eq!(four.groups[1].inter_node_gbps, Some(100.0));
        assert!(s.shrink(0).is_err());
        let job = |id: &str, gpus, ty: &str| crate::testutil::job(id, 0.0, 1, gpus, ty, 0.0);
        let mut jobs = vec![job("a", 8, "a100"), job("b", 4, "v100")];
        // A grown cluster keeps node shapes and multiplies the nodes.
        let big = s.grow(4).unwrap();
        assert_eq!((big.groups[0].nodes, big.groups[0].gpus_per_node), (s.groups[0].nodes * 4, s.groups[0].gpus_per_node));
        assert!(s.grow(0).is_err());
        assert_eq!(four.clamp_requests(&mut jobs), 1);
        assert_eq!((jobs[0].num_gpu, jobs[1].num_gpu), (2, 4));
    }

    #[test]
    fn parses_and_validates() {
        let s = ClusterSpec::parse(TWO, "c.toml").unwrap();
        assert_eq!(s.groups.len(), 2);
        assert_eq!(s.groups[1].inter_node_gbps, Some(100.0));
        let e = ClusterSpec::parse("[[group]]\ngpu_type = \"a100\"\nnodes = 0\ngpus_per_node = 4\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("c.toml") && e.to_string().contains("group[0].nodes"), "{e}");
        let e = ClusterSpec::parse("[[group]]\ngpu_type = \"a100\"\nnodez = 2\ngpus_per_node = 4\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("c.toml:") && e.to_string().contains("nodez"), "{e}");
        let e = ClusterSpec::parse("", "c.toml").unwrap_err();
        assert!(e.to_string().contains("no [[group]]"), "{e}");
        let e = ClusterSpec::parse("[[group]]\ngpu_type = \"A100\"\nnodes = 1\ngpus_per_node = 4\n", "c.toml").unwrap_err();
        assert!(e.to_string().contains("gpu_type"), "{e}");
    }

    #[test]
    fn best_fit_allocation_and_release() {
        let mut c = ClusterState::new(&ClusterSpec::parse(TWO, "c").unwrap());
        let a100 = c.type_index("a100").unwrap();
        let v100 = c.type_index("v100").unwrap();
        assert_eq!(c.place_now(a100, 4), Some(Shape { group: 0, nodes: 1, gpus_per_node: 4 }));
        assert_eq!(c.place_now(a100, 6), Some(Shape { group: 0, nodes: 2, gpus_per_node: 3 }));
        assert_eq!(c.place_now(a100, 9), None);
        assert_eq!(c.place_idle(v100, 24).unwrap().nodes, 3);
        let a = c.allocate(Shape { group: 0, nodes: 1, gpus_per_node: 3 }).unwrap();
        assert_eq!(c.free_of_type(a100), 5);
        // A 1-GPU job goes to the node with 1 free GPU (best fit), leaving a full node.
        let b = c.allocate(c.place_now(a100, 1).unwrap()).unwrap();
        assert_eq!(b.nodes, a.nodes);
        assert_eq!(c.place_now(a100, 4), Some(Shape { group: 0, nodes: 1, gpus_per_node: 4 }));
        assert_eq!(c.place_now(a100, 5), None, "5 GPUs need a 5x1 shape over 2 nodes: impossible");
        c.release(&a);
        c.release(&b);
        assert_eq!(c.free_of_type(a100), 8);
        assert_eq!(c.groups[0].nodes_with_free(4), 2);
        assert_eq!(c.groups[1].top_free(2), vec![8, 8]);
    }
}

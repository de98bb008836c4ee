//! Where a plan's process groups sit (intra- vs inter-node) and what their
//! collectives cost: ring all-reduce inside a node; across nodes NCCL's ring
//! (and tree) over every member, whose traffic through each node's NIC is
//! that of the whole group, shared with the node's other groups; at the bus
//! bandwidth NCCL achieves (PCIe rings slow down once they cross the CPU
//! socket interconnect).
use crate::gpu::{GpuSpec, Link, Transport};

/// Fraction of link bandwidth a ring collective achieves (NCCL bus bandwidth
/// over link bandwidth: protocol overhead, chunking, kernel contention).
const COLLECTIVE_EFFICIENCY: f64 = 0.75;
/// Fraction of a declared per-node network rate a cross-node ring reaches
/// (derated default: untuned RDMA, shared switches; `cellsched profile comm`
/// measures it).
const INTER_NODE_EFFICIENCY: f64 = 0.5;
/// Fraction of an undeclared (Ethernet) link NCCL's socket transport reaches
/// while the host keeps up: TCP goodput on a slow link.
const SOCKET_LINK_EFFICIENCY: f64 = 0.9;
/// What NCCL's socket transport moves per node (bytes/s) with its default
/// threads and sockets: past ~12 Gb/s the copies through host memory and
/// the socket threads, not the link, set the rate (NCCL over 25 Gb/s
/// Ethernet reaches about half the link).
const SOCKET_HOST_CAP: f64 = 1.5e9;
/// Nominal per-node network rate (GB/s) assumed when the cluster's network
/// is neither declared nor measured: 25 Gb/s Ethernet. The catalog's
/// `inter_node_gbs` is the typical fabric of the type's HPC servers
/// (InfiniBand with GPUDirect RDMA); unmeasured, we cannot know the cluster
/// has it, and NCCL over TCP sockets on cloud/campus Ethernet reaches far
/// less, so the default takes the lower of the two. Overestimating the
/// network is the error that misleads the scheduler most (multi-node Cells
/// look fast). A site declares its network (`inter_node_gbs` in its GPU
/// catalog) or measures it (`cellsched profile comm`).
pub const UNMEASURED_NET_GBS: f64 = 3.125;
/// Per-step latency of an intra-node ring (kernel launch, handshake).
const ALPHA_INTRA_S: f64 = 6e-6;
/// Per-step latency of a cross-node ring.
const ALPHA_INTER_S: f64 = 25e-6;
/// PCIe GPUs per CPU socket (one PCIe root complex / switch tree).
const PCIE_GPUS_PER_SOCKET: f64 = 4.0;
/// Fraction of the PCIe link a ring between PCIe GPUs gets: without NVLink,
/// peer-to-peer transfers are often unavailable (virtual machines, GPUs under
/// different root complexes, P2P disabled by the platform) and NCCL stages
/// each chunk through host memory, so every byte crosses PCIe twice.
const PCIE_HOST_STAGED: f64 = 0.5;
/// Bandwidth factor of a PCIe ring that crosses the CPU socket interconnect
/// (QPI/UPI peer traffic goes through host memory, shared by the ring).
const PCIE_CROSS_SOCKET_FACTOR: f64 = 0.55;

/// Achieved intra-node ring bandwidth (bytes/s) of `q` GPUs: NVLink rings get
/// the link rate times [`COLLECTIVE_EFFICIENCY`]; PCIe rings are staged
/// through host memory ([`PCIE_HOST_STAGED`]) and, larger than one socket's
/// switch tree, cross the socket interconnect and slow down further.
pub(crate) fn intra_ring_bw(gpu: &GpuSpec, q: f64) -> f64 {
    let bw = gpu.intra_node_gbs * 1e9 * COLLECTIVE_EFFICIENCY;
    match gpu.intra_link {
        Link::Pcie if q > PCIE_GPUS_PER_SOCKET => bw * PCIE_HOST_STAGED * PCIE_CROSS_SOCKET_FACTOR,
        Link::Pcie => bw * PCIE_HOST_STAGED,
        _ => bw,
    }
}

/// Nominal per-node network rate (bytes/s) the estimator assumes for `gpu`'s
/// servers: the declared rate, else the catalog's capped at [`UNMEASURED_NET_GBS`].
pub(crate) fn network_bw(gpu: &GpuSpec) -> f64 {
    let gbs = if gpu.network_declared { gpu.inter_node_gbs } else { gpu.inter_node_gbs.min(UNMEASURED_NET_GBS) };
    gbs * 1e9
}

/// Per-node network rate (bytes/s) a cross-node collective achieves: a
/// declared RDMA network at [`INTER_NODE_EFFICIENCY`] of its rate; an
/// undeclared one, or one declared as `tcp`, is Ethernet under NCCL's socket
/// transport, which fills a slow link ([`SOCKET_LINK_EFFICIENCY`]) but is
/// capped by the host ([`SOCKET_HOST_CAP`]) on a fast one.
pub(crate) fn achieved_network_bw(gpu: &GpuSpec) -> f64 {
    let nominal = network_bw(gpu);
    let rdma = match gpu.inter_node_transport {
        Some(t) => t == Transport::Rdma,
        None => gpu.network_declared,
    };
    if rdma {
        nominal * INTER_NODE_EFFICIENCY
    } else {
        (nominal * SOCKET_LINK_EFFICIENCY).min(SOCKET_HOST_CAP)
    }
}

/// Run-to-run variation (coefficient of variation) of one network link's
/// throughput: shared switches, other tenants, TCP congestion control.
const LINK_CV: f64 = 0.1;

/// A ring across `n` nodes moves in lockstep: every step waits for its
/// slowest link, so its time is that of the expected slowest of the n links.
fn slowest_link(n: f64) -> f64 {
    1.0 + LINK_CV * super::order_stats::expected_max_normal(n)
}

/// Multipliers on the α–β times of the two kinds of link, fitted from
/// multi-GPU profiles (see `calibration`): the links inside a server (NVLink,
/// PCIe) and the network between servers are different hardware, so one
/// scale cannot describe both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinkScale {
    /// Intra-node rings and sends.
    pub intra: f64,
    /// Cross-node rings and sends.
    pub net: f64,
}

/// How a Cell's GPUs sit on nodes: `nodes` nodes with `per_node` GPUs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    pub nodes: u32,
    pub per_node: u32,
}

impl Placement {
    /// Packs `gpus` onto nodes of `node_size`: one node if it fits, else full nodes.
    pub fn pack(gpus: u32, node_size: u32) -> Option<Placement> {
        if node_size == 0 || gpus == 0 {
            return None;
        }
        if gpus <= node_size {
            Some(Placement { nodes: 1, per_node: gpus })
        } else if gpus % node_size == 0 {
            Some(Placement { nodes: gpus / node_size, per_node: node_size })
        } else {
            None
        }
    }
}

/// A process group of `size` ranks with consecutive members `stride` apart in
/// rank order (TP innermost, then DP, then PP), and its link bandwidths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    /// Members.
    pub size: u32,
    /// Nodes the group spans.
    pub nodes: u32,
    /// Groups of the same kind sharing each node's network link.
    pub sharing: u32,
}

impl Group {
    /// The group of `size` ranks with stride `stride` under `p`.
    pub fn new(size: u32, stride: u32, p: Placement) -> Group {
        let span = size * stride; // ranks covered by one group
        let nodes = if span <= p.per_node { 1 } else { (span / p.per_node).max(1) };
        let members_per_node = (size / nodes).max(1);
        let sharing = (p.per_node / members_per_node).max(1);
        Group { size, nodes, sharing }
    }

    /// Seconds to all-reduce `bytes` per member (α–β), each ring step
    /// costing a latency α. Inside a node: a ring over the node's links.
    /// Across nodes: NCCL's default algorithms (ring, and the double binary
    /// tree of the same bus bandwidth) run over all `size` members, so each
    /// node's NIC carries 2(N − 1)/N of the bytes for every group on the node
    /// (`sharing`), N the members; nccl-tests' bus bandwidth of a multi-node
    /// all-reduce is that NIC rate. The hierarchical all-reduce (reduce-
    /// scatter in the node, all-reduce of 1/q across, all-gather), whose NIC
    /// carries only 2(n − 1)/n of the bytes over n nodes, needs CollNet/SHARP
    /// or a framework's own hierarchy and is not what NCCL runs by default.
    /// The ring is pipelined: its slowest kind of link paces it.
    /// The intra-node part scales with `k.intra`, the cross-node part with `k.net`.
    pub fn all_reduce_s(&self, bytes: f64, gpu: &GpuSpec, k: LinkScale) -> f64 {
        if self.size <= 1 || bytes <= 0.0 {
            return 0.0;
        }
        let q = (self.size / self.nodes).max(1) as f64;
        let intra = intra_ring_bw(gpu, q);
        if self.nodes <= 1 {
            let intra_s = 2.0 * (q - 1.0) / q * bytes / intra;
            let intra_lat = 2.0 * (q - 1.0) * ALPHA_INTRA_S + ALPHA_INTRA_S;
            return (intra_s + intra_lat) * k.intra;
        }
        let n = self.nodes as f64;
        let members = self.size as f64;
        let ring_bytes = 2.0 * (members - 1.0) / members * bytes;
        let intra_s = if q > 1.0 { ring_bytes / intra } else { 0.0 };
        let inter_s = ring_bytes * self.sharing as f64 / achieved_network_bw(gpu) * slowest_link(n);
        // Latency: the ring's 2(N − 1) steps each wait for a network hop.
        let inter_lat = 2.0 * (members - 1.0) * ALPHA_INTER_S;
        (intra_s * k.intra).max((inter_s + inter_lat) * k.net)
    }

    /// Seconds to all-gather (or reduce-scatter) `bytes` per member: half an all-reduce.
    pub fn all_gather_s(&self, bytes: f64, gpu: &GpuSpec, k: LinkScale) -> f64 {
        0.5 * self.all_reduce_s(bytes, gpu, k)
    }

    /// Seconds for an all-to-all in which every member sends `bytes`, split
    /// evenly over the members (MoE token dispatch/combine). Inside a node
    /// each member sends the (q − 1)/q for its node's peers over its own
    /// links; across nodes the (n − 1)/n for other nodes leaves through the
    /// node's network link, which carries that share of *every* member on
    /// the node (and of the other groups there) at once — unlike a ring,
    /// whose network traffic per node is one member's worth. The point-to-
    /// point sends run concurrently: one latency per link kind.
    pub fn all_to_all_s(&self, bytes: f64, gpu: &GpuSpec, k: LinkScale) -> f64 {
        if self.size <= 1 || bytes <= 0.0 {
            return 0.0;
        }
        let q = (self.size / self.nodes).max(1) as f64;
        let n = self.nodes as f64;
        let intra_s = if q > 1.0 { (q - 1.0) / (q * n) * bytes / intra_ring_bw(gpu, q) + ALPHA_INTRA_S } else { 0.0 };
        let inter_s = if n > 1.0 {
            (n - 1.0) / n * bytes * q * self.sharing as f64 / achieved_network_bw(gpu) + ALPHA_INTER_S
        } else {
            0.0
        };
        intra_s * k.intra + inter_s * k.net
    }
}

/// Seconds the pipeline's sends lose to gradient sync that shares their
/// network link. While data-parallel gradients are reduced behind the
/// backward pass (`dp_hidden_net_s`: the network time of the hidden part),
/// the stage boundary's sends of the same window (`pp_net_in_window_s`) go
/// through the same NIC; one link carries one byte at a time, so as long as
/// both are active each gets half of it and the sends, on the critical path
/// of the 1F1B schedule, take as long again as the traffic they share with:
/// the shorter of the two.
pub(crate) fn nic_contention_s(pp_net_in_window_s: f64, dp_hidden_net_s: f64) -> f64 {
    pp_net_in_window_s.min(dp_hidden_net_s).max(0.0)
}

/// Seconds to send `bytes` from one stage to the next.
pub(crate) fn p2p_s(bytes: f64, cross_node: bool, gpu: &GpuSpec, sharing: u32, k: LinkScale) -> f64 {
    if bytes <= 0.0 {
        return 0.0;
    }
    if cross_node {
        (bytes * sharing.max(1) as f64 / achieved_network_bw(gpu) + ALPHA_INTER_S) * k.net
    } else {
        (bytes / intra_ring_bw(gpu, 2.0) + ALPHA_INTRA_S) * k.intra
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuCatalog;

    const ONE: LinkScale = LinkScale { intra: 1.0, net: 1.0 };

    #[test]
    fn groups_inside_a_node_use_the_fast_link() {
        let a100 = GpuCatalog::builtin().get("a100").unwrap().clone();
        let one = Placement::pack(8, 8).unwrap();
        let two = Placement::pack(16, 8).unwrap();
        assert_eq!(Placement::pack(12, 8), None);
        let g1 = Group::new(8, 1, one);
        let g2 = Group::new(16, 1, two);
        assert_eq!((g1.nodes, g2.nodes), (1, 2));
        let b = 1e9;
        assert!(g2.all_reduce_s(b, &a100, ONE) > 5.0 * g1.all_reduce_s(b, &a100, ONE));
        // DP with stride 2 (TP=2) inside two nodes: 8 members, 4 per node, 2 groups share each NIC.
        let dp = Group::new(8, 2, two);
        assert_eq!((dp.nodes, dp.sharing), (2, 2));
    }

    /// An all-to-all inside a node costs about what an all-gather of the
    /// same bytes does; across nodes every member's off-node share goes
    /// through the node's one network link: q(n − 1)/n of the bytes for q
    /// members a node on n nodes, against the ring's (N − 1)/N (4 B against
    /// 0.94 B on two nodes of 8).
    #[test]
    fn all_to_all_across_nodes_shares_the_nic() {
        let a100 = GpuCatalog::builtin().get("a100").unwrap().clone();
        let inside = Group::new(8, 1, Placement::pack(8, 8).unwrap());
        let b = 64e6;
        let (a2a, ag) = (inside.all_to_all_s(b, &a100, ONE), inside.all_gather_s(b, &a100, ONE));
        assert!(a2a > 0.5 * ag && a2a < 2.0 * ag, "{a2a} vs {ag}");
        let across = Group::new(16, 1, Placement::pack(16, 8).unwrap());
        let (a2a, ag) = (across.all_to_all_s(b, &a100, ONE), across.all_gather_s(b, &a100, ONE));
        assert!(a2a > 3.5 * ag && a2a < 5.0 * ag, "{a2a} vs {ag}");
        assert_eq!(Group::new(1, 1, Placement::pack(1, 8).unwrap()).all_to_all_s(b, &a100, ONE), 0.0);
    }

    /// A ring across more nodes waits for the slowest of more links: its
    /// network time per byte grows with the node count (none on one node).
    #[test]
    fn rings_across_more_nodes_wait_for_a_slower_link() {
        assert_eq!(slowest_link(1.0), 1.0);
        assert!(slowest_link(2.0) > 1.0 && slowest_link(8.0) > slowest_link(2.0) && slowest_link(8.0) < 1.0 + 3.0 * LINK_CV);
        let v100 = GpuCatalog::builtin().get("v100").unwrap().clone();
        let per_byte = |n: u32| {
            let g = Group::new(n, 1, Placement::pack(n, 1).unwrap());
            g.all_reduce_s(1e9, &v100, ONE) / (2.0 * (n as f64 - 1.0) / n as f64)
        };
        assert!(per_byte(8) > 1.05 * per_byte(2), "{} vs {}", per_byte(8), per_byte(2));
    }

    /// Undeclared Ethernet under NCCL's sockets: a 10 Gb/s link is nearly
    /// filled, a faster one is capped by the host; a declared network keeps
    /// its derated rate.
    #[test]
    fn socket_transport_fills_slow_links_and_caps_fast_ones() {
        let cat = GpuCatalog::builtin();
        let (k80, a100) = (cat.get("k80").unwrap(), cat.get("a100").unwrap());
        assert!((achieved_network_bw(k80) - 0.9 * k80.inter_node_gbs * 1e9).abs() < 1.0);
        assert_eq!(achieved_network_bw(a100), SOCKET_HOST_CAP);
        assert!(achieved_network_bw(a100) < 0.5 * network_bw(a100));
        let ib = GpuCatalog::with_overrides_toml("[gpu.a100]\ninter_node_gbs = 25\n").unwrap().get("a100").unwrap().clone();
        assert_eq!(achieved_network_bw(&ib), 25e9 * INTER_NODE_EFFICIENCY);
    }

    /// A network declared as plain Ethernet (`inter_node_transport = "tcp"`)
    /// keeps its declared rate under the socket model: a 10 Gb/s link nearly
    /// filled, not halved as RDMA's derate would; a fast one capped by the host.
    #[test]
    fn a_declared_tcp_network_runs_at_socket_rates() {
        let tcp10 = GpuCatalog::with_overrides_toml("[gpu.v100]\ninter_node_gbs = 1.25\ninter_node_transport = \"tcp\"\n").unwrap().get("v100").unwrap().clone();
        assert!(tcp10.network_declared && tcp10.inter_node_transport == Some(Transport::Tcp));
        assert!((achieved_network_bw(&tcp10) - 0.9 * 1.25e9).abs() < 1.0);
        let rdma10 = GpuCatalog::with_overrides_toml("[gpu.v100]\ninter_node_gbs = 1.25\n").unwrap().get("v100").unwrap().clone();
        assert_eq!(achieved_network_bw(&rdma10), 1.25e9 * INTER_NODE_EFFICIENCY);
        let tcp100 = GpuCatalog::with_overrides_toml("[gpu.v100]\ninter_node_gbs = 12.5\ninter_node_transport = \"tcp\"\n").unwrap().get("v100").unwrap().clone();
        assert_eq!(achieved_network_bw(&tcp100), SOCKET_HOST_CAP);
        let bad = GpuCatalog::with_overrides_toml("[gpu.v100]\ninter_node_transport = \"carrier-pigeon\"\n").unwrap_err().to_string();
        assert!(bad.contains("carrier-pigeon") || bad.contains("inter_node_transport"), "{bad}");
    }

    /// NCCL's ring across nodes puts the whole group's traffic through each
    /// node's NIC: 8 GPUs a node on 8 nodes take longer than one GPU a node
    /// on 8 nodes for the same all-reduce (2·63/64 against 2·7/8 of the
    /// bytes), and 8 GPUs on each of 2 nodes nearly twice as long as one
    /// GPU on each (2·15/16 against 2·1/2), where a hierarchical all-reduce
    /// would cost the same. Two groups on a node (TP 2 inside it) share its
    /// NIC and take twice as long.
    #[test]
    fn every_member_of_a_cross_node_ring_loads_its_nodes_nic() {
        let v100 = GpuCatalog::builtin().get("v100").unwrap().clone();
        let b = 256e6;
        let at = |gpus: u32, node: u32| Group::new(gpus, 1, Placement::pack(gpus, node).unwrap()).all_reduce_s(b, &v100, ONE);
        let (full8, one8) = (at(64, 8), at(8, 1));
        assert!(full8 > 1.1 * one8, "{full8} vs {one8}");
        let (full2, one2) = (at(16, 8), at(2, 1));
        assert!(full2 > 1.8 * one2 && full2 < 1.9 * one2, "{full2} vs {one2}");
        // DP 8 with stride 2 (TP 2) over 2 nodes of 8: 4 members a node, 2 groups share each NIC.
        let p = Placement::pack(16, 8).unwrap();
        let (shared, alone) = (Group::new(8, 2, p), Group::new(8, 1, p));
        assert_eq!((shared.sharing, alone.sharing), (2, 1));
        let r = shared.all_reduce_s(b, &v100, ONE) / Group::new(8, 1, Placement::pack(8, 4).unwrap()).all_reduce_s(b, &v100, ONE);
        assert!((r - 2.0).abs() < 0.01, "{r}");
        // Inside one node nothing crosses the network: NVLink is far faster.
        assert!(at(8, 8) < 0.05 * one8);
    }

    /// Contention costs the shorter of the two overlapped network times:
    /// nothing without either, the sends' own time when sync traffic
    /// outlasts them.
    #[test]
    fn sends_sharing_a_nic_with_gradient_sync_wait_for_the_shorter() {
        assert_eq!(nic_contention_s(0.0, 0.5), 0.0);
        assert_eq!(nic_contention_s(0.2, 0.0), 0.0);
        assert_eq!(nic_contention_s(0.2, 0.5), 0.2);
        assert_eq!(nic_contention_s(0.2, 0.05), 0.05);
        assert_eq!(nic_contention_s(0.2, -1.0), 0.0);
    }

    #[test]
    fn pcie_rings_slow_down_across_sockets() {
        let cat = GpuCatalog::builtin();
        let (p100, v100) = (cat.get("p100").unwrap(), cat.get("v100").unwrap());
        // Achieved ring bandwidth is below the link rate.
        assert!(intra_ring_bw(v100, 8.0) < v100.intra_node_gbs * 1e9);
        // PCIe: 8 GPUs span two sockets and get less bandwidth than 4; NVLink does not.
        assert!(intra_ring_bw(p100, 8.0) < 0.7 * intra_ring_bw(p100, 4.0));
        assert_eq!(intra_ring_bw(v100, 8.0), intra_ring_bw(v100, 4.0));
        let at = |n| Group::new(n, 1, Placement::pack(n, 8).unwrap()).all_reduce_s(1e8, p100, ONE);
        assert!(at(8) > 1.5 * at(4), "{} vs {}", at(8), at(4));
    }

    /// Unmeasured, the network is the lower of the catalog's fabric and 25 Gb/s
    /// Ethernet; a declared rate is taken as is. The two link scales act on
    /// their own parts only.
    #[test]
    fn unmeasured_network_is_capped_and_scales_split_by_link() {
        let cat = GpuCatalog::builtin();
        let v100 = cat.get("v100").unwrap().clone();
        assert!(!v100.network_declared);
        assert_eq!(network_bw(&v100), UNMEASURED_NET_GBS * 1e9);
        let k80 = cat.get("k80").unwrap();
        assert_eq!(network_bw(k80), k80.inter_node_gbs * 1e9);
        let declared = GpuCatalog::with_overrides_toml("[gpu.v100]\ninter_node_gbs = 12.5\n").unwrap().get("v100").unwrap().clone();
        assert!(declared.network_declared);
        assert_eq!(network_bw(&declared), 12.5e9);
        let spread = Group::new(2, 1, Placement::pack(2, 1).unwrap());
        let inside = Group::new(2, 1, Placement::pack(2, 8).unwrap());
        let net2 = LinkScale { intra: 1.0, net: 2.0 };
        // One GPU on each of two nodes: all of the time is the network's.
        let r = spread.all_reduce_s(1e8, &v100, net2) / spread.all_reduce_s(1e8, &v100, ONE);
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        assert_eq!(inside.all_reduce_s(1e8, &v100, net2), inside.all_reduce_s(1e8, &v100, ONE));
        assert!(spread.all_reduce_s(1e8, &declared, ONE) < 0.5 * spread.all_reduce_s(1e8, &v100, ONE));
    }
}

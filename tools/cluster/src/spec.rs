//! What cluster to build: directory, ports, node groups, plugins.
use crate::error::{ClusterError, Result};
use std::path::{Path, PathBuf};

/// Default first port of the cluster's port range.
pub const DEFAULT_PORT_BASE: u16 = 17800;
/// Default Slurm cluster name.
pub const DEFAULT_CLUSTER_NAME: &str = "cellsched";
/// Where Debian installs the stock Slurm plugins.
pub const STOCK_PLUGIN_DIR: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
/// Where `scripts/slurm.sh build 22.05.8 front-end` installs the Slurm build
/// an emulated cluster ([`LocalClusterSpec::front_end`]) runs on by default.
pub const FRONT_END_PREFIX: &str = "/opt/cellsched/slurm-22.05.8-fe";
/// Name of the one slurmd of an emulated cluster (`FrontendName=`).
pub const FRONT_END_NAME: &str = "fe";
/// Most nodes per group with one slurmd per node.
pub const MAX_GROUP_NODES: u32 = 64;
/// Most nodes in all of an emulated (front-end) cluster.
pub const MAX_EMULATED_NODES: u32 = 20_000;

/// A group of identical nodes `PREFIX-1 .. PREFIX-COUNT`, each with
/// `gpus_per_node` GPUs of `gpu_type` (also the node's `Feature=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// Node name prefix; nodes are named `PREFIX-1`, `PREFIX-2`, ...
    pub prefix: String,
    /// Number of nodes in the group.
    pub count: u32,
    /// GRES type of the GPUs (`a100`), also the node feature.
    pub gpu_type: String,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// `CPUs=` advertised by each node (honoured via `config_overrides`).
    pub cpus: u32,
    /// `RealMemory=` in MiB advertised by each node.
    pub real_memory_mb: u64,
}

impl NodeGroup {
    /// A group named after its GPU type with 16 CPUs and 16 GiB per node.
    pub fn new(gpu_type: &str, count: u32, gpus_per_node: u32) -> Self {
        NodeGroup {
            prefix: gpu_type.to_string(),
            count,
            gpu_type: gpu_type.to_string(),
            gpus_per_node,
            cpus: 16,
            real_memory_mb: 16000,
        }
    }

    /// Parses a node-group list `TYPE:NODESxGPUS[,...]`, e.g. `v100:2x8,p100:1x8`
    /// (`CELLSCHED_CLUSTER_GROUPS`, `cellsched cluster --groups`), at most
    /// [`MAX_GROUP_NODES`] nodes per group.
    pub fn parse_list(s: &str) -> Result<Vec<NodeGroup>> {
        Self::parse_list_max(s, MAX_GROUP_NODES)
    }

    /// [`NodeGroup::parse_list`] with at most `max_nodes` nodes per group.
    pub fn parse_list_max(s: &str, max_nodes: u32) -> Result<Vec<NodeGroup>> {
        let mut out: Vec<NodeGroup> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let bad = || ClusterError::InvalidSpec(format!("node group '{item}': expected TYPE:NODESxGPUS, e.g. v100:2x8"));
            let (ty, shape) = item.split_once(':').ok_or_else(bad)?;
            let (n, g) = shape.split_once('x').ok_or_else(bad)?;
            let (n, g): (u32, u32) = (n.parse().map_err(|_| bad())?, g.parse().map_err(|_| bad())?);
            let ty = ty.trim().to_ascii_lowercase();
            if n == 0 || n > max_nodes || g == 0 || g > 64 || ty.is_empty() || !ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ClusterError::InvalidSpec(format!(
                    "node group '{item}': expected TYPE:NODESxGPUS with a letters-and-digits type, 1..={max_nodes} nodes and 1..=64 GPUs"
                )));
            }
            if out.iter().any(|o| o.gpu_type == ty) {
                return Err(ClusterError::InvalidSpec(format!("node group '{item}': GPU type '{ty}' given twice")));
            }
            out.push(NodeGroup::new(&ty, n, g));
        }
        if out.is_empty() {
            return Err(ClusterError::InvalidSpec(format!("node groups '{s}': none given")));
        }
        Ok(out)
    }

    /// The node groups of an emulated cluster of `nodes` nodes (at least 3):
    /// 40% `a100` with 8 GPUs each, 40% `v100` with 8, the rest `a10` with 4.
    pub fn emulated(nodes: u32) -> Result<Vec<NodeGroup>> {
        if !(3..=MAX_EMULATED_NODES).contains(&nodes) {
            return Err(ClusterError::InvalidSpec(format!(
                "--nodes {nodes}: an emulated cluster has 3..={MAX_EMULATED_NODES} nodes (three GPU types)"
            )));
        }
        let a100 = (nodes * 2 / 5).max(1);
        let v100 = (nodes * 2 / 5).max(1);
        Ok(vec![NodeGroup::new("a100", a100, 8), NodeGroup::new("v100", v100, 8), NodeGroup::new("a10", nodes - a100 - v100, 4)])
    }

    /// The list form [`NodeGroup::parse_list`] reads.
    pub fn list_text(groups: &[NodeGroup]) -> String {
        groups.iter().map(|g| format!("{}:{}x{}", g.gpu_type, g.count, g.gpus_per_node)).collect::<Vec<_>>().join(",")
    }

    /// The node names of this group, in order.
    pub fn node_names(&self) -> Vec<String> {
        (1..=self.count).map(|i| format!("{}-{}", self.prefix, i)).collect()
    }

    /// Slurm hostlist form: `a100-[1-2]` or `a10-1`.
    pub fn hostlist(&self) -> String {
        if self.count == 1 {
            format!("{}-1", self.prefix)
        } else {
            format!("{}-[1-{}]", self.prefix, self.count)
        }
    }
}

/// The whole description of a local cluster.
#[derive(Debug, Clone)]
pub struct LocalClusterSpec {
    /// Directory holding every file of the cluster (config, state, logs, DB).
    pub dir: PathBuf,
    /// First port; see [`Ports`] for the layout.
    pub port_base: u16,
    /// Slurm `ClusterName=`.
    pub cluster_name: String,
    /// Node groups, all in partition `gpu`.
    pub groups: Vec<NodeGroup>,
    /// Load cellsched's plugins when their `.so` files exist.
    pub with_plugins: bool,
    /// Where `cargo build --release` left the plugin `.so` files.
    pub plugin_build_dir: PathBuf,
    /// Content of `etc/cellsched.toml`; `None` writes a commented default.
    pub cellsched_toml: Option<String>,
    /// Extra `key=value` arguments on the plugstack.conf line of the SPANK plugin.
    pub spank_args: Vec<String>,
    /// Directory of `slurmctld`, `slurmd`, `slurmdbd`.
    pub slurm_sbin: PathBuf,
    /// Directory of the Slurm client commands (`sbatch`, `sacctmgr`, ...).
    pub slurm_bin: PathBuf,
    /// Directory of the stock Slurm plugins linked into the private PluginDir.
    pub stock_plugin_dir: PathBuf,
    /// Slurm `AuthType=` / `CredType=` of the test cluster.
    pub auth_type: String,
    /// Slurm `CredType=`.
    pub cred_type: String,
    /// Emulated cluster: one slurmd ([`FRONT_END_NAME`], `FrontendName=`)
    /// stands for every node and runs every job, so thousands of nodes fit
    /// on one machine. Needs a Slurm built with `--enable-front-end`
    /// (`scripts/slurm.sh build 22.05.8 front-end`); without it, one slurmd per node.
    pub front_end: bool,
    /// Slurm `SchedulerParameters=`; `None`: the test cluster's fast cycles
    /// ([`DEV_SCHEDULER_PARAMETERS`]).
    pub scheduler_parameters: Option<String>,
}

/// The test cluster's `SchedulerParameters`: a main scheduling pass every 2 s
/// and backfill every second (Slurm's defaults: 60 s and 30 s), so tests see
/// jobs start quickly.
pub const DEV_SCHEDULER_PARAMETERS: &str = "sched_interval=2,bf_interval=1,bf_resolution=1,sched_min_interval=100000";

/// Checks a `SchedulerParameters=` value: one line of comma-separated
/// `key` or `key=value` words (letters, digits, `_ - . : / =`).
pub fn parse_scheduler_parameters(s: &str) -> Result<String> {
    let s = s.trim();
    let bad = |why: &str| ClusterError::InvalidSpec(format!("scheduler parameters {s:?}: {why} (want e.g. sched_interval=2,bf_interval=30)"));
    if s.is_empty() {
        return Err(bad("empty"));
    }
    for word in s.split(',') {
        if word.is_empty() {
            return Err(bad("empty word between commas"));
        }
        if let Some(c) = word.chars().find(|c| !(c.is_ascii_alphanumeric() || "_-.:/=".contains(*c))) {
            return Err(bad(&format!("character {c:?} in {word:?}")));
        }
    }
    Ok(s.to_string())
}

impl Default for LocalClusterSpec {
    /// The standard heterogeneous cluster: `a100-[1-2]` (4 GPUs each),
    /// `v100-[1-2]` (8 each), `a10-1` (4), plugins on, ports from 17800.
    fn default() -> Self {
        LocalClusterSpec {
            dir: default_dir(),
            port_base: DEFAULT_PORT_BASE,
            cluster_name: DEFAULT_CLUSTER_NAME.to_string(),
            groups: vec![NodeGroup::new("a100", 2, 4), NodeGroup::new("v100", 2, 8), NodeGroup::new("a10", 1, 4)],
            with_plugins: true,
            plugin_build_dir: default_plugin_build_dir(),
            cellsched_toml: None,
            spank_args: Vec::new(),
            slurm_sbin: PathBuf::from("/usr/sbin"),
            slurm_bin: PathBuf::from("/usr/bin"),
            stock_plugin_dir: PathBuf::from(STOCK_PLUGIN_DIR),
            auth_type: "auth/none".to_string(),
            cred_type: "cred/none".to_string(),
            front_end: false,
            scheduler_parameters: None,
        }
    }
}

impl LocalClusterSpec {
    /// The default spec adjusted by the environment: `CELLSCHED_CLUSTER_DIR`,
    /// `CELLSCHED_PORT_BASE`, `CELLSCHED_PLUGIN_BUILD_DIR`, `CELLSCHED_SLURM_SBIN`
    /// (its sibling `bin/` then holds the client commands),
    /// `CELLSCHED_CLUSTER_TOML` (a file copied to `etc/cellsched.toml`),
    /// `CELLSCHED_CLUSTER_GROUPS` (node groups, see [`NodeGroup::parse_list`]),
    /// and `CELLSCHED_CLUSTER_SCHED_PARAMS` (`SchedulerParameters=`, see
    /// [`parse_scheduler_parameters`]).
    pub fn from_env() -> Result<Self> {
        let mut spec = LocalClusterSpec::default();
        if let Some(f) = env_nonempty("CELLSCHED_CLUSTER_TOML") {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| ClusterError::InvalidSpec(format!("CELLSCHED_CLUSTER_TOML={f}: cannot read: {e}")))?;
            spec.cellsched_toml = Some(text);
        }
        if let Some(d) = env_nonempty("CELLSCHED_CLUSTER_DIR") {
            spec.dir = PathBuf::from(d);
        }
        if let Some(g) = env_nonempty("CELLSCHED_CLUSTER_GROUPS") {
            spec.groups = NodeGroup::parse_list(&g)?;
        }
        if let Some(p) = env_nonempty("CELLSCHED_PORT_BASE") {
            spec.port_base = parse_port_base(&p)?;
        }
        if let Some(d) = env_nonempty("CELLSCHED_PLUGIN_BUILD_DIR") {
            spec.plugin_build_dir = PathBuf::from(d);
        }
        if let Some(d) = env_nonempty("CELLSCHED_SLURM_SBIN") {
            spec.set_slurm_sbin(PathBuf::from(d));
        }
        if let Some(p) = env_nonempty("CELLSCHED_CLUSTER_SCHED_PARAMS") {
            spec.scheduler_parameters = Some(parse_scheduler_parameters(&p)?);
        }
        Ok(spec)
    }

    /// Uses the Slurm daemons in `sbin`; its sibling `bin/` (client commands)
    /// and `lib/slurm/` (stock plugins) too when present.
    pub fn set_slurm_sbin(&mut self, sbin: PathBuf) {
        if let Some(parent) = sbin.parent() {
            let bin = parent.join("bin");
            if bin.is_dir() {
                self.slurm_bin = bin;
            }
            let plugins = parent.join("lib/slurm");
            if plugins.is_dir() {
                self.stock_plugin_dir = plugins;
            }
        }
        self.slurm_sbin = sbin;
    }

    /// Makes this an emulated cluster of `nodes` nodes ([`NodeGroup::emulated`],
    /// [`LocalClusterSpec::front_end`]); unless `keep_sbin`, on the Slurm build in
    /// [`FRONT_END_PREFIX`].
    pub fn emulate(&mut self, nodes: u32, keep_sbin: bool) -> Result<()> {
        self.groups = NodeGroup::emulated(nodes)?;
        self.front_end = true;
        if !keep_sbin {
            self.set_slurm_sbin(Path::new(FRONT_END_PREFIX).join("sbin"));
        }
        Ok(())
    }

    /// File in the cluster directory recording the node groups of the last `up`.
    pub fn saved_groups_file(&self) -> PathBuf {
        self.dir.join("etc").join("node-groups")
    }

    /// The text of [`LocalClusterSpec::saved_groups_file`]: the group list, and a
    /// `front-end` line for an emulated cluster.
    pub fn saved_groups_text(&self) -> String {
        let fe = if self.front_end { "front-end\n" } else { "" };
        format!("{}\n{fe}", NodeGroup::list_text(&self.groups))
    }

    /// Takes the node groups (and front-end mode, with its Slurm build unless
    /// `keep_sbin`) the cluster in `dir` was last brought up with (so `down`,
    /// `status` and `env` find its daemons), when recorded.
    pub fn use_saved_groups(&mut self, keep_sbin: bool) -> Result<()> {
        match std::fs::read_to_string(self.saved_groups_file()) {
            Ok(text) => {
                let mut lines = text.lines();
                let list = lines.next().unwrap_or("").trim();
                let fe = lines.any(|l| l.trim() == "front-end");
                self.groups = NodeGroup::parse_list_max(list, if fe { MAX_EMULATED_NODES } else { MAX_GROUP_NODES })?;
                if fe && !self.front_end {
                    self.front_end = true;
                    if !keep_sbin {
                        self.set_slurm_sbin(Path::new(FRONT_END_PREFIX).join("sbin"));
                    }
                }
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    /// Checks the spec for mistakes that would only show up as daemon failures.
    pub fn validate(&self) -> Result<()> {
        if self.groups.is_empty() {
            return Err(ClusterError::InvalidSpec("no node groups".into()));
        }
        let mut names = std::collections::HashSet::new();
        for g in &self.groups {
            if g.count == 0 || g.gpus_per_node == 0 || g.cpus == 0 {
                return Err(ClusterError::InvalidSpec(format!(
                    "node group {}: count, gpus_per_node and cpus must be positive",
                    g.prefix
                )));
            }
            let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok(&g.prefix) || !ok(&g.gpu_type) {
                return Err(ClusterError::InvalidSpec(format!(
                    "node group {:?}/{:?}: prefix and GPU type must be alphanumeric",
                    g.prefix, g.gpu_type
                )));
            }
            if !names.insert(g.prefix.clone()) {
                return Err(ClusterError::InvalidSpec(format!("node group prefix {} used twice", g.prefix)));
            }
        }
        if !self.dir.is_absolute() {
            return Err(ClusterError::InvalidSpec(format!("cluster dir {} must be an absolute path", self.dir.display())));
        }
        // MariaDB's unix socket path must fit in sun_path (108 bytes).
        let sock = crate::layout::Layout::new(&self.dir).mariadb_socket();
        if sock.as_os_str().len() > 100 {
            return Err(ClusterError::InvalidSpec(format!(
                "cluster dir {} is too long for a unix socket path; use a shorter --dir",
                self.dir.display()
            )));
        }
        self.ports()?;
        Ok(())
    }

    /// All node names, in group order.
    pub fn node_names(&self) -> Vec<String> {
        self.groups.iter().flat_map(|g| g.node_names()).collect()
    }

    /// The `-N` name of each slurmd: one per node, or the one front end.
    pub fn slurmd_names(&self) -> Vec<String> {
        if self.front_end {
            vec![FRONT_END_NAME.to_string()]
        } else {
            self.node_names()
        }
    }

    /// The port layout; fails when the range runs past 65535.
    pub fn ports(&self) -> Result<Ports> {
        let n = self.slurmd_names().len() as u32;
        let last = self.port_base as u32 + 3 + n;
        if self.port_base < 1024 || last > 65535 {
            return Err(ClusterError::InvalidSpec(format!(
                "port base {} leaves no room for {} ports below 65536 (use 1024..{})",
                self.port_base,
                3 + n,
                65535 - 3 - n
            )));
        }
        let b = self.port_base;
        let slurmd = self.slurmd_names().into_iter().enumerate().map(|(i, name)| (name, b + 3 + i as u16)).collect();
        Ok(Ports { slurmctld: b, slurmdbd: b + 1, mariadb: b + 2, slurmd })
    }

    /// The distinct GPU types, in group order.
    pub fn gpu_types(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for g in &self.groups {
            if !out.contains(&g.gpu_type) {
                out.push(g.gpu_type.clone());
            }
        }
        out
    }
}

/// The ports of one cluster: `base` slurmctld, `base+1` slurmdbd,
/// `base+2` MariaDB, `base+3..` one per slurmd in node order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    /// slurmctld's port (`base`).
    pub slurmctld: u16,
    /// slurmdbd's port (`base+1`).
    pub slurmdbd: u16,
    /// MariaDB's port on 127.0.0.1 (`base+2`).
    pub mariadb: u16,
    /// (slurmd name, port) per slurmd: node names, or the front end's.
    pub slurmd: Vec<(String, u16)>,
}

impl Ports {
    /// Every port with what it is for.
    pub fn all(&self) -> Vec<(u16, String)> {
        let mut v = vec![
            (self.slurmctld, "slurmctld".to_string()),
            (self.slurmdbd, "slurmdbd".to_string()),
            (self.mariadb, "MariaDB".to_string()),
        ];
        v.extend(self.slurmd.iter().map(|(n, p)| (*p, format!("slurmd {n}"))));
        v
    }
}

/// Parses a port base given as text, naming the bad value on error.
pub fn parse_port_base(s: &str) -> Result<u16> {
    s.trim()
        .parse::<u16>()
        .map_err(|_| ClusterError::InvalidSpec(format!("port base {s:?} is not a port number (1024..65000)")))
}

/// `$XDG_STATE_HOME/cellsched/cluster`, else `~/.local/state/cellsched/cluster`.
pub fn default_dir() -> PathBuf {
    if let Some(x) = env_nonempty("XDG_STATE_HOME") {
        return Path::new(&x).join("cellsched/cluster");
    }
    let home = env_nonempty("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".local/state/cellsched/cluster")
}

/// `<workspace>/target/release`, where `cargo build --release` puts the plugins.
pub fn default_plugin_build_dir() -> PathBuf {
    if let Some(t) = env_nonempty("CARGO_TARGET_DIR") {
        return Path::new(&t).join("release");
    }
    // tools/cluster -> workspace root
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap_or(Path::new("."));
    ws.join("target/release")
}

fn env_nonempty(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_parameters_are_one_line_of_words() {
        assert_eq!(parse_scheduler_parameters(" sched_interval=2,bf_continue ").unwrap(), "sched_interval=2,bf_continue");
        for bad in ["", "a=1,,b=2", "a=1\nSlurmUser=x", "a=1 b=2", "a=1,"] {
            let e = parse_scheduler_parameters(bad).unwrap_err().to_string();
            assert!(e.contains("scheduler parameters"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn default_groups_and_hostlists() {
        let s = LocalClusterSpec::default();
        assert_eq!(s.node_names(), ["a100-1", "a100-2", "v100-1", "v100-2", "a10-1"]);
        let hl: Vec<_> = s.groups.iter().map(|g| g.hostlist()).collect();
        assert_eq!(hl, ["a100-[1-2]", "v100-[1-2]", "a10-1"]);
        assert_eq!(s.gpu_types(), ["a100", "v100", "a10"]);
    }

    #[test]
    fn port_layout_is_distinct_and_ordered() {
        let s = LocalClusterSpec { port_base: 20000, ..LocalClusterSpec::default() };
        let p = s.ports().unwrap();
        assert_eq!((p.slurmctld, p.slurmdbd, p.mariadb), (20000, 20001, 20002));
        assert_eq!(p.slurmd[0], ("a100-1".to_string(), 20003));
        assert_eq!(p.slurmd[4], ("a10-1".to_string(), 20007));
        let mut all: Vec<u16> = p.all().into_iter().map(|x| x.0).collect();
        all.dedup();
        assert_eq!(all.len(), 8);
    }

    #[test]
    fn port_base_out_of_range_is_rejected() {
        let s = LocalClusterSpec { port_base: 65533, ..LocalClusterSpec::default() };
        let e = s.ports().unwrap_err().to_string();
        assert!(e.contains("65533"), "{e}");
        assert!(parse_port_base("17x").unwrap_err().to_string().contains("17x"));
        assert_eq!(parse_port_base(" 18000 ").unwrap(), 18000);
    }

    #[test]
    fn validate_rejects_bad_groups_and_relative_dir() {
        let mut s = LocalClusterSpec { dir: "/tmp/x".into(), ..LocalClusterSpec::default() };
        s.validate().unwrap();
        s.groups.push(NodeGroup::new("a100", 1, 4));
        assert!(s.validate().unwrap_err().to_string().contains("used twice"));
        s.groups.pop();
        s.groups[0].gpu_type = "a-100".into();
        assert!(s.validate().unwrap_err().to_string().contains("alphanumeric"));
        let s = LocalClusterSpec { dir: "rel/dir".into(), ..LocalClusterSpec::default() };
        assert!(s.validate().unwrap_err().to_string().contains("absolute"));
    }

    #[test]
    fn emulated_groups_and_saved_mode_round_trip() {
        let g = NodeGroup::emulated(1000).unwrap();
        assert_eq!(NodeGroup::list_text(&g), "a100:400x8,v100:400x8,a10:200x4");
        assert_eq!(NodeGroup::emulated(3).unwrap().iter().map(|x| x.count).sum::<u32>(), 3);
        assert!(NodeGroup::emulated(2).is_err() && NodeGroup::emulated(MAX_EMULATED_NODES + 1).is_err());
        let d = std::env::temp_dir().join(format!("cs-saved-{}", std::process::id()));
        std::fs::create_dir_all(d.join("etc")).unwrap();
        let mut s = LocalClusterSpec { dir: d.clone(), ..LocalClusterSpec::default() };
        s.emulate(1000, true).unwrap();
        std::fs::write(s.saved_groups_file(), s.saved_groups_text()).unwrap();
        let mut back = LocalClusterSpec { dir: d.clone(), ..LocalClusterSpec::default() };
        back.use_saved_groups(true).unwrap();
        assert!(back.front_end);
        assert_eq!(back.groups, s.groups);
        assert_eq!(back.slurmd_names(), ["fe"]);
        // A plain cluster's file is the group list alone, as before.
        let plain = LocalClusterSpec { dir: d.clone(), ..LocalClusterSpec::default() };
        assert_eq!(plain.saved_groups_text(), "a100:2x4,v100:2x8,a10:1x4\n");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn node_group_lists_parse_and_print() {
        let g = NodeGroup::parse_list("v100:2x8, P100:1x8,k80:1x8").unwrap();
        assert_eq!(g.iter().map(|x| (x.gpu_type.as_str(), x.count, x.gpus_per_node)).collect::<Vec<_>>(), [("v100", 2, 8), ("p100", 1, 8), ("k80", 1, 8)]);
        assert_eq!(NodeGroup::list_text(&g), "v100:2x8,p100:1x8,k80:1x8");
        for bad in ["", "v100", "v100:2", "v100:0x8", "v100:2x0", "v100:2x8,v100:1x4", "a b:1x1", "v100:100x8"] {
            let e = NodeGroup::parse_list(bad).unwrap_err().to_string();
            assert!(e.contains("node group"), "{bad}: {e}");
        }
    }
}

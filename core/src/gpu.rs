//! The GPU catalog: datasheet numbers per GPU type (peak FLOP/s, memory,
//! links) and the other names of each type (`aliases`), built in from
//! `core/data/gpus.toml` and overridable in TOML, plus
//! [`canonical_gpu_type`] mapping NVML/user names to catalog keys through
//! those aliases.
use crate::error::{close_names, line_of, toml_error, CoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

const BUILTIN_TOML: &str = include_str!("../data/gpus.toml");

/// Intra-node interconnect kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// NVLink / NVSwitch.
    Nvlink,
    /// PCIe (possibly through the host).
    Pcie,
}

/// How NCCL moves data between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// InfiniBand or RoCE with GPUDirect RDMA (NCCL's IB transport).
    Rdma,
    /// Plain Ethernet through the host's TCP stack (NCCL's socket transport):
    /// cloud instances and campus clusters without RDMA.
    Tcp,
}

/// Datasheet description of one GPU type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// Catalog key, lower case (e.g. `a100`, `a100_40g`).
    pub name: String,
    /// Peak dense fp16/bf16 TFLOP/s (tensor cores where present).
    pub fp16_tflops: f64,
    /// Peak fp32 TFLOP/s.
    pub fp32_tflops: f64,
    /// Peak dense TF32 tensor TFLOP/s (None: no TF32 tensor cores, fp32 peak applies).
    #[serde(default)]
    pub tf32_tflops: Option<f64>,
    /// Device memory in GiB.
    pub mem_gib: f64,
    /// Device memory bandwidth in GB/s.
    pub mem_bw_gbs: f64,
    /// Intra-node link kind.
    pub intra_link: Link,
    /// Intra-node per-GPU unidirectional bandwidth in GB/s.
    pub intra_node_gbs: f64,
    /// Typical per-node network bandwidth in GB/s.
    pub inter_node_gbs: f64,
    /// Whether `inter_node_gbs` was declared by the site (its GPU catalog or
    /// the simulator's cluster) rather than the built-in typical value: an
    /// undeclared network is assumed no faster than 25 Gb/s Ethernet.
    #[serde(default)]
    pub network_declared: bool,
    /// How the declared network carries NCCL's traffic (`inter_node_transport`);
    /// None: RDMA for a declared network, TCP for an undeclared one.
    #[serde(default)]
    pub inter_node_transport: Option<Transport>,
    /// Typical GPUs per server.
    pub gpus_per_node: u32,
    /// CUDA compute capability (`9.0` Hopper, `8.0`/`8.6`/`8.9` Ampere and
    /// Ada, `7.0` Volta, ...): the architecture generation, by which
    /// calibration carries what was measured on one type to an unmeasured
    /// type of the same or a near generation. None: unknown.
    #[serde(default)]
    pub compute_capability: Option<f64>,
}

impl GpuSpec {
    /// Peak FLOP/s for a precision (`fp32 == true` for fp32 training).
    pub fn peak_flops(&self, fp32: bool) -> f64 {
        if fp32 { self.fp32_tflops * 1e12 } else { self.fp16_tflops.max(self.fp32_tflops) * 1e12 }
    }

    /// Peak FLOP/s of the matmuls of a training precision.
    pub fn peak_for(&self, precision: crate::model::Precision) -> f64 {
        use crate::model::Precision;
        match precision {
            Precision::Fp16 | Precision::Bf16 => self.peak_flops(false),
            Precision::Tf32 => self.tf32_tflops.unwrap_or(self.fp32_tflops).max(self.fp32_tflops) * 1e12,
            Precision::Fp32 => self.peak_flops(true),
        }
    }

    /// Device memory in bytes.
    pub fn mem_bytes(&self) -> u64 {
        (self.mem_gib * (1u64 << 30) as f64) as u64
    }
}

/// A positive finite number; rejects 0, negatives, NaN at deserialization so
/// TOML errors point at the offending line.
#[derive(Debug, Clone, Copy)]
struct Pos(f64);

impl<'de> Deserialize<'de> for Pos {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Num {
            I(i64),
            F(f64),
        }
        let v = match Num::deserialize(d)? {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        };
        if v.is_finite() && v > 0.0 {
            Ok(Pos(v))
        } else {
            Err(serde::de::Error::custom(format!("expected a positive number, got {v}")))
        }
    }
}

/// One `[gpu.NAME]` table; all fields optional so existing types can be patched.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuPatch {
    fp16_tflops: Option<Pos>,
    fp32_tflops: Option<Pos>,
    tf32_tflops: Option<Pos>,
    mem_gib: Option<Pos>,
    mem_bw_gbs: Option<Pos>,
    intra_link: Option<Link>,
    intra_node_gbs: Option<Pos>,
    inter_node_gbs: Option<Pos>,
    inter_node_transport: Option<Transport>,
    gpus_per_node: Option<Pos>,
    compute_capability: Option<Pos>,
    aliases: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct GpuDoc {
    #[serde(default)]
    gpu: BTreeMap<String, toml::Spanned<GpuPatch>>,
}

/// The set of known GPU types.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuCatalog {
    specs: BTreeMap<String, GpuSpec>,
    /// Other names of each type (lower case; the key itself not included).
    aliases: BTreeMap<String, Vec<String>>,
}

/// The lower-case alphanumeric words of a name: `NVIDIA A100-PCIE-40GB` →
/// `nvidia`, `a100`, `pcie`, `40gb`.
fn words(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()).map(|t| t.to_ascii_lowercase())
}

impl GpuCatalog {
    /// The built-in catalog (K80 … H200).
    pub fn builtin() -> GpuCatalog {
        builtin_ref().clone()
    }

    /// The built-in catalog with `[gpu.NAME]` tables from `toml_text` applied:
    /// fields of existing types are replaced, new types need every field.
    /// Other top-level keys are ignored, so a whole `cellsched.toml` may be passed.
    pub fn with_overrides_toml(toml_text: &str) -> Result<GpuCatalog, CoreError> {
        let mut c = GpuCatalog::builtin();
        c.apply_overrides_toml(toml_text, "<gpu overrides>")?;
        Ok(c)
    }

    /// Applies `[gpu.NAME]` tables to this catalog; `origin` names the source in errors.
    pub fn apply_overrides_toml(&mut self, toml_text: &str, origin: &str) -> Result<(), CoreError> {
        let doc: GpuDoc = toml::from_str(toml_text).map_err(|e| toml_error(origin, toml_text, &e))?;
        for (raw_name, patch) in doc.gpu {
            let line = line_of(toml_text, patch.span().start);
            let name = raw_name.trim().to_ascii_lowercase();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                return Err(CoreError::File {
                    path: origin.to_string(),
                    line: Some(line),
                    msg: format!("invalid GPU type name '{raw_name}': use letters, digits, '_' or '-'"),
                });
            }
            let p = patch.into_inner();
            let missing = |field: &str| CoreError::File {
                path: origin.to_string(),
                line: Some(line),
                msg: format!("new GPU type '{name}' needs field '{field}'"),
            };
            let spec = match self.specs.get(&name) {
                Some(old) => GpuSpec {
                    name: name.clone(),
                    fp16_tflops: p.fp16_tflops.map_or(old.fp16_tflops, |v| v.0),
                    fp32_tflops: p.fp32_tflops.map_or(old.fp32_tflops, |v| v.0),
                    tf32_tflops: p.tf32_tflops.map(|v| v.0).or(old.tf32_tflops),
                    mem_gib: p.mem_gib.map_or(old.mem_gib, |v| v.0),
                    mem_bw_gbs: p.mem_bw_gbs.map_or(old.mem_bw_gbs, |v| v.0),
                    intra_link: p.intra_link.unwrap_or(old.intra_link),
                    intra_node_gbs: p.intra_node_gbs.map_or(old.intra_node_gbs, |v| v.0),
                    inter_node_gbs: p.inter_node_gbs.map_or(old.inter_node_gbs, |v| v.0),
                    network_declared: old.network_declared || p.inter_node_gbs.is_some(),
                    inter_node_transport: p.inter_node_transport.or(old.inter_node_transport),
                    gpus_per_node: p.gpus_per_node.map_or(old.gpus_per_node, |v| v.0.round().max(1.0) as u32),
                    compute_capability: p.compute_capability.map(|v| v.0).or(old.compute_capability),
                },
                None => GpuSpec {
                    name: name.clone(),
                    fp16_tflops: p.fp16_tflops.ok_or_else(|| missing("fp16_tflops"))?.0,
                    fp32_tflops: p.fp32_tflops.ok_or_else(|| missing("fp32_tflops"))?.0,
                    tf32_tflops: p.tf32_tflops.map(|v| v.0),
                    mem_gib: p.mem_gib.ok_or_else(|| missing("mem_gib"))?.0,
                    mem_bw_gbs: p.mem_bw_gbs.ok_or_else(|| missing("mem_bw_gbs"))?.0,
                    intra_link: p.intra_link.ok_or_else(|| missing("intra_link"))?,
                    intra_node_gbs: p.intra_node_gbs.ok_or_else(|| missing("intra_node_gbs"))?.0,
                    inter_node_gbs: p.inter_node_gbs.ok_or_else(|| missing("inter_node_gbs"))?.0,
                    network_declared: true,
                    inter_node_transport: p.inter_node_transport,
                    gpus_per_node: p.gpus_per_node.map_or(8, |v| v.0.round().max(1.0) as u32),
                    compute_capability: p.compute_capability.map(|v| v.0),
                },
            };
            if let Some(aliases) = p.aliases {
                let mut clean = Vec::with_capacity(aliases.len());
                for a in aliases {
                    if words(&a).next().is_none() {
                        return Err(CoreError::File {
                            path: origin.to_string(),
                            line: Some(line),
                            msg: format!("GPU type '{name}': alias '{a}' has no letters or digits"),
                        });
                    }
                    clean.push(a.trim().to_ascii_lowercase());
                }
                self.aliases.insert(name.clone(), clean);
            }
            self.specs.insert(name, spec);
        }
        Ok(())
    }

    /// The catalog key an NVML product name or user-typed name stands for:
    /// the type with an alias (its key included) whose words are all words of
    /// `name`; the alias with the most words wins, then the one named
    /// earliest. `None` if no type is named.
    pub fn canonical(&self, name: &str) -> Option<String> {
        let tokens: Vec<String> = words(name).collect();
        let mut best: Option<((usize, usize), &str)> = None;
        for key in self.specs.keys() {
            let extra = self.aliases.get(key).map(Vec::as_slice).unwrap_or_default();
            for alias in std::iter::once(key).chain(extra) {
                let positions: Option<Vec<usize>> = words(alias).map(|w| tokens.iter().position(|t| *t == w)).collect();
                let Some(positions) = positions else { continue };
                // More words first, then the earliest first word.
                let score = (usize::MAX - positions.len(), positions.iter().copied().min().unwrap_or(usize::MAX));
                if best.map_or(true, |(b, _)| score < b) {
                    best = Some((score, key));
                }
            }
        }
        best.map(|(_, k)| k.to_string())
    }

    /// Other names of a type, as in its `aliases` (not the key itself).
    pub fn aliases(&self, key: &str) -> &[String] {
        self.aliases.get(key).map(Vec::as_slice).unwrap_or_default()
    }

    /// Looks a GPU type up by catalog key or any name [`canonical_gpu_type`]
    /// understands; unknown → [`CoreError::Unknown`] with close names.
    pub fn get(&self, name: &str) -> Result<&GpuSpec, CoreError> {
        let key = name.trim().to_ascii_lowercase();
        if let Some(s) = self.specs.get(&key) {
            return Ok(s);
        }
        if let Some(s) = self.canonical(name).and_then(|k| self.specs.get(&k)) {
            return Ok(s);
        }
        Err(CoreError::Unknown {
            kind: "GPU type",
            name: name.to_string(),
            suggestions: close_names(&key, self.specs.keys().map(String::as_str)),
        })
    }

    /// All catalog keys, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// All specs, sorted by key.
    pub fn specs(&self) -> impl Iterator<Item = &GpuSpec> {
        self.specs.values()
    }
}

/// The built-in catalog, parsed once.
fn builtin_ref() -> &'static GpuCatalog {
    static BUILTIN: OnceLock<GpuCatalog> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let mut c = GpuCatalog { specs: BTreeMap::new(), aliases: BTreeMap::new() };
        c.apply_overrides_toml(BUILTIN_TOML, "<builtin gpus.toml>").expect("built-in GPU catalog parses");
        // The built-in rates are typical values, not this site's network.
        for s in c.specs.values_mut() {
            s.network_declared = false;
        }
        c
    })
}

/// Maps an NVML product name or a user-typed name to a built-in catalog key
/// through the catalog's aliases ([`GpuCatalog::canonical`]):
/// "NVIDIA A100-SXM4-80GB" → `a100`, "NVIDIA A100-PCIE-40GB" → `a100_40g`,
/// "Tesla V100-SXM2-32GB" → `v100`, "NVIDIA H100 80GB HBM3" → `h100`,
/// "NVIDIA A10G" → `a10`. `None` if no known type is named.
pub fn canonical_gpu_type(name: &str) -> Option<String> {
    builtin_ref().canonical(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_has_required_types() {
        let c = GpuCatalog::builtin();
        for t in ["k80", "p100", "v100", "t4", "a10", "a40", "a100_40g", "a100", "a800", "l20", "h100", "h200"] {
            let s = c.get(t).unwrap();
            assert!(s.fp16_tflops >= s.fp32_tflops * 0.99 && s.mem_gib > 0.0, "{t}");
        }
        assert_eq!(c.get("a100_40g").unwrap().mem_gib, 40.0);
        assert_eq!(c.get("A100").unwrap().mem_gib, 80.0);
        assert!(c.get("h100").unwrap().fp16_tflops > c.get("a100").unwrap().fp16_tflops);
    }

    #[test]
    fn nvml_names_map_to_keys() {
        let cases = [
            ("NVIDIA A100-SXM4-80GB", "a100"),
            ("NVIDIA A100-PCIE-40GB", "a100_40g"),
            ("NVIDIA A100-SXM4-40GB", "a100_40g"),
            ("Tesla V100-SXM2-16GB", "v100"),
            ("Tesla V100-SXM2-32GB", "v100"),
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H200", "h200"),
            ("NVIDIA A10", "a10"),
            ("NVIDIA A10G", "a10"),
            ("NVIDIA A40", "a40"),
            ("NVIDIA A800-SXM4-80GB", "a800"),
            ("Tesla T4", "t4"),
            ("Tesla K80", "k80"),
            ("Tesla P100-PCIE-16GB", "p100"),
            ("NVIDIA L20", "l20"),
            ("a100_40g", "a100_40g"),
        ];
        for (n, k) in cases {
            assert_eq!(canonical_gpu_type(n).as_deref(), Some(k), "{n}");
        }
        assert_eq!(canonical_gpu_type("NVIDIA RTX A4000"), None);
        assert_eq!(canonical_gpu_type("GeForce GTX 1080"), None);
        assert_eq!(GpuCatalog::builtin().get("NVIDIA A100-SXM4-80GB").unwrap().name, "a100");
    }

    #[test]
    fn every_type_and_alias_canonicalises_to_its_key() {
        let c = GpuCatalog::builtin();
        let mut n = 0;
        for key in c.names() {
            assert_eq!(canonical_gpu_type(key).as_deref(), Some(key), "key {key}");
            assert_eq!(canonical_gpu_type(&key.to_ascii_uppercase()).as_deref(), Some(key), "key {key}");
            assert_eq!(canonical_gpu_type(&format!("NVIDIA {key}")).as_deref(), Some(key), "key {key}");
            for alias in c.aliases(key) {
                assert_eq!(canonical_gpu_type(alias).as_deref(), Some(key), "alias {alias} of {key}");
                n += 1;
            }
        }
        assert!(n >= 4, "the built-in catalog has aliases");
    }

    #[test]
    fn overrides_can_name_aliases() {
        let c = GpuCatalog::with_overrides_toml(
            "[gpu.mi250]\nfp16_tflops = 362\nfp32_tflops = 47.9\nmem_gib = 64\nmem_bw_gbs = 1600\nintra_link = 'pcie'\n\
             intra_node_gbs = 50\ninter_node_gbs = 25\naliases = ['mi250x', 'instinct-mi250']\n",
        )
        .unwrap();
        assert_eq!(c.canonical("AMD Instinct MI250X").as_deref(), Some("mi250"));
        assert_eq!(c.get("AMD Instinct MI250").unwrap().name, "mi250");
        assert_eq!(canonical_gpu_type("AMD Instinct MI250X"), None, "the built-in catalog is unchanged");
        let e = GpuCatalog::with_overrides_toml("[gpu.a100]\naliases = ['--']\n").unwrap_err().to_string();
        assert!(e.contains("alias '--'") && e.contains("a100"), "{e}");
    }

    #[test]
    fn unknown_type_suggests_close_names() {
        let e = GpuCatalog::builtin().get("a1000").unwrap_err();
        match &e {
            CoreError::Unknown { suggestions, .. } => assert!(suggestions.contains(&"a100".to_string()), "{e}"),
            _ => panic!("{e}"),
        }
        assert!(e.to_string().contains("a1000"));
    }

    #[test]
    fn overrides_patch_and_extend() {
        let c = GpuCatalog::with_overrides_toml(
            "[cluster]\nname = 'x'\n[gpu.a100]\nmem_gib = 40\n[gpu.mi250]\nfp16_tflops = 362\nfp32_tflops = 47.9\n\
             mem_gib = 64\nmem_bw_gbs = 1638\nintra_link = 'nvlink'\nintra_node_gbs = 100\ninter_node_gbs = 25\n",
        )
        .unwrap();
        assert_eq!(c.get("a100").unwrap().mem_gib, 40.0);
        assert_eq!(c.get("a100").unwrap().fp16_tflops, 312.0);
        assert_eq!(c.get("mi250").unwrap().gpus_per_node, 8);
    }

    #[test]
    fn malformed_overrides_name_field_and_line() {
        let e = GpuCatalog::with_overrides_toml("[gpu.a100]\nmem_gib = 80\nfp16_tflops = -3\n").unwrap_err();
        let s = e.to_string();
        assert!(s.contains(":3") && s.contains("fp16_tflops"), "{s}");
        let e = GpuCatalog::with_overrides_toml("\n[gpu.a100]\nmem_gb = 80\n").unwrap_err().to_string();
        assert!(e.contains(":3") && e.contains("mem_gb"), "{e}");
        let e = GpuCatalog::with_overrides_toml("\n\n[gpu.newgpu]\nfp16_tflops = 3\n").unwrap_err().to_string();
        assert!(e.contains(":3") && e.contains("fp32_tflops") && e.contains("newgpu"), "{e}");
    }
}

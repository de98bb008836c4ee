//! GRES and TRES strings: `--gres`/`--gpus` requests as Slurm keeps them
//! in `tres_per_node`/`tres_per_job` (`gres:gpu:a100:4`, `gres:gpu:4`,
//! `gres:gpu`; newer releases write `gres/gpu:a100=4`), node GRES
//! (`gpu:a100:4(S:0)`) and accounting TRES (`gres/gpu:a100=4`). The
//! release's prefix (`gres:` or `gres/`) is passed in by the host.
use super::split::split_top_level;
use std::collections::BTreeMap;

/// The TRES GRES prefix of Slurm releases before 23.02 (`gres:gpu:4`).
pub const GRES_PREFIX_2205: &str = "gres:";

/// Strips the TRES GRES prefix of either release: `gres:gpu:a100:4` / `gres/gpu:a100:4` → `gpu:a100:4`.
pub fn strip_tres_gres_prefix(entry: &str) -> &str {
    entry.strip_prefix("gres:").or_else(|| entry.strip_prefix("gres/")).unwrap_or(entry)
}

/// The GPU part of a `tres_per_*` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRequest {
    /// Requested GPU type, if the request is typed (`gpu:a100:4`).
    pub gpu_type: Option<String>,
    /// GPUs requested (per node for `tres_per_node`).
    pub count: u64,
}

/// Splits one entry into (name, type, count); `None` if it is not a GRES entry.
fn parse_entry(entry: &str) -> Option<(String, Option<String>, u64)> {
    let e = entry.trim();
    let rest = strip_tres_gres_prefix(e);
    // `gpu:a100=4` / `gpu=4` (tres form) or `gpu:a100:4` / `gpu:4` / `gpu` (gres form).
    let (head, eq_count) = match rest.split_once('=') {
        Some((h, c)) => (h, Some(c)),
        None => (rest, None),
    };
    let mut parts: Vec<&str> = head.split(':').collect();
    let name = parts.remove(0).to_string();
    if name.is_empty() {
        return None;
    }
    // Flags such as `gpu:a100:4(S:0)` are dropped.
    let strip_flags = |s: &str| s.split('(').next().unwrap_or("").to_string();
    let count_of = |s: &str| -> Option<u64> {
        let s = strip_flags(s);
        let (num, mult) = match s.chars().last() {
            Some('k' | 'K') => (&s[..s.len() - 1], 1024),
            Some('m' | 'M') => (&s[..s.len() - 1], 1024 * 1024),
            _ => (s.as_str(), 1),
        };
        num.parse::<u64>().ok().map(|n| n * mult)
    };
    let (ty, count) = match (eq_count, parts.as_slice()) {
        (Some(c), []) => (None, count_of(c)?),
        (Some(c), [t]) => (Some(t.to_string()), count_of(c)?),
        (None, []) => (None, 1),
        (None, [c]) if count_of(c).is_some() => (None, count_of(c)?),
        (None, [t]) => (Some(strip_flags(t)), 1),
        (None, [t, c, ..]) => (Some(t.to_string()), count_of(c)?),
        _ => return None,
    };
    Some((name, ty.filter(|t| !t.is_empty()).map(|t| t.to_ascii_lowercase()), count))
}

/// The GPU request in a `tres_per_*` string, if any.
pub fn gpu_request(tres: Option<&str>) -> Option<GpuRequest> {
    let tres = tres?;
    tres.split(',').filter_map(parse_entry).find(|(n, _, _)| n == "gpu").map(|(_, gpu_type, count)| GpuRequest { gpu_type, count })
}

/// `(type, count)` of every GPU entry of a GRES or TRES string, as nodes
/// and jobs report them: `gpu:a100:4(S:0),gpu:v100:2(IDX:0-1)`,
/// `gres:gpu:a100:2`, `cpu=1,gres/gpu=4,gres/gpu:v100=4`. Commas inside
/// parentheses (`IDX:0,2-3`) belong to their entry.
pub fn gpu_entries(gres: &str) -> Vec<(Option<String>, u32)> {
    split_top_level(gres, '(', ')')
        .into_iter()
        .filter_map(|e| gpu_request(Some(e)))
        .map(|GpuRequest { gpu_type, count }| (gpu_type, count.min(u64::from(u32::MAX)) as u32))
        .collect()
}

/// Removes GPU entries from a `tres_per_*` string; `None` if nothing is left.
pub fn without_gpus(tres: Option<&str>) -> Option<String> {
    let kept: Vec<&str> = tres
        .unwrap_or("")
        .split(',')
        .filter(|e| !e.trim().is_empty())
        .filter(|e| !matches!(parse_entry(e), Some((n, _, _)) if n == "gpu"))
        .collect();
    (!kept.is_empty()).then(|| kept.join(","))
}

/// `tres_per_node` asking for `gpus_per_node` untyped GPUs, keeping other GRES;
/// written with the release's GRES `prefix` (`gres:` in 22.05, `gres/` from 23.02).
pub fn with_untyped_gpus(tres: Option<&str>, gpus_per_node: u32, prefix: &str) -> String {
    let gpu = format!("{prefix}gpu:{gpus_per_node}");
    match without_gpus(tres) {
        Some(rest) => format!("{rest},{gpu}"),
        None => gpu,
    }
}

/// GPUs per type in an accounting TRES string (`AllocTRES`:
/// `billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,mem=100M`); an untyped
/// count alone is given `fallback_type`.
pub fn parse_tres_gpus(tres: &str, fallback_type: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut typed = BTreeMap::new();
    let mut untyped = 0u32;
    for item in tres.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("TRES item '{item}' is not KEY=VALUE"));
        };
        if k == "gres/gpu" {
            untyped = v
                .parse()
                .map_err(|_| format!("GPU count '{v}' in '{item}'"))?;
        } else if let Some(ty) = k.strip_prefix("gres/gpu:") {
            let n: u32 = v
                .parse()
                .map_err(|_| format!("GPU count '{v}' in '{item}'"))?;
            *typed.entry(ty.to_ascii_lowercase()).or_insert(0) += n;
        }
    }
    if typed.is_empty() && untyped > 0 {
        typed.insert(fallback_type.to_string(), untyped);
    }
    Ok(typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: Option<&str>, n: u64) -> Option<GpuRequest> {
        Some(GpuRequest { gpu_type: t.map(str::to_string), count: n })
    }

    #[test]
    fn parses_gres_forms() {
        assert_eq!(gpu_request(Some("gres:gpu:a100:4")), req(Some("a100"), 4));
        assert_eq!(gpu_request(Some("gres:gpu:4")), req(None, 4));
        assert_eq!(gpu_request(Some("gres:gpu")), req(None, 1));
        assert_eq!(gpu_request(Some("gres:gpu:V100")), req(Some("v100"), 1));
        assert_eq!(gpu_request(Some("gres/gpu:a100=2")), req(Some("a100"), 2));
        assert_eq!(gpu_request(Some("gres/gpu=8")), req(None, 8));
        assert_eq!(gpu_request(Some("gres:mps:100,gres:gpu:a10:2(S:0-1)")), req(Some("a10"), 2));
        assert_eq!(gpu_request(Some("gres:mps:100")), None);
        assert_eq!(gpu_request(Some("")), None);
        assert_eq!(gpu_request(None), None);
    }

    #[test]
    fn gpu_entries_read_gres_and_tres() {
        assert_eq!(gpu_entries("gpu:a100:4(S:0)"), vec![(Some("a100".into()), 4)]);
        assert_eq!(gpu_entries("gres:gpu:4"), vec![(None, 4)]);
        assert_eq!(gpu_entries("cpu=1,gres/gpu=4,gres/gpu:v100=4"), vec![(None, 4), (Some("v100".into()), 4)]);
        assert_eq!(gpu_entries("gpu:a100:2(IDX:0,2),gpu:v100:1"), vec![(Some("a100".into()), 2), (Some("v100".into()), 1)]);
        assert!(gpu_entries("cpu=1,mem=10").is_empty());
    }

    #[test]
    fn rewrites_to_untyped_count() {
        assert_eq!(with_untyped_gpus(None, 4, "gres/"), "gres/gpu:4");
        assert_eq!(with_untyped_gpus(Some("gres:gpu:a100:2"), 8, GRES_PREFIX_2205), "gres:gpu:8");
        assert_eq!(with_untyped_gpus(Some("gres:mps:10,gres:gpu:2"), 4, GRES_PREFIX_2205), "gres:mps:10,gres:gpu:4");
        assert_eq!(without_gpus(Some("gres:gpu:a100:2")), None);
        assert_eq!(without_gpus(Some("gres:gpu:2,gres:mps:1")).as_deref(), Some("gres:mps:1"));
    }

    #[test]
    fn alloc_tres_counts_per_type() {
        let t = parse_tres_gpus("billing=4,cpu=4,gres/gpu:A100=4,gres/gpu=4,mem=100M", "x").unwrap();
        assert_eq!(t.get("a100"), Some(&4));
        assert_eq!(parse_tres_gpus("cpu=1,gres/gpu=2", "v100").unwrap().get("v100"), Some(&2));
        assert!(parse_tres_gpus("cpu=1", "v100").unwrap().is_empty());
        assert!(parse_tres_gpus("gres/gpu=x", "v100").unwrap_err().contains("GPU count"));
        assert!(parse_tres_gpus("cpu", "v100").unwrap_err().contains("KEY=VALUE"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// GRES/TRES strings from users (`--gres`, `--gpus`) and node records:
        /// parsed or ignored, never a panic; rewriting keeps non-GPU entries.
        #[test]
        fn gres_parsers_never_panic(raw in proptest::prelude::any::<String>(), near in "((gres[:/])?(gpu|mps)(:[a-z0-9]{1,6})?([:=][0-9kKmM]{1,12})?(\\([A-Z]:[0-9,-]{0,6}\\))?,?){0,4}") {
            for t in [raw.as_str(), near.as_str()] {
                let _ = gpu_request(Some(t));
                let _ = crate::placement::node_gpus("n", Some(t), Some(t), true);
                let w = with_untyped_gpus(Some(t), 4, GRES_PREFIX_2205);
                proptest::prop_assert_eq!(gpu_request(Some(&w)).map(|g| g.count), Some(4));
            }
        }
    }
}

//! Pure helpers over Slurm's configuration text (`slurm.conf`, `gres.conf`):
//! `Key=value` words of a line, hostlist expressions, and the GPU type a
//! node is given. Shared by the SPANK plugin (node-side plan) and
//! `cellsched doctor`.
use crate::Cell;

/// Splits `s` on the commas outside `open`…`close` pairs: hostlists
/// (`a100-[1-2],v100-1`) and GRES strings (`gpu:a100:4(IDX:0,2-3),gpu:v100:2`).
pub fn split_top_level(s: &str, open: char, close: char) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        } else if c == ',' && depth == 0 {
            entries.push(&s[start..i]);
            start = i + 1;
        }
    }
    entries.push(&s[start..]);
    entries
}

/// The top-level entries of a Slurm hostlist expression (commas inside
/// brackets belong to their entry): `a100-[1-2],v100-1` -> `a100-[1-2]`, `v100-1`.
pub fn hostlist_entries(expr: &str) -> Vec<&str> {
    split_top_level(expr, '[', ']')
}

/// The `Key=value` words of one slurm.conf/gres.conf line (comments cut),
/// keys lower-cased.
pub fn conf_line_pairs(line: &str) -> Vec<(String, &str)> {
    let line = line.split('#').next().unwrap_or("");
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

/// The GPU type gres.conf gives node `node` (`NodeName=a100-[1-2] Name=gpu
/// Type=a100 ...`; a line without `NodeName=` applies to every node).
pub fn gres_conf_gpu_type(text: &str, node: &str) -> Option<String> {
    for line in text.lines() {
        let kv = conf_line_pairs(line);
        let get = |k: &str| kv.iter().find(|(kk, _)| kk == k).map(|(_, v)| *v);
        if get("name") != Some("gpu") {
            continue;
        }
        let Some(ty) = get("type") else { continue };
        if get("nodename").into_iter().all(|h| hostlist_contains(h, node)) {
            let t = ty.to_ascii_lowercase();
            if Cell::new(&t, 1, 1).is_ok() {
                return Some(t);
            }
        }
    }
    None
}

/// The GPU type slurm.conf gives node `node` on its `NodeName=` line
/// (`Gres=gpu:a100:4,...`): the source on clusters whose gres.conf only says
/// `AutoDetect=nvml`. The first typed GPU entry wins; `NodeName=DEFAULT` lines
/// apply to nodes that name no typed GPUs themselves.
pub fn slurm_conf_gpu_type(text: &str, node: &str) -> Option<String> {
    let mut default = None;
    for line in text.lines() {
        let kv = conf_line_pairs(line);
        let get = |k: &str| kv.iter().find(|(kk, _)| kk == k).map(|(_, v)| *v);
        let (Some(names), Some(gres)) = (get("nodename"), get("gres")) else { continue };
        let ty = gres.split(',').find_map(|e| {
            let mut parts = e.trim().split(':');
            (parts.next() == Some("gpu")).then_some(())?;
            let t = parts.next()?.split('(').next()?.to_ascii_lowercase();
            (!t.is_empty() && !t.bytes().all(|b| b.is_ascii_digit()) && Cell::new(&t, 1, 1).is_ok()).then_some(t)
        });
        if names.eq_ignore_ascii_case("default") {
            default = ty.or(default);
        } else if hostlist_contains(names, node) && ty.is_some() {
            return ty;
        }
    }
    default
}

/// Whether Slurm hostlist `expr` (`a100-[1-2,5],v100-1`, one bracket group
/// per entry) names `node`.
pub fn hostlist_contains(expr: &str, node: &str) -> bool {
    hostlist_entries(expr).into_iter().any(|e| match (e.find('['), e.find(']')) {
        (Some(o), Some(c)) if o < c => {
            let (pre, ranges, suf) = (&e[..o], &e[o + 1..c], &e[c + 1..]);
            let Some(mid) = node.strip_prefix(pre).and_then(|r| r.strip_suffix(suf)) else { return false };
            let Ok(n) = mid.parse::<u64>() else { return false };
            ranges.split(',').any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                let width_ok = lo.len() == mid.len() || !lo.starts_with('0');
                matches!((lo.parse::<u64>(), hi.parse::<u64>()), (Ok(l), Ok(h)) if l <= n && n <= h && width_ok)
            })
        }
        _ => e == node,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn top_level_split_keeps_bracketed_commas() {
        assert_eq!(split_top_level("a100-[1,3],v100-1", '[', ']'), ["a100-[1,3]", "v100-1"]);
        assert_eq!(split_top_level("gpu:a100:4(IDX:0,2-3),gpu:v100:2", '(', ')'), ["gpu:a100:4(IDX:0,2-3)", "gpu:v100:2"]);
        assert_eq!(split_top_level("", '(', ')'), [""]);
    }

    use super::*;

    #[test]
    fn gres_conf_types() {
        let conf = "# x\nNodeName=a100-[1-2] Name=gpu Type=a100 File=/dev/n[0-3]\nNodeName=v100-1 Name=gpu Type=V100 File=/x\nNodeName=gpu[08-10] Name=gpu Type=a10\n";
        assert_eq!(gres_conf_gpu_type(conf, "a100-2").as_deref(), Some("a100"));
        assert_eq!(gres_conf_gpu_type(conf, "v100-1").as_deref(), Some("v100"));
        assert_eq!(gres_conf_gpu_type(conf, "gpu09").as_deref(), Some("a10"));
        assert_eq!(gres_conf_gpu_type(conf, "a100-3"), None);
        assert_eq!(gres_conf_gpu_type(conf, "gpu9"), None);
        assert_eq!(gres_conf_gpu_type("Name=gpu Type=h100 File=/x", "any").as_deref(), Some("h100"));
        assert!(hostlist_contains("a,b[1-3,7]", "b7") && !hostlist_contains("a,b[1-3]", "b4"));
    }

    #[test]
    fn slurm_conf_types() {
        let conf = "NodeName=DEFAULT Gres=gpu:h100:8\nNodeName=a100-[1-2] CPUs=16 Gres=gpu:a100:4(S:0),nic:2 Feature=a100\n\
                    nodename=v1 gres=gpu:V100:8\nNodeName=plain CPUs=4\nNodeName=untyped Gres=gpu:4\n# NodeName=x Gres=gpu:a10:1\n";
        assert_eq!(slurm_conf_gpu_type(conf, "a100-2").as_deref(), Some("a100"));
        assert_eq!(slurm_conf_gpu_type(conf, "v1").as_deref(), Some("v100"));
        // Untyped or absent GPUs on the node's own line: the DEFAULT line's type.
        assert_eq!(slurm_conf_gpu_type(conf, "untyped").as_deref(), Some("h100"));
        assert_eq!(slurm_conf_gpu_type("NodeName=n1 Gres=gpu:4\n", "n1"), None);
        assert_eq!(slurm_conf_gpu_type("NodeName=n1 Gres=gpu:a10:1\n", "n2"), None);
        assert_eq!(slurm_conf_gpu_type("", "n1"), None);
    }

}

//! slurm.conf and gres.conf lines: their `Key=value` words, and the GPU
//! type a node is given.
use super::hostlist::hostlist_contains;
use crate::Cell;

/// The `Key=value` words of one slurm.conf/gres.conf line (comments cut),
/// keys lower-cased.
pub fn conf_line_pairs(line: &str) -> Vec<(String, &str)> {
    let line = line.split('#').next().unwrap_or("");
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

/// The value of `key` (any case) in `scontrol show config` output (`Key = value` lines).
pub fn show_config_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim().to_string())
    })
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

#[cfg(test)]
mod tests {
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

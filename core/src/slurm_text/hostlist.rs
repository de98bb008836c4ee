//! Slurm hostlist expressions (`a100-[1-2,5],v100-1`).
use super::split::split_top_level;

/// The top-level entries of a Slurm hostlist expression (commas inside
/// brackets belong to their entry): `a100-[1-2],v100-1` -> `a100-[1-2]`, `v100-1`.
pub fn hostlist_entries(expr: &str) -> Vec<&str> {
    split_top_level(expr, '[', ']')
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

/// Expands a Slurm hostlist (`a100-[1-2,5],v100-1`) into host names; `None`
/// when malformed or longer than `limit` names.
pub fn hostlist_expand(expr: &str, limit: usize) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for entry in hostlist_entries(expr.trim()) {
        let mut names = vec![String::new()];
        let mut rest = entry;
        while !rest.is_empty() {
            match rest.find('[') {
                Some(o) => {
                    let c = rest[o..].find(']')? + o;
                    let pre = &rest[..o];
                    let mut values = Vec::new();
                    for r in rest[o + 1..c].split(',') {
                        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                        let (l, h) = (lo.parse::<u64>().ok()?, hi.parse::<u64>().ok()?);
                        if h < l || (h - l) as usize > limit {
                            return None;
                        }
                        for v in l..=h {
                            values.push(format!("{v:0width$}", width = lo.len()));
                        }
                    }
                    names = names.iter().flat_map(|n| values.iter().map(move |v| format!("{n}{pre}{v}"))).collect();
                    rest = &rest[c + 1..];
                }
                None => {
                    names.iter_mut().for_each(|n| n.push_str(rest));
                    rest = "";
                }
            }
            if names.len() + out.len() > limit {
                return None;
            }
        }
        if names.iter().any(String::is_empty) {
            return None;
        }
        out.extend(names);
    }
    Some(out)
}

/// First host of a Slurm hostlist expression: `a100-[1-2],v100-1` -> `a100-1`,
/// `gpu[07,09]` -> `gpu07`. `None` for an empty or malformed list.
pub fn first_host(hostlist: &str) -> Option<String> {
    let first = hostlist_entries(hostlist.trim()).into_iter().next()?;
    // Replace each bracket group by its first value.
    let mut host = first.to_string();
    while let Some(open) = host.find('[') {
        let close = host[open..].find(']')? + open;
        let lo = host[open + 1..close].split(',').next()?.split('-').next()?.to_string();
        host = format!("{}{}{}", &host[..open], lo, &host[close + 1..]);
    }
    let ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    ok.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_membership_expansion_and_first_host() {
        assert_eq!(hostlist_entries("a100-[1-2],v100-1"), ["a100-[1-2]", "v100-1"]);
        assert!(hostlist_contains("a,b[1-3,7]", "b7") && !hostlist_contains("a,b[1-3]", "b4"));
        assert!(hostlist_contains("gpu[08-10]", "gpu09") && !hostlist_contains("gpu[08-10]", "gpu9"));
        assert_eq!(hostlist_expand("a100-[1-2,5],v100-1", 10).unwrap(), ["a100-1", "a100-2", "a100-5", "v100-1"]);
        assert_eq!(hostlist_expand("gpu[08-10]", 10).unwrap(), ["gpu08", "gpu09", "gpu10"]);
        assert_eq!(hostlist_expand("n[1-100]", 10), None, "longer than the limit");
        assert_eq!(hostlist_expand("n[3-1]", 10), None);
        assert_eq!(first_host("a100-[1-2],v100-1").as_deref(), Some("a100-1"));
        assert_eq!(first_host("gpu[07,09]").as_deref(), Some("gpu07"));
        assert_eq!(first_host(""), None);
        assert_eq!(first_host("v100-2,a100-1").as_deref(), Some("v100-2"));
        assert_eq!(first_host("rack[1-2]-n[3-4]").as_deref(), Some("rack1-n3"));
        assert_eq!(first_host("a[1-2"), None);
        assert_eq!(first_host("a;b"), None);
    }

    proptest::proptest! {
        /// Any text: refused or expanded within the limit, never a panic.
        #[test]
        fn hostlists_never_panic(s in proptest::prelude::any::<String>(), near in "[a-z0-9,\\[\\]-]{0,30}") {
            for t in [s.as_str(), near.as_str()] {
                if let Some(v) = hostlist_expand(t, 64) {
                    proptest::prop_assert!(v.len() <= 64);
                }
                let _ = first_host(t);
                let _ = hostlist_contains(t, "n1");
            }
        }
    }
}

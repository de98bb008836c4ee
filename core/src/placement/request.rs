//! Rewriting a job's feature expression: a placement is written as a node
//! feature (the GPU type) plus an untyped count (`crate::slurm_text`),
//! because updating a pending job's *typed* GRES leaves it never runnable
//! in 22.05.

/// Adds the GPU type to the job's feature expression (AND-ed with the user's).
pub fn with_type_feature(features: Option<&str>, gpu_type: &str) -> String {
    match features.map(str::trim).filter(|f| !f.is_empty()) {
        None => gpu_type.to_string(),
        Some(f) if f.contains('|') || f.contains('[') => format!("({f})&{gpu_type}"),
        Some(f) => format!("{f}&{gpu_type}"),
    }
}

/// Undoes [`with_type_feature`] for `gpu_type`; `None` if nothing is left.
pub fn without_type_feature(features: Option<&str>, gpu_type: &str) -> Option<String> {
    let f = features.map(str::trim).filter(|f| !f.is_empty())?;
    if f == gpu_type {
        return None;
    }
    let user = match f.strip_suffix(gpu_type).and_then(|p| p.strip_suffix('&')) {
        Some(u) => u,
        None => return Some(f.to_string()),
    };
    let user = match user.strip_prefix('(').and_then(|u| u.strip_suffix(')')) {
        Some(inner) if inner.contains('|') || inner.contains('[') => inner,
        _ => user,
    };
    (!user.is_empty()).then(|| user.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_round_trip() {
        for user in [None, Some("ib"), Some("ib&fast"), Some("ib|eth"), Some("[rack1|rack2]")] {
            let f = with_type_feature(user, "a100");
            assert_eq!(without_type_feature(Some(&f), "a100").as_deref(), user, "{f}");
            let g = with_type_feature(without_type_feature(Some(&f), "a100").as_deref(), "v100");
            assert!(g.ends_with("v100") && !g.contains("a100"), "{g}");
        }
        assert_eq!(with_type_feature(Some("ib|eth"), "a10"), "(ib|eth)&a10");
        // A feature we did not add is left alone.
        assert_eq!(without_type_feature(Some("ib"), "a100").as_deref(), Some("ib"));
    }
}

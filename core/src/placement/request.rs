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

/// Adds a set of GPU types to the job's feature expression, AND-ed with
/// the user's: `[a100|v100]` (Slurm's matching OR: every node of the job
/// has the same one of them; one type is [`with_type_feature`]). `None`
/// when the user's own expression already has a matching-OR bracket
/// (Slurm takes one per job).
pub fn with_type_set_feature(features: Option<&str>, gpu_types: &[String]) -> Option<String> {
    if let [one] = gpu_types {
        return Some(with_type_feature(features, one));
    }
    let set = format!("[{}]", gpu_types.join("|"));
    match features.map(str::trim).filter(|f| !f.is_empty()) {
        None => Some(set),
        Some(f) if f.contains('[') => None,
        Some(f) if f.contains('|') => Some(format!("({f})&{set}")),
        Some(f) => Some(format!("{f}&{set}")),
    }
}

/// The trailing type set `[a|b|...]` that [`with_type_set_feature`]
/// added, when it names `gpu_type`: the expression before it.
fn strip_type_set<'a>(f: &'a str, gpu_type: &str) -> Option<&'a str> {
    let open = f.rfind('[')?;
    let inner = f[open..].strip_prefix('[')?.strip_suffix(']')?;
    if !inner.split('|').any(|t| t == gpu_type) || inner.contains(['&', '(', ')', '*']) {
        return None;
    }
    let before = &f[..open];
    if before.is_empty() {
        Some(before)
    } else {
        before.strip_suffix('&')
    }
}

/// Undoes [`with_type_feature`] for `gpu_type`, or
/// [`with_type_set_feature`] for a set that holds it; `None` if nothing
/// is left.
pub fn without_type_feature(features: Option<&str>, gpu_type: &str) -> Option<String> {
    let f = features.map(str::trim).filter(|f| !f.is_empty())?;
    if f == gpu_type {
        return None;
    }
    let user = match f.strip_suffix(gpu_type).and_then(|p| p.strip_suffix('&')).or_else(|| strip_type_set(f, gpu_type)) {
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

    #[test]
    fn type_sets_round_trip_and_never_nest_brackets() {
        let set = vec!["a100".to_string(), "v100".to_string()];
        for user in [None, Some("ib"), Some("ib&fast"), Some("ib|eth")] {
            let f = with_type_set_feature(user, &set).unwrap();
            assert!(f.ends_with("[a100|v100]"), "{f}");
            for t in ["a100", "v100"] {
                assert_eq!(without_type_feature(Some(&f), t).as_deref(), user, "{f} without {t}");
            }
            // A type outside the set strips nothing.
            assert_eq!(without_type_feature(Some(&f), "a10").as_deref(), Some(f.as_str()));
        }
        assert_eq!(with_type_set_feature(Some("ib|eth"), &set).as_deref(), Some("(ib|eth)&[a100|v100]"));
        assert_eq!(with_type_set_feature(Some("[rack1|rack2]"), &set), None);
        assert_eq!(with_type_set_feature(Some("ib"), &set[..1]).as_deref(), Some("ib&a100"));
        // A user's own bracket is not taken for a type set.
        assert_eq!(without_type_feature(Some("[rack1|rack2]"), "a100").as_deref(), Some("[rack1|rack2]"));
    }
}

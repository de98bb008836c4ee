//! Reading the Slurm files doctor checks: `slurm.conf` (with `Include`
//! lines), `gres.conf` and `plugstack.conf` (with `include` globs), keeping
//! each line's file and number so findings can point at them.
use cellsched_core::slurm_text::conf_line_pairs;
use std::path::{Path, PathBuf};

/// One non-empty, non-comment line of a configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The file the line is in.
    pub file: PathBuf,
    /// 1-based line number.
    pub number: usize,
    /// The text, comment cut and trimmed.
    pub text: String,
}

impl Line {
    /// `file:line`, for messages.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.number)
    }

    /// The line's `Key=value` words, keys lower-cased, quotes stripped.
    pub fn pairs(&self) -> Vec<(String, String)> {
        conf_line_pairs(&self.text).into_iter().map(|(k, v)| (k, v.trim_matches('"').to_string())).collect()
    }

    /// Value of `key` (lower-case) among the line's words.
    pub fn get(&self, key: &str) -> Option<String> {
        self.pairs().into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// A configuration file and the files it includes, as lines.
#[derive(Debug, Clone, Default)]
pub struct ConfFile {
    /// Lines in reading order.
    pub lines: Vec<Line>,
    /// Files named by include lines that could not be read: (line, error).
    pub unreadable_includes: Vec<(Line, String)>,
}

/// Lines of `text` (from `file`) with comments and blank lines dropped.
pub fn lines_of(text: &str, file: &Path) -> Vec<Line> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.split('#').next().unwrap_or("").trim();
            (!t.is_empty()).then(|| Line { file: file.to_path_buf(), number: i + 1, text: t.to_string() })
        })
        .collect()
}

/// Paths matching `pattern`: a path whose last component may hold `*` and
/// `?` wildcards (`/etc/slurm/plugstack.conf.d/*.conf`), sorted. Relative
/// patterns are taken from `base`.
pub fn glob(pattern: &str, base: &Path) -> Vec<PathBuf> {
    let p = if Path::new(pattern).is_absolute() { PathBuf::from(pattern) } else { base.join(pattern) };
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !name.contains(['*', '?']) {
        return vec![p];
    }
    let dir = p.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| wildcard_match(&name, &e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Shell-style match of `*` and `?` over a whole name.
fn wildcard_match(pat: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pat.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Reads `path` and, recursively (up to 8 deep), the files its
/// `include`/`Include PATTERN` lines name, relative to `base`.
/// `Err` only when `path` itself cannot be read.
pub fn read_with_includes(path: &Path, base: &Path) -> Result<ConfFile, String> {
    let mut out = ConfFile::default();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    add(&mut out, path, &text, base, 0);
    Ok(out)
}

fn add(out: &mut ConfFile, path: &Path, text: &str, base: &Path, depth: usize) {
    for line in lines_of(text, path) {
        let mut words = line.text.split_whitespace();
        if words.next().is_some_and(|w| w.eq_ignore_ascii_case("include")) && depth < 8 {
            let pattern = words.collect::<Vec<_>>().join(" ");
            for p in glob(&pattern, base) {
                match std::fs::read_to_string(&p) {
                    Ok(t) => add(out, &p, &t, base, depth + 1),
                    Err(e) => out.unreadable_includes.push((line.clone(), format!("{}: {e}", p.display()))),
                }
            }
            continue;
        }
        out.lines.push(line);
    }
}

impl ConfFile {
    /// The last line setting top-level `key` (case-insensitive) as its first
    /// word, with the value: slurm.conf's last setting wins.
    pub fn setting(&self, key: &str) -> Option<(&Line, String)> {
        let key = key.to_ascii_lowercase();
        self.lines.iter().rev().find_map(|l| {
            let (k, v) = l.text.split_once('=')?;
            (k.trim().to_ascii_lowercase() == key).then(|| (l, v.trim().trim_matches('"').to_string()))
        })
    }

    /// `NodeName=` lines (not `NodeName=DEFAULT`).
    pub fn node_lines(&self) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(|l| {
            l.text.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("nodename") && !v.split_whitespace().next().unwrap_or("").eq_ignore_ascii_case("default")
            })
        })
    }

    /// The `NodeName=DEFAULT` line's value of `key`, if any.
    pub fn node_default(&self, key: &str) -> Option<String> {
        self.lines
            .iter()
            .filter(|l| l.get("nodename").is_some_and(|v| v.eq_ignore_ascii_case("default")))
            .filter_map(|l| l.get(key))
            .next_back()
    }
}

/// One `required|optional PATH [ARGS...]` line of plugstack.conf.
#[derive(Debug, Clone, PartialEq)]
pub struct SpankLine {
    /// Where it is.
    pub line: Line,
    /// `required` or `optional`.
    pub kind: String,
    /// The plugin path as written.
    pub path: String,
    /// Its `key=value` arguments.
    pub args: Vec<String>,
}

/// The plugin lines of a plugstack file set.
pub fn spank_lines(f: &ConfFile) -> Vec<SpankLine> {
    f.lines
        .iter()
        .filter_map(|l| {
            let mut w = l.text.split_whitespace();
            let kind = w.next()?.to_ascii_lowercase();
            if kind != "required" && kind != "optional" {
                return None;
            }
            let path = w.next()?.to_string();
            Some(SpankLine { line: l.clone(), kind, path, args: w.map(str::to_string).collect() })
        })
        .collect()
}

pub use cellsched_core::slurm_text::hostlist_expand;

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cs-doctor-conf-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn settings_last_wins_and_includes_are_followed() {
        let d = tmp("inc");
        std::fs::create_dir_all(d.join("conf.d")).unwrap();
        std::fs::write(d.join("slurm.conf"), "# c\nPriorityType=priority/basic\nInclude conf.d/*.conf\nGresTypes=\"gpu\" # x\n").unwrap();
        std::fs::write(d.join("conf.d/a.conf"), "PriorityType=priority/multifactor\n").unwrap();
        std::fs::write(d.join("conf.d/b.txt"), "PriorityType=priority/basic\n").unwrap();
        let f = read_with_includes(&d.join("slurm.conf"), &d).unwrap();
        let (line, v) = f.setting("prioritytype").unwrap();
        assert_eq!(v, "priority/multifactor");
        assert_eq!(line.at(), format!("{}:1", d.join("conf.d/a.conf").display()));
        assert_eq!(f.setting("GresTypes").unwrap().1, "gpu");
        assert!(f.setting("PluginDir").is_none());
        assert!(read_with_includes(&d.join("missing.conf"), &d).unwrap_err().contains("missing.conf"));
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn node_lines_and_spank_lines() {
        let text = "NodeName=DEFAULT Gres=gpu:h100:8\nNodeName=a[1-2] Gres=gpu:a100:4 Feature=a100\nPartitionName=p Nodes=a[1-2]\n\
                    optional /x/spank_cellsched.so plan_dir=/run/cs\ninclude /nonexistent/*.conf\nrequired other.so\n";
        let f = ConfFile { lines: lines_of(text, Path::new("s.conf")), ..Default::default() };
        let nodes: Vec<_> = f.node_lines().map(|l| l.number).collect();
        assert_eq!(nodes, vec![2]);
        assert_eq!(f.node_default("gres").as_deref(), Some("gpu:h100:8"));
        let s = spank_lines(&f);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].kind.as_str(), s[0].path.as_str(), s[0].args.clone()), ("optional", "/x/spank_cellsched.so", vec!["plan_dir=/run/cs".to_string()]));
        assert_eq!(s[1].line.number, 6);
    }

    #[test]
    fn globs_and_hostlists() {
        assert!(wildcard_match("*.conf", "cellsched.conf") && !wildcard_match("*.conf", "x.conf.bak"));
        assert!(wildcard_match("a?c*", "abcdef") && !wildcard_match("a?c", "ac"));
        assert_eq!(hostlist_expand("a100-[1-2],v100-1", 100).unwrap(), vec!["a100-1", "a100-2", "v100-1"]);
        assert_eq!(hostlist_expand("gpu[08-10]", 100).unwrap(), vec!["gpu08", "gpu09", "gpu10"]);
        assert_eq!(hostlist_expand("r[1-2]-n[1,3]", 100).unwrap(), vec!["r1-n1", "r1-n3", "r2-n1", "r2-n3"]);
        assert_eq!(hostlist_expand("n[1-100000]", 1000), None);
        assert_eq!(hostlist_expand("n[1-", 10), None);
    }
}

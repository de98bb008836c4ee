//! The documentation checks itself: every relative link in a Markdown file
//! resolves, the shell blocks of docs/GUIDE.md and docs/SIMULATOR.md marked
//! runnable run, the lists the docs take from the code match it, and no doc
//! carries first-person notes.
//!
//! A runnable block is a fenced `bash` block right after an HTML comment:
//! `<!-- runnable: sim -->` (needs only the built CLI; always runs) or
//! `<!-- runnable: cluster -->` (needs the live test cluster; runs with
//! `CELLSCHED_E2E=1`). Blocks run with `bash -eo pipefail` from the
//! repository root, `cellsched` first on PATH and, for cluster blocks, the
//! test cluster's Slurm commands and `SLURM_CONF`.
use crate::common::{self, require_e2e};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `*.md` of the repository (not under `target/`, `.git/` or another
/// hidden directory).
fn markdown_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.starts_with('.') && name != "target" && !(dir == root() && name == "shared") {
                    stack.push(p);
                }
            } else if name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Link targets of `[text](target)` outside fenced code blocks.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// Relative links that do not resolve to a file or directory, as
/// `file:line: target`.
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, target) in links(&text) {
            if target.is_empty() || target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap().split(' ').next().unwrap();
            let resolved = f.parent().unwrap().join(path);
            if !resolved.exists() {
                broken.push(format!("{}:{line}: {target}", f.strip_prefix(root()).unwrap_or(f).display()));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let files = markdown_files();
    for must in ["README.md", "docs/INSTALL.md", "docs/GUIDE.md", "docs/SIMULATOR.md", "docs/FAQ.md"] {
        assert!(files.contains(&root().join(must)), "{must} is missing");
    }
    let broken = broken_links(&files);
    assert!(broken.is_empty(), "broken relative links:\n{}", broken.join("\n"));
    // The check can fail: a link to a missing file is reported.
    let dir = std::env::temp_dir().join(format!("cellsched-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let probe = dir.join("probe.md");
    std::fs::write(&probe, "see [there](no-such-file.md) and [here](probe.md#top)\n```\n[not](a-link.md)\n```\n").unwrap();
    let found = broken_links(&[probe]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with(":1: no-such-file.md"), "{found:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// README links every document of the table in docs/, and stays short.
#[test]
fn readme_is_short_and_links_every_document() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.lines().count() <= 300, "README.md has {} lines (at most 300)", readme.lines().count());
    let targets: Vec<String> = links(&readme).into_iter().map(|(_, t)| t).collect();
    for doc in ["docs/INSTALL.md", "docs/GUIDE.md", "docs/SIMULATOR.md", "docs/ESTIMATOR.md", "docs/OPERATIONS.md", "docs/FAQ.md",
        "docs/RESULTS.md", "SECURITY.md", "CHANGELOG.md", "LICENSE", "bench/HISTORY.md", "docs/CONTRACTS.md"]
    {
        assert!(targets.iter().any(|t| t == doc), "README.md does not link {doc}");
    }
}

/// Words that mark first-person or work-process notes.
const FIRST_PERSON: &[&str] = &[" I ", " I'm ", " I've ", " we ", " We ", " our ", " Our ", " us.", " me "];

#[test]
fn docs_have_no_first_person_notes() {
    let mut found = Vec::new();
    for f in markdown_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut fenced = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            let padded = format!(" {line} ");
            if !fenced && FIRST_PERSON.iter().any(|w| padded.contains(w)) {
                found.push(format!("{}:{}: {line}", f.strip_prefix(root()).unwrap().display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "first-person lines in the docs:\n{}", found.join("\n"));
}

/// Every `--dl-NAME` the docs and shipped examples mention is an option of
/// core's table (a renamed or removed option cannot linger in a doc).
#[test]
fn docs_name_only_real_dl_options() {
    let known: Vec<String> = cellsched_core::options::DlKey::ALL.iter().map(|k| k.option_name().to_string()).collect();
    let mut files = markdown_files();
    for d in ["etc", "etc/examples", "etc/plugstack.conf.d"] {
        for e in std::fs::read_dir(root().join(d)).unwrap().flatten() {
            if e.path().is_file() {
                files.push(e.path());
            }
        }
    }
    let mut bad = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let mut rest = text.as_str();
        while let Some(at) = rest.find("--dl-") {
            let name: String = rest[at + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            let name = name.trim_end_matches('-');
            if !name.is_empty() && name != "dl" && !known.iter().any(|k| k == name) {
                bad.push(format!("{}: --{name}", f.strip_prefix(root()).unwrap().display()));
            }
            rest = &rest[at + 5..];
        }
    }
    assert!(bad.is_empty(), "unknown --dl-* options in the docs:\n{}", bad.join("\n"));
}

/// docs/GUIDE.md lists every variable spank_cellsched(8) says tasks receive
/// (that page's list is generated from `core::plan_env`).
#[test]
fn guide_lists_every_task_variable_of_the_spank_page() {
    let dir = std::env::temp_dir().join(format!("cellsched-docsman-{}", std::process::id()));
    let o = common::cellsched(&["generate", "man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(dir.join("spank_cellsched.8")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let section = page.split(".SH \"TASK ENVIRONMENT\"").nth(1).unwrap().split(".SH").next().unwrap().replace("\\-", "-");
    let names: Vec<&str> = section
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.len() > 3 && w.contains('_'))
        .collect();
    assert!(names.len() >= 20, "read too few variables from the page: {names:?}");
    let guide = std::fs::read_to_string(root().join("docs/GUIDE.md")).unwrap();
    let missing: Vec<_> = names.iter().filter(|n| !guide.contains(&format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "docs/GUIDE.md lacks task variables {missing:?}");
}

/// A runnable block: where it is, its kind and its text.
struct Block {
    at: String,
    kind: String,
    script: String,
}

fn runnable_blocks(doc: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(kind) = l.trim().strip_prefix("<!-- runnable:").and_then(|k| k.strip_suffix("-->")) else { continue };
        assert_eq!(lines.get(i + 1).map(|l| l.trim()), Some("```bash"), "{doc}:{}: a runnable marker must precede a ```bash block", i + 1);
        let body: Vec<&str> = lines[i + 2..].iter().take_while(|l| l.trim() != "```").copied().collect();
        out.push(Block { at: format!("{doc}:{}", i + 3), kind: kind.trim().to_string(), script: body.join("\n") });
    }
    out
}

/// Runs one block; returns an error naming it with its output on failure.
fn run_block(b: &Block, path: &str, slurm_conf: Option<&Path>) -> Result<(), String> {
    let mut cmd = Command::new("bash");
    cmd.arg("-eo").arg("pipefail").arg("-c").arg(&b.script).current_dir(root()).env("PATH", path);
    if let Some(c) = slurm_conf {
        cmd.env("SLURM_CONF", c);
    }
    let o = cmd.output().map_err(|e| format!("{}: cannot run bash: {e}", b.at))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} ({}) failed with {}:\n{}\n--- stdout\n{}\n--- stderr\n{}",
            b.at,
            b.kind,
            o.status,
            b.script,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

fn path_with(dirs: &[&Path]) -> String {
    let mut v: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    v.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(v).unwrap().into_string().unwrap()
}

#[test]
fn runnable_sim_blocks_of_the_docs_run() {
    let bin = common::cellsched_bin();
    let path = path_with(&[bin.parent().unwrap()]);
    let mut ran = 0;
    for doc in ["docs/GUIDE.md", "docs/SIMULATOR.md"] {
        for b in runnable_blocks(doc) {
            assert!(b.kind == "sim" || b.kind == "cluster", "{}: unknown runnable kind '{}'", b.at, b.kind);
            if b.kind == "sim" {
                run_block(&b, &path, None).unwrap_or_else(|e| panic!("{e}"));
                ran += 1;
            }
        }
    }
    assert!(ran >= 3, "only {ran} runnable sim blocks found");
    // The runner can fail: a failing block is reported with its place.
    let bad = Block { at: "probe:1".into(), kind: "sim".into(), script: "cellsched sim --no-such-flag".into() };
    let e = run_block(&bad, &path, None).unwrap_err();
    assert!(e.starts_with("probe:1 (sim) failed"), "{e}");
}

#[test]
fn runnable_cluster_blocks_of_the_docs_run_on_the_test_cluster() {
    require_e2e!();
    let c = common::cluster();
    let bin = common::cellsched_bin();
    let path = path_with(&[bin.parent().unwrap(), &c.spec().slurm_bin]);
    let mut ran = 0;
    for doc in ["docs/GUIDE.md", "docs/SIMULATOR.md"] {
        for b in runnable_blocks(doc).into_iter().filter(|b| b.kind == "cluster") {
            run_block(&b, &path, Some(&c.slurm_conf)).unwrap_or_else(|e| panic!("{e}"));
            ran += 1;
        }
    }
    assert!(ran >= 2, "only {ran} runnable cluster blocks found");
}

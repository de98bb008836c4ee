//! CLI basics that need no cluster: help, version, `cluster env`, and
//! clear errors for bad arguments.
use crate::common::cellsched;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_lists_subcommands() {
    let o = cellsched(&["--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for sub in ["cluster", "estimate", "cells", "profile", "report", "sim", "bench"] {
        assert!(text.contains(sub), "--help lacks {sub}:\n{text}");
    }
}

#[test]
fn cluster_help_lists_actions_and_options() {
    let o = cellsched(&["cluster", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for w in ["up", "down", "status", "env", "--dir", "--port-base", "--no-plugins"] {
        assert!(text.contains(w), "cluster --help lacks {w}:\n{text}");
    }
}

#[test]
fn version_names_the_slurm_release() {
    let o = cellsched(&["--version"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("Slurm"), "{}", stdout(&o));
}

#[test]
fn cluster_env_prints_exports_for_the_given_dir() {
    let o = cellsched(&["cluster", "env", "--dir", "/tmp/cs-envtest", "--port-base", "19990"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "export SLURM_CONF=/tmp/cs-envtest/etc/slurm.conf");
    assert!(lines.contains(&"export CELLSCHED_CLUSTER_DIR=/tmp/cs-envtest"), "{text}");
    assert!(lines.contains(&"export CELLSCHED_PORT_BASE=19990"), "{text}");
    // Nothing was created: env only prints.
    assert!(!std::path::Path::new("/tmp/cs-envtest").exists());
}

#[test]
fn cluster_env_is_valid_shell() {
    let o = cellsched(&["cluster", "env", "--dir", "/tmp/cs env's dir"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = format!("{}\nprintf %s \"$SLURM_CONF\"", stdout(&o));
    let sh = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&sh.stdout), "/tmp/cs env's dir/etc/slurm.conf");
}

#[test]
fn cluster_env_uses_environment_defaults() {
    let o = std::process::Command::new(crate::common::cellsched_bin())
        .args(["cluster", "env"])
        .env("CELLSCHED_CLUSTER_DIR", "/tmp/cs-from-env")
        .env("CELLSCHED_PORT_BASE", "19400")
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(text.contains("SLURM_CONF=/tmp/cs-from-env/etc/slurm.conf") && text.contains("CELLSCHED_PORT_BASE=19400"), "{text}");
}

#[test]
fn bad_port_base_is_rejected_with_the_value() {
    let o = cellsched(&["cluster", "env", "--port-base", "70000"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("70000"), "{}", stderr(&o));
    let o = cellsched(&["cluster", "env", "--port-base", "65534"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("65534"), "{}", stderr(&o));
}

// ---- generated man pages and shell completions (`cellsched generate`) ----

/// A fresh, empty directory for one test's generated files.
fn fresh_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cellsched-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// True when `tool` is on PATH.
fn have(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// The subcommand names listed under `Commands:` in a `--help` text (no `help`).
fn help_subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.trim_end() == "Commands:" {
            inside = true;
        } else if inside {
            let Some(rest) = line.strip_prefix("  ") else { break };
            if rest.starts_with(' ') {
                continue; // wrapped description
            }
            match rest.split_whitespace().next() {
                Some("help") | None => {}
                Some(name) => out.push(name.to_string()),
            }
        }
    }
    out
}

/// Every long option (`--name`) in a `--help` text.
fn help_long_options(help: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in help.match_indices("--") {
        let before = help[..i].chars().last();
        if before.is_some_and(|c| !(c == ' ' || c == '[' || c == ',' || c == '(')) {
            continue;
        }
        let name: String = help[i + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        if name.len() > 1 && !out.iter().any(|o| o[2..] == name) {
            out.push(format!("--{name}"));
        }
    }
    out
}

/// Every visible command path below the top (`["cluster"]`, `["cluster", "up"]`, ...),
/// with its `--help` text; the top itself is `[]`.
fn command_tree() -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let o = cellsched(&args);
        assert!(o.status.success(), "cellsched {args:?}: {}", stderr(&o));
        let help = stdout(&o);
        for sub in help_subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        out.push((path, help));
    }
    out
}

/// Renders a page with groff (all warnings on) as plain UTF-8 text; panics
/// on any warning. Lines are made long enough that no option is split across
/// lines; hyphen and minus glyphs come back as ASCII '-'.
fn render_page(page: &std::path::Path) -> String {
    let o = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-rLL=2000n", "-P-cbou"])
        .arg(page)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("run groff");
    assert!(o.status.success(), "groff failed on {}: {}", page.display(), stderr(&o));
    assert!(o.stderr.is_empty(), "groff warnings for {}:\n{}", page.display(), stderr(&o));
    if have("man") {
        // What users run: man-db's own pipeline at its usual width, with
        // every groff warning on except line-adjustment ("break") notes.
        let m = std::process::Command::new("man")
            .args(["--warnings=char,delim,el,escape,font,ig,input,mac,missing,number,range,reg,right-brace,scale,space,syntax,tab,di", "-l"])
            .arg(page)
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .env("LC_ALL", "C.UTF-8")
            .output()
            .expect("run man");
        assert!(m.status.success(), "man -l failed on {}: {}", page.display(), stderr(&m));
        assert!(m.stderr.is_empty(), "man -l warnings for {}:\n{}", page.display(), stderr(&m));
    }
    stdout(&o).replace(['\u{2010}', '\u{2212}'], "-")
}

/// Skips (with the reason) when groff, needed to render pages, is absent.
fn groff_or_skip(test: &str) -> bool {
    if have("groff") {
        return true;
    }
    eprintln!("SKIP {test}: groff not found on PATH (Debian package groff-base, installed by scripts/install-deps.sh)");
    false
}

#[test]
fn generated_man_pages_render_cleanly_and_document_every_option() {
    if !groff_or_skip("generated_man_pages_render_cleanly_and_document_every_option") {
        return;
    }
    let dir = fresh_dir("man");
    let o = cellsched(&["generate", "man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tree = command_tree();
    assert!(tree.len() > 8, "expected nested subcommands, got {:?}", tree.iter().map(|t| &t.0).collect::<Vec<_>>());
    let mut expected: Vec<String> = vec!["spank_cellsched.8".into(), "cellsched.toml.5".into()];
    for (path, help) in &tree {
        let name = std::iter::once("cellsched".to_string()).chain(path.iter().cloned()).collect::<Vec<_>>().join("-");
        let file = dir.join(format!("{name}.1"));
        expected.push(format!("{name}.1"));
        assert!(file.is_file(), "no page {} (generate printed:\n{})", file.display(), stdout(&o));
        let text = render_page(&file);
        assert!(text.contains("NAME") && text.contains(&name), "{name}: no NAME section naming the command:\n{text}");
        for opt in help_long_options(help) {
            assert!(text.contains(&opt), "page {name} lacks {opt} from `--help`:\n{text}");
        }
        for sub in help_subcommands(help) {
            assert!(text.contains(&sub), "page {name} lacks subcommand {sub}:\n{text}");
            assert!(text.contains(&format!("{name}-{sub}(1)")), "page {name} does not refer to {name}-{sub}(1):\n{text}");
        }
        assert!(text.contains("spank_cellsched(8)"), "page {name} lacks SEE ALSO spank_cellsched(8)");
    }
    // Exactly the expected pages, each listed on stdout.
    let mut got: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(stdout(&o).lines().count(), expected.len(), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The keys in spank/src/args.rs's `KNOWN_KEYS` (the plugin's own list).
fn spank_plugstack_keys() -> Vec<String> {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/spank/src/args.rs")).unwrap();
    let line = src.lines().find(|l| l.contains("pub const KNOWN_KEYS")).expect("KNOWN_KEYS in spank/src/args.rs");
    let list = line.split('"').nth(1).expect("KNOWN_KEYS string");
    list.split(',').map(|k| k.trim().to_string()).collect()
}

/// docs/GUIDE.md's user-facing option table has a row for every row of
/// core's option table, naming its environment key.
#[test]
fn guide_option_table_follows_the_core_table() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/GUIDE.md")).unwrap();
    // Option rows only (not the `--dl-*` summary row of another table).
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `--dl-") && !l.starts_with("| `--dl-*")).collect();
    for key in cellsched_core::options::DlKey::ALL {
        let name = format!("| `--{}", key.option_name());
        let row = rows.iter().find(|l| l.strip_prefix(&name).is_some_and(|rest| rest.starts_with(['=', '`'])));
        let row = row.unwrap_or_else(|| panic!("docs/GUIDE.md has no option row for --{}", key.option_name()));
        assert!(row.contains(&format!("`{}`", key.env_key())), "docs/GUIDE.md row for --{} lacks {}: {row}", key.option_name(), key.env_key());
    }
    assert_eq!(rows.len(), cellsched_core::options::DlKey::ALL.len(), "docs/GUIDE.md option rows: {rows:?}");
}

#[test]
fn spank_page_documents_every_dl_option_and_plugstack_argument() {
    if !groff_or_skip("spank_page_documents_every_dl_option_and_plugstack_argument") {
        return;
    }
    let dir = fresh_dir("spankman");
    let o = cellsched(&["generate", "man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = render_page(&dir.join("spank_cellsched.8"));
    for key in cellsched_core::options::DlKey::ALL {
        let opt = format!("--{}={}", key.option_name(), key.arg_info());
        assert!(text.contains(&opt), "spank page lacks {opt}:\n{text}");
        assert!(text.contains(key.env_key()), "spank page lacks {}:\n{text}", key.env_key());
    }
    let keys = spank_plugstack_keys();
    assert_eq!(keys.len(), 4, "{keys:?}");
    for k in keys {
        assert!(text.contains(&format!("{k}=")), "spank page lacks plugstack argument {k}=:\n{text}");
    }
    for w in ["/run/cellsched", "owned by root", "29500", "PLUGSTACK ARGUMENTS", "plugstack.conf.d/cellsched.conf"] {
        assert!(text.contains(w), "spank page lacks {w:?}:\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cellsched.toml(5)` documents every key of core's table with its
/// default, and the sections in order.
#[test]
fn config_page_documents_every_key_with_its_default() {
    if !groff_or_skip("config_page_documents_every_key_with_its_default") {
        return;
    }
    let dir = fresh_dir("tomlman");
    let o = cellsched(&["generate", "man", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = render_page(&dir.join("cellsched.toml.5"));
    for (section, _) in cellsched_core::config::SECTIONS {
        assert!(text.contains(&format!("[{}]", section.to_uppercase())), "no [{section}] section:\n{text}");
    }
    for k in cellsched_core::config::KEYS {
        let entry = format!("{} = {}", k.key, k.default.unwrap_or("(unset)"));
        assert!(text.contains(&entry), "cellsched.toml(5) lacks `{entry}` ([{}]):\n{text}", k.section);
        assert!(text.contains(k.range), "cellsched.toml(5) lacks the range of {}.{}", k.section, k.key);
    }
    for w in ["PrioritySiteFactorParameters=config=", "CELLSCHED_CONFIG", "scontrol reconfigure", "cellsched-overruns"] {
        assert!(text.contains(w), "cellsched.toml(5) lacks {w:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_cover_every_subcommand_and_load_in_bash() {
    let dir = fresh_dir("compl");
    let o = cellsched(&["generate", "completions", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let top = help_subcommands(&stdout(&cellsched(&["--help"])));
    assert!(top.contains(&"generate".to_string()), "{top:?}");
    for file in ["cellsched.bash", "_cellsched", "cellsched.fish"] {
        let text = read_file(&dir.join(file));
        for sub in &top {
            assert!(text.contains(sub.as_str()), "{file} lacks subcommand {sub}");
        }
        assert!(text.contains("port-base"), "{file} lacks cluster's --port-base");
    }
    // bash: the script parses, registers a completion and completes subcommands.
    let script = format!(
        "set -e; source {}; complete -p cellsched; COMP_WORDS=(cellsched clu); COMP_CWORD=1; COMP_LINE='cellsched clu'; \
         COMP_POINT=${{#COMP_LINE}}; _cellsched cellsched clu cellsched; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        dir.join("cellsched.bash").display()
    );
    let b = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(b.status.success(), "bash completion failed: {}", stderr(&b));
    let out = stdout(&b);
    assert!(out.lines().any(|l| l == "cluster"), "bash did not complete 'clu' to 'cluster':\n{out}");
    for (shell, file) in [("zsh", "_cellsched"), ("fish", "cellsched.fish")] {
        if have(shell) {
            let c = std::process::Command::new(shell).arg("-n").arg(dir.join(file)).output().unwrap();
            assert!(c.status.success(), "{shell} -n {file}: {}", stderr(&c));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_file(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// `estimate`'s one-line time breakdown names every part the iteration time
/// adds up (an MoE model over two nodes has all-to-all and a slowest-rank
/// wait): the parts sum to the printed iteration time.
#[test]
fn estimate_time_parts_add_up_to_the_iteration() {
    let o = cellsched(&["estimate", "--model", "moe__1.3B", "--batch", "64", "--gpu", "a100", "--gpus", "16", "--nodes", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let iter: f64 = text.lines().find_map(|l| l.strip_prefix("iteration")).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no iteration line:\n{text}"));
    let parts = text.lines().find_map(|l| l.strip_prefix("model time")).unwrap_or_else(|| panic!("no model time line:\n{text}"));
    let values: Vec<f64> = parts.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    for name in ["ep", "slowest rank"] {
        assert!(parts.contains(name), "{name} missing: {parts}");
    }
    let sum: f64 = values.iter().sum();
    assert!((sum - iter).abs() <= 1e-3 + 1e-3 * iter, "parts {values:?} sum to {sum}, iteration {iter}:\n{text}");
}

/// `estimate --dl-precision/--dl-runtime` estimate the job as sbatch's
/// options describe it: `--explain` names the description (a user model of
/// its own), fp32 is slower than the catalog's fp16, a DDP job gets a
/// data-parallel plan, and a bad value is refused naming the allowed form.
#[test]
fn estimate_takes_the_jobs_training_options() {
    let base = ["estimate", "--model", "gpt__350M", "--batch", "16", "--gpu", "a100", "--gpus", "4"];
    let iter = |o: &std::process::Output| -> f64 {
        stdout(o).lines().find_map(|l| l.strip_prefix("iteration")).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no iteration line:\n{}", stdout(o)))
    };
    let plain = cellsched(&base);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let mut args = base.to_vec();
    args.extend(["--dl-precision", "FP32", "--dl-runtime", "ddp", "--explain"]);
    let o = cellsched(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("user:gpt__350M@") && text.contains("Fp32 precision") && text.contains("runtime Ddp"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("plan") && l.contains("tp=1 pp=1") && l.contains("zero=0")), "{text}");
    assert!(iter(&o) > iter(&plain), "fp32 {} vs fp16 {}", iter(&o), iter(&plain));
    let mut bad = base.to_vec();
    bad.extend(["--dl-precision", "int8"]);
    let e = cellsched(&bad);
    assert!(!e.status.success() && stderr(&e).contains("fp16, bf16, tf32 or fp32"), "{}", stderr(&e));
}

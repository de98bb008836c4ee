//! `cellsched generate`: files generated from the CLI's own definitions, for
//! packagers and `make install`.
//!
//! - `cellsched generate man DIR`: `cellsched.1`, one `cellsched-<sub>.1` page
//!   per subcommand (nested ones too: `cellsched-cluster-up.1`), rendered
//!   from the clap definitions, plus `spank_cellsched.8` for the SPANK plugin,
//!   whose option list comes from `cellsched_core::options::DlKey` and task
//!   environment from `cellsched_core::plan_env`, and `cellsched.toml.5`,
//!   every key of the plugins' configuration from `cellsched_core::config::KEYS`.
//! - `cellsched generate completions DIR`: `cellsched.bash`, `_cellsched`
//!   (zsh) and `cellsched.fish`, from the same clap definitions.
//!
//! Each file is written to a temporary name and renamed into place; the
//! command prints the path of every file it wrote.
use anyhow::Context;
use cellsched_core::config::{KEYS, SECTIONS};
use cellsched_core::options::DlKey;
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Man pages: cellsched(1), one page per subcommand, spank_cellsched(8) and cellsched.toml(5)
    Man {
        /// Directory to write the pages into (created if missing)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Shell completions for bash, zsh and fish
    Completions {
        /// Directory to write the completion files into (created if missing)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// Title line fields shared by every page.
const MANUAL: &str = "cellsched manual";

/// Runs `generate`; `cli` is the whole CLI's clap command (`Cli::command()`).
pub fn run(args: Args, cli: clap::Command) -> anyhow::Result<()> {
    match args.what {
        What::Man { dir } => {
            create_dir(&dir)?;
            for path in write_man_pages(cli, &dir)? {
                println!("{}", path.display());
            }
        }
        What::Completions { dir } => {
            create_dir(&dir)?;
            for path in write_completions(cli, &dir)? {
                println!("{}", path.display());
            }
        }
    }
    Ok(())
}

fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    Ok(path)
}

/// The CLI pages (every visible subcommand, recursively) and the SPANK page.
fn write_man_pages(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let source = format!("cellsched {}", env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    collect_pages(&cli, None, &mut pages);
    let all_names: Vec<String> = pages.iter().map(|(c, _)| page_name(c)).collect();
    let mut written = Vec::new();
    for (cmd, parent) in &pages {
        let name = page_name(cmd);
        let man = clap_mangen::Man::new(cmd.clone()).title(name.to_uppercase()).source(&source).manual(MANUAL);
        let mut out = Vec::new();
        man.render(&mut out).with_context(|| format!("cannot render the page of {name}"))?;
        let children: Vec<String> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).map(page_name).collect();
        out.extend(see_also(&name, parent.as_deref(), &children, &all_names).as_bytes());
        let text = String::from_utf8(out).with_context(|| format!("the page of {name} is not UTF-8"))?;
        written.push(write_file(dir, &format!("{name}.1"), ascii_roff(&text).as_bytes())?);
    }
    written.push(write_file(dir, "spank_cellsched.8", ascii_roff(&spank_page(&source)).as_bytes())?);
    written.push(write_file(dir, "cellsched.toml.5", ascii_roff(&config_page(&source)).as_bytes())?);
    Ok(written)
}

/// Replaces every non-ASCII character with its groff escape (`×` → `\[u00D7]`),
/// so pages render the same with or without groff's input preprocessor.
fn ascii_roff(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", c as u32));
        }
    }
    out
}

/// The page name of a built command: its display name (`cellsched-cluster-up`).
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_string()
}

/// Every visible command below (and including) `cmd`, with its parent's page name.
fn collect_pages(cmd: &clap::Command, parent: Option<String>, out: &mut Vec<(clap::Command, Option<String>)>) {
    out.push((cmd.clone(), parent));
    let me = page_name(cmd);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect_pages(sub, Some(me.clone()), out);
    }
}

/// The SEE ALSO section of a CLI page: parent, children, the SPANK page and
/// the Slurm commands cellsched works with (the top page lists every page).
fn see_also(name: &str, parent: Option<&str>, children: &[String], all: &[String]) -> String {
    let mut refs: Vec<String> = Vec::new();
    if let Some(p) = parent {
        refs.push(man_ref(p, "1"));
    }
    let listed: Vec<&String> = if parent.is_none() { all.iter().filter(|n| *n != name).collect() } else { children.iter().collect() };
    refs.extend(listed.into_iter().map(|c| man_ref(c, "1")));
    refs.push(man_ref("spank_cellsched", "8"));
    for (p, s) in [("sbatch", "1"), ("sacct", "1"), ("slurm.conf", "5")] {
        refs.push(man_ref(p, s));
    }
    format!(".SH \"SEE ALSO\"\n{}\n", refs.join(",\n"))
}

fn man_ref(page: &str, section: &str) -> String {
    format!("\\fB{}\\fR({section})", escape(page))
}

/// Escapes text for a roff body line: backslashes, hyphens (as `\-`, so
/// options stay ASCII when copied), and a leading `.` or `'`.
fn escape(text: &str) -> String {
    let mut s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        s.insert_str(0, "\\&");
    }
    s
}

/// A `.TP` entry: bold term, then body paragraphs.
fn tp(term: &str, body: &str) -> String {
    format!(".TP\n{term}\n{}\n", escape(body))
}

/// `spank_cellsched(8)`: plugstack arguments, the `--dl-*` options (from
/// core's option table, [`DlKey::ALL`], as the plugin registers them), what
/// tasks receive, and files.
fn spank_page(source: &str) -> String {
    let mut p = String::new();
    p.push_str(&format!(".TH SPANK_CELLSCHED 8 \"\" \"{source}\" \"{MANUAL}\"\n"));
    // No hyphenation: option and variable names must stay whole.
    p.push_str(".nh\n");
    p.push_str(".SH NAME\nspank_cellsched \\- cellsched SPANK plugin: \\-\\-dl\\-* job options and plan injection for Slurm\n");
    p.push_str(".SH SYNOPSIS\nIn \\fBplugstack.conf\\fR(5):\n.PP\n.nf\n");
    p.push_str("\\fBoptional\\fR /usr/lib/x86_64\\-linux\\-gnu/slurm\\-wlm/spank_cellsched.so [\\fIkey\\fR=\\fIvalue\\fR ...]\n.fi\n");
    p.push_str(".SH DESCRIPTION\n");
    p.push_str(&format!(
        "{}\n.PP\n{}\n.PP\n{}\n",
        escape(
            "spank_cellsched.so adds cellsched's --dl-* options to sbatch, srun and salloc (--help shows them prefixed \
             [cellsched]). Bad values are refused at submit with a message naming the option and the allowed form; \
             nothing is submitted. Valid values reach slurmctld in the job control environment, where the \
             job_submit/cellsched plugin chooses a Cell (GPU type, GPU count, pipeline stages) and the \
             site_factor/cellsched plugin orders jobs by predicted remaining time."
        ),
        escape(
            "In every task (the batch script and each srun task) the plugin exports the plan chosen for the GPUs \
             actually granted: slurmctld's decision, read by slurmstepd as root from the job's AdminComment; else a \
             pinned --dl-plan; else the estimator run on the node. If no plan can be made the task still runs, with \
             CELLSCHED_ERROR saying why. Jobs without --dl-* options are not touched."
        ),
        escape(
            "The shipped plugstack line loads the plugin optional, so a node without the file still runs jobs. \
             Option errors still stop the command, and post-option errors make it exit 1. An unknown plugstack \
             argument or a bad value makes the load fail: loaded optional, the --dl-* options are then missing \
             (sbatch: unrecognized option '--dl-model=...'), loaded required, every sbatch, srun and salloc fails. \
             Check the line with `sbatch --help | grep cellsched` after every change."
        ),
    ));
    p.push_str(".SH \"PLUGSTACK ARGUMENTS\"\n");
    p.push_str(&escape("Arguments follow the plugin path as key=value; an unknown key or a bad value fails the plugin's load."));
    p.push('\n');
    p.push_str(&tp(
        "\\fBdefault_gpu_type\\fR=\\fITYPE\\fR",
        "GPU type assumed when neither slurmctld's decision nor --dl-cell names one (letters, digits, '_', '-'; \
         e.g. a100). Default: none.",
    ));
    p.push_str(&tp(
        "\\fBconfig\\fR=\\fIPATH\\fR",
        "Absolute path of cellsched.toml (GPU catalog overrides, profile DB) for estimates made on the node. \
         Default: $CELLSCHED_CONFIG, then cellsched.toml next to slurm.conf.",
    ));
    p.push_str(&tp(
        "\\fBplan_dir\\fR=\\fIDIR\\fR",
        "Absolute directory under which each step's plan directory is made. It must be owned by root and writable \
         by no one else (a world-writable directory such as /tmp is refused, and the job is told so in \
         CELLSCHED_ERROR); the plugin creates it 0755 when missing. Default: /run/cellsched.",
    ));
    p.push_str(&tp(
        "\\fBmaster_port_base\\fR=\\fIPORT\\fR",
        "Base of the per-job MASTER_PORT range: MASTER_PORT = PORT + jobid % 2000; PORT in 1024..=63535. \
         Default: 29500.",
    ));
    p.push_str(".SH OPTIONS\n");
    p.push_str(&escape(
        "Options of sbatch, srun and salloc. Each has an environment-variable equivalent that is read when the \
         option is not given.",
    ));
    p.push('\n');
    for key in DlKey::ALL {
        let term = if key.value_optional() {
            format!("\\fB{}\\fR[=\\fI{}\\fR]", escape(&format!("--{}", key.option_name())), escape(key.arg_info()))
        } else {
            format!("\\fB{}\\fR=\\fI{}\\fR", escape(&format!("--{}", key.option_name())), escape(key.arg_info()))
        };
        p.push_str(&tp(&term, &format!("{}. Value: {}. Environment: {}.", key.help(), key.allowed_form(), key.env_key())));
    }
    p.push_str(".SH \"TASK ENVIRONMENT\"\n");
    p.push_str(&escape(&format!(
        "Tasks of jobs with --dl-* options receive {}. CELLSCHED_PLAN_SOURCE says where the plan came from \
         (decision, pinned or estimated); CELLSCHED_FREEZE_SCHEDULE and CELLSCHED_ITER_TIME_S are set only when \
         known; CELLSCHED_ERROR is set instead of the plan variables when no plan could be made.",
        task_env_names().join(", ")
    )));
    p.push('\n');
    p.push_str(".SH FILES\n");
    p.push_str(&tp(
        "\\fIPLAN_DIR\\fR/\\fIjobid\\fR.\\fIstep\\fR.\\fInodeid\\fR/plan.json",
        "The task's plan as JSON (0600, owned by the job's user; path in CELLSCHED_PLAN_FILE). The directory is \
         made by slurmstepd as root and removed when the step ends and by the job epilog.",
    ));
    p.push_str(&tp("/etc/slurm/plugstack.conf.d/cellsched.conf", "The plugstack line installed by make install and the Debian package."));
    p.push_str(&tp("/etc/slurm/cellsched.toml", "The plugins' configuration; see cellsched.toml(5)."));
    p.push_str(".SH \"SEE ALSO\"\n");
    let refs = [("cellsched", "1"), ("cellsched-estimate", "1"), ("cellsched-cells", "1"), ("cellsched.toml", "5"), ("sbatch", "1"), ("srun", "1"), ("spank", "8"), ("slurm.conf", "5")];
    p.push_str(&refs.iter().map(|(n, s)| man_ref(n, s)).collect::<Vec<_>>().join(",\n"));
    p.push('\n');
    p
}

/// Every variable the SPANK plugin exports to the tasks of a DL job: core's
/// plan variables ([`plan_env`], every optional one present) and the
/// plugin's own (`RANK`, `LOCAL_RANK`, `CELLSCHED_PLAN_FILE`, `CELLSCHED_ERROR`).
pub fn task_env_names() -> Vec<&'static str> {
    use cellsched_core::plan_env::{plan_env, PlanEnv, Workers};
    let plan = cellsched_core::Plan { dp: 1, tp: 1, pp: 1, micro_batches: 1, zero_stage: 0, checkpointing: false };
    let sample = PlanEnv {
        gpu_type: "a100",
        cell: "a100x1x1",
        nodes: 1,
        gpus: 1,
        gpus_per_node: 1,
        plan: &plan,
        global_batch: 1,
        freeze_mode: "off",
        freeze_schedule: Some(""),
        iter_time_s: Some(1.0),
        source: "decision",
        workers: Workers::Launcher,
        node_rank: 0,
        master_addr: Some("localhost"),
        master_port: 29500,
    };
    let mut names: Vec<&'static str> = plan_env(&sample).into_iter().map(|(k, _)| k).collect();
    names.extend(["RANK", "LOCAL_RANK", "CELLSCHED_PLAN_FILE", "CELLSCHED_ERROR"]);
    names
}

/// `cellsched.toml(5)`: every key of [`KEYS`], by table, with its default,
/// range and when a change takes effect.
fn config_page(source: &str) -> String {
    let mut p = String::new();
    p.push_str(&format!(".TH CELLSCHED.TOML 5 \"\" \"{source}\" \"{MANUAL}\"\n.nh\n"));
    p.push_str(".SH NAME\ncellsched.toml \\- configuration of cellsched's Slurm plugins\n");
    p.push_str(".SH SYNOPSIS\n/etc/slurm/cellsched.toml\n");
    p.push_str(".SH DESCRIPTION\n");
    p.push_str(&escape(
        "A TOML file read by the slurmctld plugins site_factor/cellsched and job_submit/cellsched, and (its \
         [estimator] table only) by the SPANK plugin spank_cellsched.so in job steps. Every table and key is \
         optional; a missing key takes the default below. An unknown key or a value out of range is an error \
         naming the file and line: slurmctld logs it and keeps the last good configuration (stock Slurm \
         behaviour when none was good since it started).",
    ));
    p.push_str("\n.PP\n");
    p.push_str(&escape(
        "Where the file is found (first match wins): site_factor/cellsched and job_submit/cellsched: \
         PrioritySiteFactorParameters=config=PATH in slurm.conf, then CELLSCHED_CONFIG in slurmctld's environment, \
         then cellsched.toml beside slurm.conf. spank_cellsched.so: its \
         plugstack argument config=PATH, then cellsched.toml beside slurm.conf. Keeping the file beside \
         slurm.conf makes all three read the same file; cellsched doctor warns when they do not.",
    ));
    p.push('\n');
    for (section, about) in SECTIONS {
        p.push_str(&format!(".SH \"[{}]\"\n{}\n", section.to_uppercase(), escape(about)));
        for k in KEYS.iter().filter(|k| k.section == *section) {
            let term = format!("\\fB{}\\fR = \\fI{}\\fR", escape(k.key), escape(k.default.unwrap_or("(unset)")));
            let body = format!("{} Values: {}. Takes effect: {}.", k.doc, k.range, k.reload.describe());
            p.push_str(&tp(&term, &body));
        }
    }
    p.push_str(".SH EXAMPLE\n.nf\n");
    for (section, _) in SECTIONS {
        p.push_str(&format!("[{section}]\n"));
        for k in KEYS.iter().filter(|k| k.section == *section) {
            match k.default {
                Some(d) => p.push_str(&format!("{} = {}\n", escape(k.key), escape(d))),
                None => p.push_str(&format!("# {} = \"/var/lib/cellsched/...\"\n", escape(k.key))),
            }
        }
    }
    p.push_str(".fi\n.SH FILES\n");
    p.push_str(&tp("/etc/slurm/cellsched.toml", "The file; make install and the Debian package install the commented example there when none exists."));
    p.push_str(&tp("StateSaveLocation/cellsched-overruns", "Users' last overruns of declared work ([declared]), kept across slurmctld restarts."));
    p.push_str(".SH \"SEE ALSO\"\n");
    let refs = [("cellsched", "1"), ("cellsched-doctor", "1"), ("spank_cellsched", "8"), ("slurm.conf", "5")];
    p.push_str(&refs.iter().map(|(n, s)| man_ref(n, s)).collect::<Vec<_>>().join(",\n"));
    p.push('\n');
    p
}

/// bash, zsh and fish completion scripts.
fn write_completions(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut cli = cli;
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cli, "cellsched", &mut out);
        let name = match shell {
            Shell::Bash => "cellsched.bash",
            Shell::Zsh => "_cellsched",
            _ => "cellsched.fish",
        };
        written.push(write_file(dir, name, &out)?);
    }
    Ok(written)
}

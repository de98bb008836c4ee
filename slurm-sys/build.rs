//! Generates Slurm bindings at build time and compiles the C shim.
//!
//! Inputs (environment):
//! - `SLURM_INCLUDE_DIR`: directory holding `slurm/slurm.h` (default `/usr/include`;
//!   when only `SLURM_SRC_DIR` is set, the source tree's own `slurm/` headers).
//! - `SLURM_SRC_DIR`: configured Slurm source tree of the *same* release
//!   (default `/opt/cellsched/src/slurm-<release of the public headers>`).
//!
//! Outputs in `OUT_DIR`: `bindings.rs` (bindgen), `version.rs` (release constants),
//! and the static libraries `cellsched_shim` and `cellsched_consts`.
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

const INSTALL_HINT: &str =
    "run scripts/install-deps.sh (as root) or set SLURM_INCLUDE_DIR / SLURM_SRC_DIR";

fn fail(msg: String) -> ! {
    // A panic in build.rs prints the message verbatim under "--- stderr".
    eprintln!("\nslurm-sys: error: {msg}\n");
    panic!("slurm-sys: {msg}");
}

/// Parses `#define NAME VALUE` from a header text.
fn define_value<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some("#define") && it.next() == Some(name)).then(|| it.next()).flatten()
    })
}

fn parse_version_number(text: &str) -> Option<u32> {
    let v = define_value(text, "SLURM_VERSION_NUMBER")?;
    u32::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
}

fn release_of(n: u32) -> String {
    format!("{:02}.{:02}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

fn main() {
    for v in ["SLURM_INCLUDE_DIR", "SLURM_SRC_DIR"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=shim/cellsched_shim.c");
    println!("cargo:rerun-if-changed=shim/cellsched_shim.h");
    println!("cargo:rerun-if-changed=shim/cellsched_consts.c");

    let src_env = env::var_os("SLURM_SRC_DIR").map(PathBuf::from);
    let (inc, inc_from) = match (env::var_os("SLURM_INCLUDE_DIR"), &src_env) {
        (Some(i), _) => (PathBuf::from(i), "SLURM_INCLUDE_DIR"),
        (None, Some(s)) => (s.clone(), "SLURM_SRC_DIR (SLURM_INCLUDE_DIR unset)"),
        (None, None) => (PathBuf::from("/usr/include"), "the default include dir (libslurm-dev)"),
    };
    for h in ["slurm.h", "spank.h", "slurm_errno.h", "slurm_version.h"] {
        let p = inc.join("slurm").join(h);
        if !p.is_file() {
            fail(format!("Slurm public header {} not found (headers taken from {inc_from}); {INSTALL_HINT}", p.display()));
        }
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let ver_h = inc.join("slurm/slurm_version.h");
    let ver_text = fs::read_to_string(&ver_h).unwrap_or_else(|e| fail(format!("cannot read {}: {e}", ver_h.display())));
    let version = parse_version_number(&ver_text)
        .unwrap_or_else(|| fail(format!("no SLURM_VERSION_NUMBER in {}", ver_h.display())));
    let release = release_of(version);

    let src = src_env.unwrap_or_else(|| PathBuf::from(format!("/opt/cellsched/src/slurm-{release}")));
    let slurmctld_h = src.join("src/slurmctld/slurmctld.h");
    if !slurmctld_h.is_file() {
        fail(format!(
            "Slurm source tree for release {release} not found: {} is missing \
             (public headers in {}); {INSTALL_HINT}",
            slurmctld_h.display(),
            inc.display()
        ));
    }
    let config_h = src.join("config.h");
    let config_text = fs::read_to_string(&config_h).unwrap_or_else(|_| {
        fail(format!(
            "{} missing: the Slurm source tree {} is not configured (run ./configure there, or {INSTALL_HINT})",
            config_h.display(),
            src.display()
        ))
    });
    let src_version = parse_version_number(&config_text)
        .unwrap_or_else(|| fail(format!("no SLURM_VERSION_NUMBER in {}", config_h.display())));
    if src_version != version {
        fail(format!(
            "Slurm version mismatch: public headers {} are release {release} but source tree {} is release {}; \
             point SLURM_SRC_DIR at a tree of {release} or SLURM_INCLUDE_DIR at headers of {}",
            inc.display(),
            src.display(),
            release_of(src_version),
            release_of(src_version)
        ));
    }
    let api_version = define_value(&config_text, "SLURM_API_VERSION")
        .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| fail(format!("no SLURM_API_VERSION in {}", config_h.display())));
    for p in [&config_h, &slurmctld_h] {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    // gres.h moved from src/common to src/interfaces in 23.02.
    let gres_h = ["src/interfaces/gres.h", "src/common/gres.h"]
        .iter()
        .map(|p| src.join(p))
        .find(|p| p.is_file())
        .unwrap_or_else(|| fail(format!("gres.h not found under {}/src/{{common,interfaces}}", src.display())));
    let mut internal: Vec<PathBuf> = vec![
        src.join("src/slurmctld/slurmctld.h"),
        src.join("src/slurmctld/locks.h"),
        gres_h,
        src.join("src/common/node_conf.h"),
        src.join("src/common/list.h"),
        src.join("src/common/env.h"),
        src.join("src/common/xmalloc.h"),
        src.join("src/common/xstring.h"),
    ];
    let job_record_h = src.join("src/common/job_record.h");
    if job_record_h.is_file() {
        internal.push(job_record_h);
    }
    for p in &internal {
        if !p.is_file() {
            fail(format!("internal header {} missing in source tree {}", p.display(), src.display()));
        }
    }

    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    write_version_rs(&out, version, &release, api_version, &inc, &src);
    write_bit_flags(&out, &inc.join("slurm/slurm.h"));
    generate_bindings(&out, &inc, &src, &internal);
    compile_c(&inc, &src);
    println!("cargo:rustc-link-lib=dylib=dl");
}

fn write_version_rs(out: &Path, version: u32, release: &str, api: u32, inc: &Path, src: &Path) {
    let mut s = String::new();
    writeln!(s, "/// `SLURM_VERSION_NUMBER` of the headers these bindings were built from.").unwrap();
    writeln!(s, "pub const SLURM_VERSION_NUMBER: u32 = {version:#x};").unwrap();
    writeln!(s, "/// Release string of the headers, e.g. \"22.05.8\".").unwrap();
    writeln!(s, "pub const RELEASE: &str = {release:?};").unwrap();
    writeln!(s, "/// `SLURM_API_VERSION` (libslurm ABI: current<<16|revision<<8|age) of the source tree.").unwrap();
    writeln!(s, "pub const SLURM_API_VERSION: u32 = {api:#x};").unwrap();
    writeln!(s, "/// Public include directory used at build time.").unwrap();
    writeln!(s, "pub const BUILD_INCLUDE_DIR: &str = {:?};", inc.display().to_string()).unwrap();
    writeln!(s, "/// Configured source tree used at build time.").unwrap();
    writeln!(s, "pub const BUILD_SRC_DIR: &str = {:?};", src.display().to_string()).unwrap();
    fs::write(out.join("version.rs"), s).unwrap();
}

/// `#define NAME SLURM_BIT(n)` flags (job state, node state, ...), which bindgen
/// cannot evaluate: emitted as `u64`, the type of `SLURM_BIT` in C (compare a
/// `uint32_t` state field as `u64::from(job_state) & JOB_REQUEUE != 0`).
fn write_bit_flags(out: &Path, slurm_h: &Path) {
    let text = fs::read_to_string(slurm_h).unwrap_or_else(|e| fail(format!("cannot read {}: {e}", slurm_h.display())));
    let mut s = String::new();
    for (name, bit) in bit_flag_defines(&text) {
        writeln!(s, "/// `{name}` = `SLURM_BIT({bit})`.\npub const {name}: u64 = 1 << {bit};").unwrap();
    }
    fs::write(out.join("bit_flags.rs"), s).unwrap();
}

/// `(NAME, n)` for each `#define NAME SLURM_BIT(n)` line.
fn bit_flag_defines(text: &str) -> Vec<(String, u32)> {
    let mut v = Vec::new();
    for l in text.lines() {
        let mut it = l.split_whitespace();
        if it.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(val)) = (it.next(), it.next()) else { continue };
        let Some(n) = val.strip_prefix("SLURM_BIT(").and_then(|r| r.strip_suffix(')')) else { continue };
        if let Ok(bit) = n.trim().parse::<u32>() {
            if bit < 64 && !v.iter().any(|(x, _): &(String, u32)| x == name) {
                v.push((name.to_string(), bit));
            }
        }
    }
    v
}

/// Macros whose values bindgen would type wrongly (e.g. `NO_VAL16` as `u32`):
/// they are written by hand in `consts.rs` and checked against C in tests.
const HAND_TYPED: &[&str] = &[
    "NO_VAL8", "NO_VAL16", "NO_VAL", "NO_VAL64", "INFINITE8", "INFINITE16", "INFINITE", "INFINITE64",
    "NICE_OFFSET", "SLURM_VERSION_NUMBER", "SLURM_SUCCESS", "SLURM_ERROR", "ESPANK_SUCCESS",
    "JOB_STATE_BASE", "JOB_STATE_FLAGS", "SLURM_API_VERSION",
];

#[derive(Debug)]
struct Callbacks;
impl bindgen::callbacks::ParseCallbacks for Callbacks {
    /// Slurm uses `uint16_t`/`uint64_t` sentinels and flag masks: type by value.
    fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
        use bindgen::callbacks::IntKind;
        if name.starts_with("ESLURM_") || name.starts_with("ESPANK_") || name.starts_with("SLURM_") && value < 0 {
            return Some(IntKind::Int);
        }
        if value < 0 {
            return None;
        }
        if value > u32::MAX as i64 || name.ends_with("64") {
            Some(IntKind::U64)
        } else {
            Some(IntKind::U32)
        }
    }
}

fn clang_args(inc: &Path, src: &Path) -> Vec<String> {
    vec![
        format!("-I{}", inc.display()),
        format!("-I{}", src.display()),
        format!("-I{}", src.join("src/common").display()),
        "-DHAVE_CONFIG_H".into(),
        "-D_GNU_SOURCE".into(),
    ]
}

fn generate_bindings(out: &Path, inc: &Path, src: &Path, internal: &[PathBuf]) {
    let mut wrapper = String::new();
    writeln!(wrapper, "#include \"{}\"", src.join("config.h").display()).unwrap();
    for h in ["slurm.h", "slurm_errno.h", "spank.h"] {
        writeln!(wrapper, "#include \"{}\"", inc.join("slurm").join(h).display()).unwrap();
    }
    for h in internal {
        writeln!(wrapper, "#include \"{}\"", h.display()).unwrap();
    }
    let wrapper_path = out.join("wrapper.h");
    fs::write(&wrapper_path, wrapper).unwrap();

    let mut b = bindgen::Builder::default()
        .header(wrapper_path.display().to_string())
        .clang_args(clang_args(inc, src))
        .parse_callbacks(Box::new(Callbacks))
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .prepend_enum_name(false)
        .size_t_is_usize(true);
    // Public API: plugin-facing types, SPANK, errors, job descriptors.
    for t in [
        "job_desc_msg_t", "job_desc_msg", "spank_t", "spank_err_t", "spank_item_t", "spank_context_t",
        "spank_option", "spank_opt_cb_f", "slurm_err_t", "job_states", "job_state_reason",
        "node_states", "slurm_conf_t", "job_info_msg_t", "slurm_job_info_t",
    ] {
        b = b.allowlist_type(t);
    }
    // Internal slurmctld/common types.
    for t in [
        "job_record_t", "job_record", "job_details_t", "job_details", "part_record_t", "part_record",
        "node_record_t", "node_record", "slurmctld_lock_t", "lock_level_t", "lock_datatype_t",
        "List", "ListIterator", "list_t", "list_itr_t", "ListForF",
    ] {
        b = b.allowlist_type(t);
    }
    for f in [
        "spank_.*", "slurm_spank_log", "slurm_info", "slurm_error", "slurm_verbose", "slurm_debug[0-9]?",
        "slurm_api_version", "slurm_init_job_desc_msg", "slurm_strerror",
        // The SPANK plugin's one job query (slurmstepd).
        "slurm_load_job", "slurm_free_job_info_msg",
        // slurmctld-only: reach them through the shim (dlsym) outside slurmctld.
        "lock_slurmctld", "unlock_slurmctld", "find_job_record", "queue_job_scheduler", "update_job",
        "list_(append|count|for_each|find_first|iterator_create|iterator_destroy|next)",
        "env_array_(append|overwrite|create|free)", "getenvp", "envcount",
        "xstrdup", "slurm_xfree", "gres_prepend_tres_type", "gres_get_node_used",
    ] {
        b = b.allowlist_function(f);
    }
    for v in ["job_list", "node_record_table_ptr", "node_record_count", "slurm_conf"] {
        b = b.allowlist_var(v);
    }
    for v in [
        "ESLURM_.*", "ESPANK_.*", "SLURM_VERSION_NUM.*", "SLURM_API_VERSION", "JOB_[A-Z_]+", "NODE_STATE_[A-Z_]+",
        "SPANK_OPTION_MAXLEN", "MAX_TASKS_PER_NODE", "SLURMCTLD_LOCK_.*",
    ] {
        b = b.allowlist_var(v);
    }
    for n in HAND_TYPED {
        b = b.blocklist_item(n);
    }
    let bindings = b.generate().unwrap_or_else(|e| {
        fail(format!(
            "bindgen failed on {} (public headers {}, source tree {}): {e}; is libclang-dev installed? ({INSTALL_HINT})",
            wrapper_path.display(),
            inc.display(),
            src.display()
        ))
    });
    bindings.write_to_file(out.join("bindings.rs")).unwrap();
}

fn compile_c(inc: &Path, src: &Path) {
    let mut shim = cc::Build::new();
    shim.file("shim/cellsched_shim.c").include("shim");
    let mut consts = cc::Build::new();
    consts.file("shim/cellsched_consts.c").include("shim");
    for b in [&mut shim, &mut consts] {
        b.include(inc)
            .include(src)
            .include(src.join("src/common"))
            .define("HAVE_CONFIG_H", None)
            .define("_GNU_SOURCE", None)
            .flag_if_supported("-Wno-unused-parameter")
            .flag_if_supported("-Wno-sign-compare")
            .flag_if_supported("-Wno-missing-field-initializers")
            .pic(true)
            .warnings(true);
    }
    shim.compile("cellsched_shim");
    consts.compile("cellsched_consts");
}

//! Link arguments for the SPANK plugin (version script exporting only the
//! plugin symbols, lazy binding) and the Slurm release it is built for.
include!("../plugins/build_support.rs");

fn main() {
    emit_plugin_link_args(&[
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "spank_plugin_version",
        "slurm_spank_init",
        "slurm_spank_init_post_opt",
        "slurm_spank_task_init",
    ]);
    let inc = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let hdr = format!("{inc}/slurm/slurm_version.h");
    let number = std::fs::read_to_string(&hdr)
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("#define SLURM_VERSION_NUMBER "))?;
            let hex = line.split_whitespace().nth(2)?.trim_start_matches("0x");
            u32::from_str_radix(hex, 16).ok()
        })
        .unwrap_or_else(|| panic!("cannot read SLURM_VERSION_NUMBER from {hdr} (install libslurm-dev or set SLURM_INCLUDE_DIR)"));
    println!("cargo:rustc-env=CELLSCHED_SLURM_VERSION_NUMBER={number}");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed={hdr}");
}

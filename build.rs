//! Records build facts for `cellsched --version`: git revision and the Slurm
//! release the plugins were built against (from the installed headers).
use std::process::Command;

fn main() {
    let rev = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CELLSCHED_GIT_REV={rev}");
    let inc = std::env::var("SLURM_INCLUDE_DIR").unwrap_or_else(|_| "/usr/include".into());
    let hdr = format!("{inc}/slurm/slurm_version.h");
    let release = std::fs::read_to_string(&hdr)
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("#define SLURM_VERSION_NUMBER "))?;
            let hex = line.split_whitespace().nth(2)?.trim_start_matches("0x");
            let n = u32::from_str_radix(hex, 16).ok()?;
            Some(format!("{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff))
        })
        .unwrap_or_else(|| "none".into());
    println!("cargo:rustc-env=CELLSCHED_SLURM_RELEASE={release}");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-changed={hdr}");
    println!("cargo:rerun-if-changed=.git/HEAD");
}

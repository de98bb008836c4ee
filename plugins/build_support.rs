// Link arguments shared by every cellsched plugin crate (cdylib).
//
// Use from a plugin crate's own build.rs (cargo applies
// `cargo:rustc-cdylib-link-arg` only to the package whose build script
// prints it, so each plugin crate needs its own build.rs):
//
//     include!("../build_support.rs");          // plugins/<name>/build.rs
//     include!("../plugins/build_support.rs");  // spank/build.rs (top level)
//     fn main() {
//         emit_plugin_link_args(&["plugin_name", "plugin_type", "plugin_version",
//                                 "init", "fini", "site_factor_p_set"]);
//     }
//
// Effects on the `.so`:
// - a linker version script (`global: <exported>; local: *;`) so only the
//   symbols Slurm looks up are dynamic exports (as pyxis does);
// - `-z lazy` and partial RELRO instead of rustc's full RELRO (`-z now`):
//   a plugin naming slurmctld-only functions still loads in slurmd,
//   slurmstepd and client commands, where those functions are never called.

/// Writes `<OUT_DIR>/<pkg>.map` exporting only `exported` and prints the
/// cdylib link arguments (version script, `-z lazy`, `-z relro`).
#[allow(dead_code)]
fn emit_plugin_link_args(exported: &[&str]) {
    emit_link_args_as("rustc-cdylib-link-arg", exported)
}

/// Same for `cdylib` *examples* (cargo ignores `rustc-cdylib-link-arg` and, for
/// cdylib examples, `rustc-link-arg-examples`): uses `rustc-link-arg`, which
/// also reaches the package's test executables (harmless there).
#[allow(dead_code)]
fn emit_example_plugin_link_args(exported: &[&str]) {
    // Test executables of the package lack the plugin symbols: let the linker
    // (rust-lld by default) accept version-script names it does not define.
    println!("cargo:rustc-link-arg=-Wl,--undefined-version");
    emit_link_args_as("rustc-link-arg", exported)
}

/// Writes the version script and prints the link args with `directive`.
#[allow(dead_code)]
fn emit_link_args_as(directive: &str, exported: &[&str]) {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let pkg = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "plugin".into());
    let script = out.join(format!("{pkg}.map"));
    std::fs::write(&script, version_script(exported))
        .unwrap_or_else(|e| panic!("cannot write linker version script {}: {e}", script.display()));
    println!("cargo:{directive}=-Wl,--version-script={}", script.display());
    println!("cargo:{directive}=-Wl,-z,lazy");
    println!("cargo:{directive}=-Wl,-z,relro");
    println!("cargo:rerun-if-changed=build.rs");
    // The including crate sits in plugins/ (beside this file) or at the top
    // level (spank/): name the path that exists, or cargo reruns every build.
    let support = ["../build_support.rs", "../plugins/build_support.rs"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("../build_support.rs");
    println!("cargo:rerun-if-changed={support}");
}

/// Text of a version script exporting exactly `exported`.
#[allow(dead_code)]
fn version_script(exported: &[&str]) -> String {
    assert!(!exported.is_empty(), "emit_plugin_link_args: no symbols to export");
    let mut s = String::from("{\n  global:\n");
    for sym in exported {
        assert!(
            !sym.is_empty() && sym.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "emit_plugin_link_args: bad symbol name {sym:?}"
        );
        s.push_str(&format!("    {sym};\n"));
    }
    s.push_str("  local: *;\n};\n");
    s
}

//! Link arguments for the smoke-test example plugin (the library itself is an rlib).
include!("../build_support.rs");

fn main() {
    emit_example_plugin_link_args(&[
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "init",
        "fini",
        "site_factor_p_set",
        "site_factor_p_update",
        "site_factor_p_reconfig",
    ]);
}

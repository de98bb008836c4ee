include!("../build_support.rs");

fn main() {
    emit_plugin_link_args(&["plugin_name", "plugin_type", "plugin_version", "init", "fini", "job_submit", "job_modify"]);
}

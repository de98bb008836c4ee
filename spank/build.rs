//! Link arguments for the SPANK plugin (version script exporting only the
//! plugin symbols, lazy binding). The release number comes from `slurm-sys`.
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
        "slurm_spank_exit",
        "slurm_spank_job_epilog",
    ]);
}

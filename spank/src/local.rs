//! Local (srun) and allocator (sbatch, salloc) context: complete the options
//! from their environment-variable equivalents, validate everything at
//! submit, and propagate the values to slurmctld in the job control
//! environment (`job_desc->spank_job_env`).
use crate::error::SpankError;
use crate::spank::{self, Spank};
use crate::options::{given, given_keys, with_env};
use cellsched_core::model::{is_model_file, load_model_file_limited, model_to_wire, ModelCatalog, MODEL_SPEC_ENV_KEY};
use std::path::Path;
use cellsched_core::options::DlOptions;

/// Submit-time validation: consistency and the model against the catalog.
/// A model TOML file is read here, as the submitting user (at most
/// [`MAX_MODEL_FILE_BYTES`]), and its validated description is returned in
/// the one-line form slurmctld and the nodes read ([`model_to_wire`]):
/// slurmctld never opens a user's path.
pub fn validate(o: &DlOptions) -> Result<Option<String>, SpankError> {
    o.check_consistency()?;
    let catalog = ModelCatalog::builtin();
    let spec = o.check_model(|m| {
        if is_model_file(m) {
            load_model_file_limited(Path::new(m.trim()))
        } else {
            catalog.resolve(m)
        }
    })?;
    Ok(match (&o.model, spec) {
        (Some(m), Some(spec)) if is_model_file(m) => Some(model_to_wire(&spec)),
        _ => None,
    })
}

/// `slurm_spank_init_post_opt` in the local/allocator context. An error
/// refuses the submission (sbatch/srun/salloc print it and exit).
pub fn post_opt(sp: &Spank) -> Result<(), SpankError> {
    let cmdline = given().clone();
    let env = |k: &str| std::env::var(k).ok();
    let o = with_env(&cmdline, &given_keys(), &env)?;
    if o.is_empty() {
        return Ok(());
    }
    let model_spec = validate(&o)?;
    let pairs = o.to_env_pairs().into_iter().chain(model_spec.map(|s| (MODEL_SPEC_ENV_KEY, s)));
    for (k, v) in pairs {
        sp.job_control_setenv(k, &v).map_err(|msg| SpankError::Spank { call: "spank_job_control_setenv", msg })?;
    }
    spank::log(spank::Level::Verbose, &format!("DL options {o}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellsched_core::options::DlKey;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn command_line_beats_env_and_env_beats_inherited() {
        let mut cmd = DlOptions::default();
        cmd.parse_option("dl-batch", "16").unwrap();
        let e = env(&[
            ("CELLSCHED_DL_BATCH", "32"),
            ("CELLSCHED_DL_MODEL", "bert-large"),
            ("SLURM_SPANK_CELLSCHED_DL_MODEL", "gpt2"),
            ("SLURM_SPANK_CELLSCHED_DL_ITERS", "500"),
        ]);
        let o = with_env(&cmd, &[DlKey::Batch], &|k: &str| e.get(k).cloned()).unwrap();
        assert_eq!((o.batch, o.model.as_deref(), o.iters), (Some(16), Some("bert-large"), Some(500)));
    }

    #[test]
    fn bad_env_value_names_the_variable() {
        let e = env(&[("CELLSCHED_DL_CELL", "x100x0")]);
        let err = with_env(&DlOptions::default(), &[], &|k: &str| e.get(k).cloned()).unwrap_err().to_string();
        assert!(err.contains("CELLSCHED_DL_CELL") && err.contains("x100x0"), "{err}");
    }

    #[test]
    fn unknown_model_is_refused_with_suggestions() {
        let name = ModelCatalog::builtin().names().next().unwrap().to_string();
        let mut o = DlOptions::default();
        o.parse_option("dl-model", &format!("{name}x")).unwrap();
        o.parse_option("dl-batch", "8").unwrap();
        let err = validate(&o).unwrap_err().to_string();
        assert!(err.contains("--dl-model value") && err.contains("did you mean") && err.contains(&name), "{err}");
        o.parse_option("dl-model", &name).unwrap();
        assert_eq!(validate(&o).unwrap(), None, "catalog models need no description");
        assert!(validate(&DlOptions::default()).is_ok());
    }

    #[test]
    fn model_files_are_read_at_submit_and_forwarded_as_a_description() {
        let d = std::env::temp_dir().join(format!("cs-spank-model-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("tiny.toml");
        std::fs::write(&f, "family = \"gpt\"\nlayers = 4\nhidden = 256\nheads = 4\nseq_len = 128\nvocab = 1000\n").unwrap();
        let mut o = DlOptions::default();
        o.parse_option("dl-model", f.to_str().unwrap()).unwrap();
        o.parse_option("dl-batch", "8").unwrap();
        let wire = validate(&o).unwrap().expect("a description for a model file");
        assert_eq!(cellsched_core::model::model_from_wire(&wire).unwrap().layers, 4);
        std::fs::write(&f, "family = \"gpt\"\nlayers = 4\n").unwrap();
        let e = validate(&o).unwrap_err().to_string();
        assert!(e.contains("tiny.toml") && e.contains("hidden"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

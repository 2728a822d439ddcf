//! `hearth-engine check-spec FILE`: the fully resolved spec on stdout, or every error in it.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct CheckSpecArgs {
    /// The spec file to check.
    file: PathBuf,
}

pub fn run(a: CheckSpecArgs) -> anyhow::Result<()> {
    let spec = hearth_spec::load(&a.file)?;
    print!("{}", spec.to_yaml());
    eprintln!(
        "{}: ok (spec hash {})",
        a.file.display(),
        &spec.spec_hash()[..12]
    );
    Ok(())
}

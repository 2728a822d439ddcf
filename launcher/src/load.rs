//! Loading a spec (with its `.env`) for any subcommand; every spec error becomes a `Problem`
//! that says where to fix it.

use std::path::Path;

use hearth_spec::{ResolvedSpec, SpecError};

use crate::problem::{Problem, Problems};

pub fn spec(path: &Path) -> Result<ResolvedSpec, Problems> {
    hearth_spec::load(path).map_err(|e| Problems {
        stage: "spec",
        list: problems(path, &e),
    })
}

fn problems(path: &Path, e: &SpecError) -> Vec<Problem> {
    let file = path.display();
    match e {
        SpecError::Invalid { issues, .. } => issues
            .iter()
            .map(|i| {
                Problem::new(
                    format!("{file}: {i}"),
                    if i.message.contains("${") {
                        format!("set the variable in the environment or in .env, or edit {file}")
                    } else {
                        format!("edit {file} (`hearth-engine check-spec {file}` lists every issue)")
                    },
                )
            })
            .collect(),
        SpecError::Read { .. } => vec![Problem::new(
            format!("{e}: {}", source_text(e)),
            "name an existing spec file, e.g. specs/default.yaml (ls specs/)",
        )],
        SpecError::Yaml { .. } => vec![Problem::new(
            format!("{e}: {}", source_text(e)),
            format!("fix the YAML syntax of {file}"),
        )],
        SpecError::Dotenv { .. } => vec![Problem::new(
            e.to_string(),
            "fix that line of .env (KEY=VALUE, see .env.example)",
        )],
        other => vec![Problem::new(other.to_string(), format!("fix {file}"))],
    }
}

fn source_text(e: &SpecError) -> String {
    std::error::Error::source(e)
        .map(ToString::to_string)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_issue_is_a_problem_with_a_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        std::fs::write(
            &file,
            "name: x\nmodel: /m.gguf\nengine: {kv_cache_dtype: fp9, max_num_seqs: '${NOPE}'}\n",
        )
        .unwrap();
        let p = spec(&file).unwrap_err();
        assert_eq!(p.stage, "spec");
        assert_eq!(p.list.len(), 2, "{p}");
        let text = p.to_string();
        assert!(
            text.contains("engine.kv_cache_dtype") && text.contains("fp9"),
            "{text}"
        );
        assert!(
            text.contains("set the variable in the environment or in .env"),
            "{text}"
        );
        let missing = spec(&dir.path().join("nope.yaml")).unwrap_err().to_string();
        assert!(
            missing.contains("cannot read") && missing.contains("ls specs/"),
            "{missing}"
        );
    }
}

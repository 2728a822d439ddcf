//! Tests of `load` as a whole: interpolation sources, collected errors, secrets, the resolved
//! YAML and its hash, and every spec in the repository's specs/ directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;

pub(crate) fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Loads YAML text as `specs/x.yaml` with exactly `pairs` as the environment and no `.env`.
pub(crate) fn load_yaml(yaml: &str, pairs: &[(&str, &str)]) -> Result<ResolvedSpec, SpecError> {
    let opts = LoadOptions {
        env: Some(env(pairs)),
        dotenv: DotenvFile::Off,
    };
    load_str(yaml, Path::new("specs/x.yaml"), &opts)
}

/// The issues of a spec that must not load, as `key: message` lines.
pub(crate) fn issues(yaml: &str) -> Vec<String> {
    match load_yaml(yaml, &[]) {
        Ok(_) => panic!("expected issues in:\n{yaml}"),
        Err(e) => {
            assert!(matches!(e, SpecError::Invalid { .. }), "{e}");
            e.issues().iter().map(ToString::to_string).collect()
        }
    }
}

pub(crate) const MINIMAL: &str = "name: t\nmodel: /m/x.gguf\n";

#[test]
fn a_minimal_spec_gets_every_default() {
    let s = load_yaml(MINIMAL, &[("HOME", "/home/u")]).unwrap();
    assert_eq!(s.served_model_name, "t");
    assert_eq!(s.model, ModelSource::GgufFile("/m/x.gguf".into()));
    assert_eq!(s.engine.device, Device::Auto);
    assert_eq!(s.engine.tensor_parallel_size, 1);
    assert_eq!(s.engine.max_num_seqs, 256);
    assert_eq!(s.engine.block_size, 16);
    assert!(s.engine.enable_thinking && s.engine.enable_prefix_caching);
    assert_eq!(s.server.port, 8000);
    assert_eq!(s.server.host, "0.0.0.0");
    assert!(s.server.api_key.is_none());
    assert_eq!(s.deploy.gpus, Gpus::All);
    assert_eq!(s.deploy.image, "hearth-engine:cuda12.8");
    assert_eq!(s.deploy.restart.policy, RestartPolicy::OnFailure);
    assert_eq!(s.file, PathBuf::from("specs/x.yaml"));
    assert_eq!(s.cache_dir, PathBuf::from("/home/u/.cache/hearth"));
}

#[test]
fn environment_beats_dotenv_and_defaults_fill_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("s.yaml");
    std::fs::write(
        &spec,
        "name: t\nmodel: ${MODEL_DIR}/m\nserver: {port: '${PORT:-8000}', host: '${HOST:-::}'}\n\
         engine: {max_num_seqs: '${SEQS}'}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "MODEL_DIR=/from-dotenv\nPORT=9000\nSEQS=4\nHEARTH_CACHE=/c\n",
    )
    .unwrap();
    let s = load_with_env(&spec, &env(&[("PORT", "8100")])).unwrap();
    assert_eq!(s.model, ModelSource::LocalDir("/from-dotenv/m".into()));
    assert_eq!(s.server.port, 8100, "the environment wins over .env");
    assert_eq!(s.server.host, "::", "default used");
    assert_eq!(s.engine.max_num_seqs, 4);
    assert_eq!(s.dotenv, Some(dir.path().join(".env")));
    assert_eq!(s.cache_dir, PathBuf::from("/c"), "HEARTH_CACHE from .env");

    // An explicit .env path.
    let other = dir.path().join("other.env");
    std::fs::write(&other, "MODEL_DIR=/other\nSEQS=2\n").unwrap();
    let opts = LoadOptions {
        env: Some(env(&[])),
        dotenv: DotenvFile::Path(other.clone()),
    };
    let s = load_with(&spec, &opts).unwrap();
    assert_eq!(s.model, ModelSource::LocalDir("/other/m".into()));
    assert_eq!(s.dotenv, Some(other));
}

#[test]
fn a_variable_without_value_or_default_names_variable_and_key() {
    let got = issues("name: t\nmodel: /m\nengine:\n  max_num_seqs: ${SEQS}\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("engine.max_num_seqs: ${SEQS} is not set (not in the environment"),
        "{got:?}"
    );
    let e = load_yaml("name: ${NAME}\nmodel: /m\n", &[]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("specs/x.yaml: name: ${NAME} is not set"),
        "{e}"
    );
}

#[test]
fn strings_from_interpolation_coerce_to_their_types() {
    let yaml = "name: t\nmodel: /m\nengine:\n  enable_thinking: ${ENABLE_THINKING:-true}\n  \
                max_model_len: ${LEN:-2048}\n  gpu_memory_utilization: ${U:-0.5}\n\
                server: {port: \"${PORT:-8000}\"}\n";
    let s = load_yaml(yaml, &[("ENABLE_THINKING", "0"), ("PORT", "1234")]).unwrap();
    assert!(!s.engine.enable_thinking);
    assert_eq!(s.engine.max_model_len, Some(2048));
    assert_eq!(s.engine.gpu_memory_utilization, 0.5);
    assert_eq!(s.server.port, 1234);
    let s = load_yaml(yaml, &[]).unwrap();
    assert!(s.engine.enable_thinking);
    let s = load_yaml(yaml, &[("ENABLE_THINKING", "false"), ("LEN", "")]).unwrap();
    assert!(!s.engine.enable_thinking);
    assert_eq!(
        s.engine.max_model_len,
        Some(2048),
        "empty counts as unset for :-"
    );
}

#[test]
fn all_problems_are_reported_at_once_with_file_key_value_and_allowed() {
    let yaml = "name: t\nmodel: /m\nwat: 1\nengine:\n  kv_cache_dtype: fp9\n  dtype: f16\n  \
                max_num_seqs: lots\nserver: {port: 70000}\n";
    let e = load_yaml(yaml, &[]).unwrap_err();
    let text = e.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[0].starts_with(
        "specs/x.yaml: wat: unknown key; allowed keys at the top level: name, model,"
    ));
    assert_eq!(
        lines[1],
        "specs/x.yaml: engine.dtype: \"f16\" is not one of auto, bfloat16, float16, float32, half"
    );
    assert_eq!(
        lines[2],
        "specs/x.yaml: engine.kv_cache_dtype: \"fp9\" is not one of auto, fp8, fp8_e4m3, bfloat16, float16"
    );
    assert_eq!(
        lines[3],
        "specs/x.yaml: engine.max_num_seqs: \"lots\" is not a whole number"
    );
    assert_eq!(
        lines[4],
        "specs/x.yaml: server.port: 70000 is out of range; allowed: 1 to 65535"
    );
}

#[test]
fn yaml_syntax_errors_and_missing_files() {
    let e = load_yaml("name: [\n", &[]).unwrap_err();
    assert!(matches!(e, SpecError::Yaml { .. }));
    assert_eq!(e.to_string(), "specs/x.yaml: not valid YAML");
    let e = load(Path::new("/nonexistent/spec.yaml")).unwrap_err();
    assert!(matches!(e, SpecError::Read { .. }), "{e}");
    assert_eq!(
        issues(""),
        [
            "name: missing; expected the deployment's name (letters, digits, . _ -)".to_string(),
            format!("model: missing; expected {SOURCE_FORMS}")
        ]
    );
}

#[test]
fn secrets_are_masked_in_yaml_and_debug() {
    let s = load_yaml(
        "name: t\nmodel: /m\nserver: {api_key: '${API_KEY}'}\n",
        &[("API_KEY", "sk-very-secret")],
    )
    .unwrap();
    assert_eq!(
        s.server.api_key.as_ref().map(Secret::expose),
        Some("sk-very-secret")
    );
    let yaml = s.to_yaml();
    assert!(yaml.contains("api_key: '***'"), "{yaml}");
    assert!(!yaml.contains("sk-very-secret"));
    assert!(!format!("{s:?}").contains("sk-very-secret"));
    let open = load_yaml(
        "name: t\nmodel: /m\nserver: {api_key: '${API_KEY:-}'}\n",
        &[],
    )
    .unwrap();
    assert!(open.server.api_key.is_none());
    assert!(open.to_yaml().contains("api_key: null"));
}

#[test]
fn resolved_yaml_loads_back_to_the_same_spec_and_hash() {
    let yaml = "name: t\nmodel: pip:a==1#a/m.gguf\nengine: {device: cpu, threads: 4, hf_overrides: {x: [1, {y: z}]}}\n\
                deploy: {env: {A: 1}, shm_size: 1gb, volumes: ['/d:/d:ro']}\n";
    let s = load_yaml(yaml, &[]).unwrap();
    let out = s.to_yaml();
    let back = load_yaml(&out, &[]).unwrap();
    assert_eq!(back.to_yaml(), out);
    assert_eq!(back.spec_hash(), s.spec_hash());
    assert_eq!(s.spec_hash().len(), 64);
    assert!(out.contains("shm_size: 1g\n"), "{out}");
    assert!(out.contains("model: pip:a==1#a/m.gguf\n"), "{out}");
    let changed = load_yaml(&yaml.replace("threads: 4", "threads: 5"), &[]).unwrap();
    assert_ne!(changed.spec_hash(), s.spec_hash());
}

fn repo_specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn load_repo_spec(name: &str, extra: &[(&str, &str)]) -> ResolvedSpec {
    let models = tempfile::tempdir().unwrap();
    let mut vars = vec![("MODEL_DIR", models.path().to_str().unwrap())];
    vars.extend_from_slice(extra);
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../specs")
        .join(name);
    let opts = LoadOptions {
        env: Some(env(&vars)),
        dotenv: DotenvFile::Off,
    };
    load_with(&path, &opts).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_spec_in_the_repository_loads_without_its_model() {
    let files = repo_specs();
    assert!(files.len() >= 6, "{files:?}");
    for f in &files {
        let first = std::fs::read_to_string(f).unwrap();
        assert!(
            first.starts_with('#'),
            "{}: starts with a comment header",
            f.display()
        );
        let name = f.file_name().unwrap().to_str().unwrap();
        let s = load_repo_spec(name, &[]);
        assert!(!s.name.is_empty());
        // The model does not exist: load() must not look for it.
        if let ModelSource::LocalDir(p) = &s.model {
            assert!(!p.exists(), "{}", p.display());
        }
    }
}

#[test]
fn repository_specs_say_what_the_deployments_need() {
    let d = load_repo_spec("default.yaml", &[]);
    assert_eq!(d.served_model_name, "smollm2-135m-instruct");
    assert_eq!(d.engine.device, Device::Cpu);
    assert_eq!(d.engine.max_model_len, Some(2048));
    assert_eq!(d.deploy.gpus, Gpus::Count(0));
    assert!(d.model.is_gguf());
    let d = load_repo_spec(
        "default.yaml",
        &[("MAX_MODEL_LEN", "4096"), ("PORT", "8080")],
    );
    assert_eq!(d.engine.max_model_len, Some(4096));
    assert_eq!(d.server.port, 8080);

    let g = load_repo_spec("glm-5.2-reap-dcp4.yaml", &[]);
    assert_eq!(g.engine.decode_context_parallel_size, 4);
    assert!(g.engine.enable_thinking);
    assert_eq!(
        g.engine.speculative_config,
        Some(SpeculativeConfig {
            method: SpecMethod::Mtp,
            num_speculative_tokens: 3
        })
    );
    assert_eq!(g.deploy.env["NCCL_P2P_DISABLE"], "1");
    let g = load_repo_spec("glm-5.2-reap-dcp4.yaml", &[("ENABLE_THINKING", "0")]);
    assert!(!g.engine.enable_thinking);

    let f = load_repo_spec("glm-4.7-flash-awq-tp2-ep.yaml", &[]);
    assert_eq!(f.engine.dtype, Dtype::Float16);
    assert!(f.engine.enable_expert_parallel);
    let v4 = load_repo_spec("deepseek-v4-flash-tp2.yaml", &[]);
    assert!(v4.engine.kv_cache_dtype.is_fp8());
    assert_eq!(v4.engine.max_model_len, None);
}

//! The READY banner `up` prints last: where the API is, which model, what the deployment is
//! (the identity line), how much KV cache it has, how long startup took, and how to try it.

use std::fmt::Write as _;
use std::time::Duration;

use hearth_spec::ResolvedSpec;

use crate::duration::show;
use crate::phase::Startup;
use crate::smoke::Smoke;

/// Everything the banner shows.
#[derive(Debug)]
pub struct Banner<'a> {
    pub spec: &'a ResolvedSpec,
    pub url: &'a str,
    pub container: &'a str,
    pub image: &'a str,
    pub startup: &'a Startup,
    pub smoke: &'a Smoke,
    /// From `up` starting to READY.
    pub total: Duration,
    /// From the container starting to `/ready` (None when an already-ready one was reused).
    pub engine: Option<Duration>,
}

impl Banner<'_> {
    pub fn render(&self) -> String {
        let spec = self.spec;
        let model = &spec.served_model_name;
        let mut s = String::new();
        let engine = match self.engine {
            Some(d) => format!("engine start to ready {}", show(d)),
            None => "container reused, already ready".into(),
        };
        let _ = writeln!(
            s,
            "\nREADY  {}  in {} ({engine})",
            spec.name,
            show(self.total)
        );
        let _ = writeln!(
            s,
            "  endpoint   {}/v1  (OpenAI; Anthropic /v1/messages at {})",
            self.url, self.url
        );
        let _ = writeln!(s, "  model      {model}");
        let _ = writeln!(s, "  identity   {}", identity(spec, self.startup));
        if let Some(kv) = self.startup.kv_tokens {
            let _ = writeln!(s, "  kv cache   {} tokens", thousands(kv));
        }
        let _ = writeln!(
            s,
            "  smoke      {:?} ({})",
            one_line(&self.smoke.answer, 72),
            show(self.smoke.took)
        );
        if let Some(r) = &self.smoke.reasoning {
            let _ = writeln!(s, "  reasoning  {:?}", one_line(r, 72));
        }
        if let Some(call) = &self.smoke.tool_call {
            let _ = writeln!(s, "  tool call  {}", one_line(call, 72));
        }
        let _ = writeln!(s, "  container  {} ({})", self.container, self.image);
        let auth = if spec.server.api_key.is_some() {
            " -H \"Authorization: Bearer $API_KEY\""
        } else {
            ""
        };
        let _ = writeln!(s, "  try it     ./chat \"Hello!\"");
        let _ = writeln!(
            s,
            "             curl -s {}/v1/chat/completions{auth} -H 'Content-Type: application/json' \
             -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello!\"}}]}}'",
            self.url
        );
        let _ = writeln!(
            s,
            "  manage     target/release/hearth status | logs -f | down {}",
            spec.file.display()
        );
        s
    }
}

/// `llama, 30 layers, GGUF v3 (Q4_1), cpu | tp 1, dcp 1, ep off | kv auto | mtp off`.
pub fn identity(spec: &ResolvedSpec, startup: &Startup) -> String {
    let e = &spec.engine;
    let mut model = Vec::new();
    if let Some(a) = &startup.architecture {
        model.push(a.clone());
    }
    if let Some(l) = &startup.layers {
        model.push(format!("{l} layers"));
    }
    match (&e.quantization, &startup.format) {
        (Some(q), _) => model.push(q.as_str().to_owned()),
        (None, Some(f)) => model.push(f.clone()),
        (None, None) => model.push(e.dtype.as_str().to_owned()),
    }
    model.push(
        startup
            .backend
            .clone()
            .unwrap_or_else(|| e.device.as_str().to_owned()),
    );
    let ep = if e.enable_expert_parallel {
        "on"
    } else {
        "off"
    };
    let mtp = match &e.speculative_config {
        Some(c) => format!("{} x{}", c.method.as_str(), c.num_speculative_tokens),
        None => "off".into(),
    };
    format!(
        "{} | tp {}, dcp {}, ep {ep} | kv {} | spec decode {mtp}",
        model.join(", "),
        e.tensor_parallel_size,
        e.decode_context_parallel_size,
        e.kv_cache_dtype.as_str(),
    )
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_names_model_parallelism_kv_and_spec_decode() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        std::fs::write(
            &file,
            "name: g\nmodel: /m/x\nengine: {device: cuda, tensor_parallel_size: 4, \
             quantization: modelopt_fp4, kv_cache_dtype: fp8, \
             speculative_config: {method: mtp, num_speculative_tokens: 1}}\n",
        )
        .unwrap();
        let opts = hearth_spec::LoadOptions {
            env: Some(Default::default()),
            dotenv: hearth_spec::DotenvFile::Off,
        };
        let spec = hearth_spec::load_with(&file, &opts).unwrap();
        let startup = Startup {
            architecture: Some("glm4_moe".into()),
            layers: Some("92".into()),
            ..Default::default()
        };
        assert_eq!(
            identity(&spec, &startup),
            "glm4_moe, 92 layers, modelopt_fp4, cuda | tp 4, dcp 1, ep off | kv fp8 | spec \
             decode mtp x1"
        );
    }

    #[test]
    fn numbers_and_lines() {
        assert_eq!(thousands(16384), "16,384");
        assert_eq!(thousands(999), "999");
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc...");
    }
}

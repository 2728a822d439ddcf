//! `ChatTemplate`: a Hugging Face chat template rendered the way transformers' `apply_chat_template`
//! renders it, on minijinja.
//!
//! transformers compiles templates in a jinja2 `ImmutableSandboxedEnvironment(trim_blocks=True,
//! lstrip_blocks=True, extensions=[loopcontrols])` with three additions: a `tojson` filter that is
//! plain `json.dumps` (no HTML escaping), `raise_exception(msg)` and `strftime_now(fmt)`. It renders
//! with `messages`, `tools`, `documents`, `add_generation_prompt`, the tokenizer's special tokens
//! and any extra kwargs (`enable_thinking`, ...). The same is set up here, plus Python's methods on
//! strings and dicts (minijinja-contrib's pycompat) and Python's `str()` for printed values (`None`,
//! `True`, dicts). Turning a chat request into `messages` is the server's job.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value};

use crate::error::TextError;
use crate::pyfmt::{json_dumps, py_str, JsonOptions};
use crate::strftime::{strftime, Tm};

/// What one render needs, in the OpenAI shapes the server already has.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// `{"role", "content" (string or list of parts), "tool_calls", "reasoning_content", ...}`.
    pub messages: &'a [serde_json::Value],
    /// OpenAI tool definitions; `None` renders as Python's `tools=None`.
    pub tools: Option<&'a [serde_json::Value]>,
    pub add_generation_prompt: bool,
    /// Extra template variables (`chat_template_kwargs`, e.g. `enable_thinking`).
    pub kwargs: &'a serde_json::Map<String, serde_json::Value>,
}

/// A compiled chat template. Rendering takes `&self`; share it behind an `Arc`.
pub struct ChatTemplate {
    env: Environment<'static>,
    name: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The error `raise_exception` carries through minijinja, found again after rendering.
#[derive(Debug)]
struct RaisedException(String);

impl std::fmt::Display for RaisedException {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedException {}

impl ChatTemplate {
    /// Compile `source`; `bos`/`eos` become the `bos_token`/`eos_token` variables.
    pub fn new(source: &str, bos: Option<String>, eos: Option<String>) -> Result<Self, TextError> {
        Self::with_name("chat_template", source, bos, eos)
    }

    /// Like `new`, with the name errors should cite (a file name, a model id).
    pub fn with_name(
        name: &str,
        source: &str,
        bos: Option<String>,
        eos: Option<String>,
    ) -> Result<Self, TextError> {
        let mut env = hf_environment();
        env.add_template_owned(name.to_owned(), source.to_owned())
            .map_err(|e| template_error(name, e))?;
        Ok(ChatTemplate {
            env,
            name: name.to_owned(),
            bos_token: bos,
            eos_token: eos,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Render one conversation to the prompt text.
    pub fn render(&self, req: &ChatRequest<'_>) -> Result<String, TextError> {
        let tmpl = self
            .env
            .get_template(&self.name)
            .map_err(|e| template_error(&self.name, e))?;
        // transformers: render(messages=, tools=, documents=, add_generation_prompt=,
        //                      **special_tokens_map, **kwargs)
        let mut ctx = serde_json::Map::new();
        if let Some(bos) = &self.bos_token {
            ctx.insert("bos_token".into(), bos.clone().into());
        }
        if let Some(eos) = &self.eos_token {
            ctx.insert("eos_token".into(), eos.clone().into());
        }
        for (k, v) in req.kwargs {
            ctx.insert(k.clone(), v.clone());
        }
        ctx.insert("messages".into(), req.messages.to_vec().into());
        ctx.insert(
            "tools".into(),
            req.tools
                .map_or(serde_json::Value::Null, |t| t.to_vec().into()),
        );
        ctx.insert("documents".into(), serde_json::Value::Null);
        ctx.insert(
            "add_generation_prompt".into(),
            req.add_generation_prompt.into(),
        );
        tmpl.render(Value::from_serialize(&ctx))
            .map_err(|e| template_error(&self.name, e))
    }
}

/// A minijinja environment configured like transformers' jinja2 environment.
fn hf_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_debug(false);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_formatter(|out, _state, value| {
        std::fmt::Write::write_str(out, &py_str(value))
            .map_err(|_| Error::from(ErrorKind::WriteFailure))
    });
    // jinja2: None is not iterable (minijinja iterates it as empty); strings and dicts are
    // sequences (they have len and getitem).
    env.add_test("iterable", |v: Value| {
        v.kind() != ValueKind::None && v.try_iter().is_ok()
    });
    env.add_test("sequence", |v: Value| {
        matches!(
            v.kind(),
            ValueKind::String | ValueKind::Bytes | ValueKind::Seq | ValueKind::Map
        )
    });
    env.add_filter("tojson", tojson);
    env.add_filter("string", |v: Value| py_str(&v));
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", |fmt: String| strftime(&fmt, &Tm::now()));
    env
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg.clone()).with_source(RaisedException(msg)))
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(
    value: Value,
    ensure_ascii: Option<Value>,
    indent: Option<Value>,
    separators: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let pick = |pos: Option<Value>, key: &str| -> Result<Option<Value>, Error> {
        Ok(match kwargs.get::<Option<Value>>(key)? {
            Some(v) => Some(v),
            None => pos,
        })
    };
    let ensure_ascii = pick(ensure_ascii, "ensure_ascii")?.is_some_and(|v| v.is_true());
    let indent = match pick(indent, "indent")? {
        Some(v) if v.kind() == ValueKind::Number => {
            let n = v.as_i64().unwrap_or(0).max(0) as usize;
            Some(" ".repeat(n))
        }
        Some(v) if v.kind() == ValueKind::String => Some(v.as_str().unwrap_or_default().to_owned()),
        _ => None,
    };
    let separators = match pick(separators, "separators")? {
        Some(v) if matches!(v.kind(), ValueKind::Seq) => {
            let parts: Vec<String> = v
                .try_iter()?
                .map(|p| p.as_str().unwrap_or_default().to_owned())
                .collect();
            match parts.as_slice() {
                [item, key] => Some((item.clone(), key.clone())),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: separators must be a (item_separator, key_separator) pair",
                    ))
                }
            }
        }
        _ => None,
    };
    let sort_keys = kwargs
        .get::<Option<Value>>("sort_keys")?
        .is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    let opts = JsonOptions {
        ensure_ascii,
        indent,
        separators,
        sort_keys,
    };
    // A plain string: the template concatenates it like any other text.
    json_dumps(&value, &opts).map(Value::from)
}

fn template_error(name: &str, err: Error) -> TextError {
    let line = err.line();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = source {
        if let Some(raised) = e.downcast_ref::<RaisedException>() {
            return TextError::TemplateRaised {
                name: name.to_owned(),
                line,
                message: raised.0.clone(),
            };
        }
        source = e.source();
    }
    let message = match err.detail() {
        Some(detail) => format!("{}: {detail}", err.kind()),
        None => err.kind().to_string(),
    };
    TextError::Template {
        name: name.to_owned(),
        line,
        message,
        source: err,
    }
}

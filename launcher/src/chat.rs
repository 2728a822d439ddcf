//! `hearth chat` (what `./chat` runs): talk to a running deployment through
//! `/v1/chat/completions` with streaming (SSE), printing the answer as it arrives. With a
//! prompt it answers once and exits; without one it is a small REPL that keeps the history.
//! Reasoning, when the model thinks, is shown dimmed before the answer.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use futures_util::StreamExt;
use hearth_protocol::openai::{ChatCompletionChunk, ChatCompletionRequest, ChatMessage};

use crate::container::{self, summary_label};
use crate::plan::Endpoint;
use crate::{labels, load, repo};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The prompt; without one, an interactive chat (Ctrl-D or "exit" ends it).
    pub prompt: Vec<String>,
    /// The spec of the deployment to talk to (default: the one Hearth deployment running).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// Talk to this server instead (http://HOST:PORT); the key comes from $API_KEY.
    #[arg(long)]
    pub url: Option<String>,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    #[arg(long)]
    pub temperature: Option<f32>,
}

/// Where to send requests, as what model, with which key.
#[derive(Debug)]
struct Target {
    url: String,
    model: Option<String>,
    key: Option<String>,
}

pub async fn run(repo: Option<PathBuf>, a: ChatArgs) -> anyhow::Result<ExitCode> {
    let target = target(repo, &a).await?;
    let http = reqwest::Client::new();
    let model = match &target.model {
        Some(m) => m.clone(),
        None => first_model(&http, &target).await?,
    };
    let mut history: Vec<ChatMessage> = a.system.iter().map(ChatMessage::system).collect();
    if !a.prompt.is_empty() {
        history.push(ChatMessage::user(a.prompt.join(" ")));
        ask(&http, &target, &model, &a, &history).await?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "chatting with {model} at {} (Ctrl-D or \"exit\" ends)",
        target.url
    );
    loop {
        eprint!("> ");
        let Some(line) = read_line().await? else {
            eprintln!();
            break;
        };
        let line = line.trim();
        if line == "exit" || line == "quit" {
            break;
        }
        if line.is_empty() {
            continue;
        }
        history.push(ChatMessage::user(line));
        match ask(&http, &target, &model, &a, &history).await {
            Ok(answer) => history.push(ChatMessage::assistant(answer)),
            Err(e) => {
                eprintln!("error: {e:#}");
                history.pop();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn read_line() -> anyhow::Result<Option<String>> {
    tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        match std::io::stdin().read_line(&mut s) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(s)),
            Err(e) => Err(e.into()),
        }
    })
    .await?
}

async fn target(repo: Option<PathBuf>, a: &ChatArgs) -> anyhow::Result<Target> {
    let env_key = std::env::var("API_KEY").ok().filter(|k| !k.is_empty());
    if let Some(url) = &a.url {
        return Ok(Target {
            url: url.trim_end_matches('/').to_owned(),
            model: None,
            key: env_key,
        });
    }
    let spec_file = match &a.spec {
        Some(s) => s.clone(),
        None => {
            let docker = crate::docker::connect()
                .await
                .map_err(|p| crate::problem::Problems::one("chat", p))?;
            let name = crate::logs::only_deployment(&docker, "./chat --spec").await?;
            let found = container::list(&docker, None).await?;
            let c = found
                .iter()
                .find(|c| container::summary_name(c) == name)
                .context("the deployment went away")?;
            match summary_label(c, labels::SPEC_FILE) {
                Some(f) => PathBuf::from(f),
                None => bail!("{name} has no {} label; pass --spec", labels::SPEC_FILE),
            }
        }
    };
    let repo = repo::find(repo.as_deref())?;
    let spec = load::spec(&repo::spec_path(&repo, Some(&spec_file)))?;
    let endpoint = Endpoint {
        bind_ip: spec.server.host.clone(),
        port: spec.server.port,
    };
    Ok(Target {
        url: endpoint.url(),
        model: Some(spec.served_model_name.clone()),
        key: spec
            .server
            .api_key
            .map(|k| k.expose().to_owned())
            .or(env_key),
    })
}

async fn first_model(http: &reqwest::Client, t: &Target) -> anyhow::Result<String> {
    let mut req = http.get(format!("{}/v1/models", t.url));
    if let Some(k) = &t.key {
        req = req.bearer_auth(k);
    }
    let list: serde_json::Value = req
        .send()
        .await
        .with_context(|| format!("asking {} for its models", t.url))?
        .json()
        .await?;
    list["data"][0]["id"]
        .as_str()
        .map(str::to_owned)
        .context("the server lists no models")
}

/// Sends the conversation, prints the streamed answer, returns its content.
async fn ask(
    http: &reqwest::Client,
    t: &Target,
    model: &str,
    a: &ChatArgs,
    history: &[ChatMessage],
) -> anyhow::Result<String> {
    let mut req = ChatCompletionRequest {
        model: model.to_owned(),
        messages: history.to_vec(),
        max_tokens: Some(a.max_tokens),
        stream: Some(true),
        ..Default::default()
    };
    req.sampling.temperature = a.temperature;
    let mut post = http
        .post(format!("{}/v1/chat/completions", t.url))
        .json(&req);
    if let Some(k) = &t.key {
        post = post.bearer_auth(k);
    }
    let resp = post
        .send()
        .await
        .with_context(|| format!("sending to {}", t.url))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        bail!("{status}: {body}");
    }
    let mut printer = Printer::new();
    let mut events = SseLines::default();
    let mut body = resp.bytes_stream();
    while let Some(bytes) = body.next().await {
        for data in events.push(&bytes.context("reading the stream")?) {
            if data == "[DONE]" {
                printer.end();
                return Ok(printer.answer);
            }
            let chunk: ChatCompletionChunk =
                serde_json::from_str(&data).with_context(|| format!("not a chat chunk: {data}"))?;
            for choice in &chunk.choices {
                let d = &choice.delta;
                if let Some(r) = d.reasoning_content.as_deref().or(d.reasoning.as_deref()) {
                    printer.reasoning(r);
                }
                if let Some(c) = &d.content {
                    printer.content(c);
                }
            }
        }
    }
    printer.end();
    Ok(printer.answer)
}

/// Splits an SSE byte stream into the payloads of its `data:` lines. Bytes are kept until a
/// line is complete, so a character split across network chunks stays whole.
#[derive(Debug, Default)]
struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end().strip_prefix("data:") {
                out.push(data.trim_start().to_owned());
            }
        }
        out
    }
}

/// Prints reasoning dimmed (on a terminal) and the answer plainly, as they stream.
struct Printer {
    tty: bool,
    in_reasoning: bool,
    answer: String,
}

impl Printer {
    fn new() -> Self {
        Self {
            tty: std::io::stdout().is_terminal(),
            in_reasoning: false,
            answer: String::new(),
        }
    }

    fn reasoning(&mut self, text: &str) {
        let mut out = std::io::stdout();
        if !self.in_reasoning {
            self.in_reasoning = true;
            let _ = write!(out, "{}", if self.tty { "\x1b[2m" } else { "[thinking] " });
        }
        let _ = write!(out, "{text}");
        let _ = out.flush();
    }

    fn content(&mut self, text: &str) {
        let mut out = std::io::stdout();
        if self.in_reasoning {
            self.in_reasoning = false;
            let _ = write!(out, "{}", if self.tty { "\x1b[0m\n" } else { "\n" });
        }
        self.answer.push_str(text);
        let _ = write!(out, "{text}");
        let _ = out.flush();
    }

    fn end(&mut self) {
        if self.in_reasoning && self.tty {
            print!("\x1b[0m");
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_payloads_survive_any_split() {
        let stream = "data: {\"a\":\"é\"}\n\ndata: {\"b\":2}\n\n: comment\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut s = SseLines::default();
            let mut got = s.push(&stream.as_bytes()[..cut]);
            got.extend(s.push(&stream.as_bytes()[cut..]));
            assert_eq!(
                got,
                ["{\"a\":\"é\"}", "{\"b\":2}", "[DONE]"],
                "cut at {cut}"
            );
        }
    }
}

//! `hearth chat` (what `./chat` runs): talk to a running deployment, or any OpenAI-compatible
//! server, through `/v1/chat/completions` with streaming, printing the answer as it arrives.
//! With a prompt it answers once and exits; without one it is a small REPL that keeps the
//! history. Reasoning is shown dimmed above the answer (plain when stdout is not a terminal
//! or NO_COLOR is set), tool calls are printed as calls, and a closing line on stderr gives
//! usage and speed. `--json` prints the whole outcome as one JSON object instead.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use hearth_protocol::openai::{
    ChatCompletionRequest, ChatMessage, FinishReason, FunctionName, NamedToolChoice, Role, Tool,
    ToolCall, ToolChoice, ToolChoiceMode, ToolType,
};
use serde_json::json;

use crate::client::stream::{self, Outcome, Piece};
use crate::client::{server, target, ServerArgs};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The prompt; without one, an interactive chat (Ctrl-D or "exit" ends it).
    pub prompt: Vec<String>,
    #[command(flatten)]
    pub server: ServerArgs,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Ask the model not to think (chat_template_kwargs {"enable_thinking": false}).
    #[arg(long)]
    pub no_think: bool,
    /// Cap the answer's length (default: the server's, i.e. up to the context length).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Offer these tools: a JSON file holding an array of OpenAI tool definitions.
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// With --tools: auto (default), none, required, or the name of the one tool to call.
    #[arg(long, requires = "tools")]
    pub tool_choice: Option<String>,
    /// Print one JSON object (content, reasoning, tool calls, finish reason, usage, timing)
    /// per answer instead of streaming text.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(repo: Option<PathBuf>, a: ChatArgs) -> anyhow::Result<ExitCode> {
    let target = target::resolve(repo, &a.server).await?;
    let http = reqwest::Client::new();
    let model = match &target.model {
        Some(m) => m.clone(),
        None => server::model(&http, &target).await?.id,
    };
    let tools = match &a.tools {
        Some(f) => Some(read_tools(f)?),
        None => None,
    };
    let session = Session {
        http,
        target,
        model,
        tools,
        a,
    };
    let mut history: Vec<ChatMessage> = session.a.system.iter().map(ChatMessage::system).collect();
    if !session.a.prompt.is_empty() {
        history.push(ChatMessage::user(session.a.prompt.join(" ")));
        session.ask(&history).await?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "chatting with {} at {} (Ctrl-D or \"exit\" ends)",
        session.model, session.target.url
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
        match session.ask(&history).await {
            Ok(out) => history.push(assistant_turn(&out)),
            Err(e) => {
                eprintln!("error: {e:#}");
                history.pop();
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What one chat needs for every turn.
struct Session {
    http: reqwest::Client,
    target: crate::client::Target,
    model: String,
    tools: Option<Vec<Tool>>,
    a: ChatArgs,
}

impl Session {
    /// Sends the conversation, prints the answer as it streams (or as JSON at the end).
    async fn ask(&self, history: &[ChatMessage]) -> anyhow::Result<Outcome> {
        let mut req = ChatCompletionRequest {
            model: self.model.clone(),
            messages: history.to_vec(),
            max_tokens: self.a.max_tokens,
            tools: self.tools.clone(),
            tool_choice: self.a.tool_choice.as_deref().map(tool_choice),
            ..Default::default()
        };
        req.sampling.temperature = self.a.temperature;
        if self.a.no_think {
            let mut kw = serde_json::Map::new();
            kw.insert("enable_thinking".into(), false.into());
            req.chat_template_kwargs = Some(kw);
        }
        let mut printer = Printer::new(!self.a.json);
        let out = stream::chat(&self.http, &self.target, &req, |p| printer.piece(p)).await?;
        printer.end(&out);
        if self.a.json {
            println!("{}", serde_json::to_string_pretty(&outcome_json(&out))?);
        } else {
            eprintln!(
                "{}",
                stats_line(&out, color(std::io::stderr().is_terminal()))
            );
        }
        if let Some(why) = empty_answer(&out) {
            bail!("{why}");
        }
        Ok(out)
    }
}

fn read_tools(file: &std::path::Path) -> anyhow::Result<Vec<Tool>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading --tools {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "--tools {}: expected a JSON array of {{\"type\": \"function\", \"function\": \
             {{\"name\", \"description\", \"parameters\"}}}}",
            file.display()
        )
    })
}

/// `auto` / `none` / `required`, else a function name.
fn tool_choice(s: &str) -> ToolChoice {
    match s {
        "auto" => ToolChoice::Mode(ToolChoiceMode::Auto),
        "none" => ToolChoice::Mode(ToolChoiceMode::None),
        "required" => ToolChoice::Mode(ToolChoiceMode::Required),
        name => ToolChoice::Named(NamedToolChoice {
            kind: ToolType::Function,
            function: FunctionName { name: name.into() },
        }),
    }
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

/// The assistant's turn as it goes back into the history.
fn assistant_turn(out: &Outcome) -> ChatMessage {
    let mut m = ChatMessage::assistant(out.content.clone());
    if !out.tool_calls.is_empty() {
        m.tool_calls = Some(out.tool_calls.clone());
    }
    m.role = Role::Assistant;
    m
}

/// Why an answer counts as a failure: nothing came back at all.
fn empty_answer(out: &Outcome) -> Option<String> {
    if !out.content.trim().is_empty() || !out.tool_calls.is_empty() {
        return None;
    }
    let n = out.completion_tokens();
    Some(match out.finish_reason {
        Some(FinishReason::Length) if !out.reasoning.is_empty() => format!(
            "empty answer: finish_reason length after {n} tokens, all of them thinking. Raise \
             --max-tokens, or pass --no-think"
        ),
        Some(FinishReason::Length) => format!(
            "empty answer: finish_reason length after {n} tokens. Raise --max-tokens (or the \
             server's max_model_len)"
        ),
        Some(r) => format!("empty answer (finish_reason {})", finish_name(r)),
        None => "empty answer: the stream ended without a finish reason".into(),
    })
}

/// Whether to use ANSI styles on a stream: a terminal, and NO_COLOR unset or empty.
fn color(tty: bool) -> bool {
    tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Prints reasoning (dimmed, or under a "thinking:" label without color) above the answer.
struct Printer<W: Write> {
    out: W,
    on: bool,
    color: bool,
    in_reasoning: bool,
    wrote: bool,
}

impl Printer<std::io::Stdout> {
    fn new(on: bool) -> Self {
        Self::to(
            std::io::stdout(),
            on,
            color(std::io::stdout().is_terminal()),
        )
    }
}

impl<W: Write> Printer<W> {
    fn to(out: W, on: bool, color: bool) -> Self {
        Self {
            out,
            on,
            color,
            in_reasoning: false,
            wrote: false,
        }
    }

    fn piece(&mut self, p: Piece<'_>) {
        if !self.on {
            return;
        }
        match p {
            Piece::Reasoning(r) => {
                if !self.in_reasoning {
                    self.in_reasoning = true;
                    let _ = write!(self.out, "{}", if self.color { DIM } else { "thinking: " });
                }
                let _ = write!(self.out, "{r}");
            }
            Piece::Content(c) => {
                self.close_reasoning();
                let _ = write!(self.out, "{c}");
            }
        }
        self.wrote = true;
        let _ = self.out.flush();
    }

    fn close_reasoning(&mut self) {
        if self.in_reasoning {
            self.in_reasoning = false;
            let _ = write!(self.out, "{}\n\n", if self.color { RESET } else { "" });
        }
    }

    fn end(&mut self, o: &Outcome) {
        if !self.on {
            return;
        }
        self.close_reasoning();
        if self.wrote && !o.content.ends_with('\n') {
            let _ = writeln!(self.out);
        }
        for call in &o.tool_calls {
            let _ = writeln!(self.out, "{}", tool_call_line(call));
        }
        let _ = self.out.flush();
    }
}

/// `tool call get_weather({"city": "Paris"})  [id call_1]`.
fn tool_call_line(c: &ToolCall) -> String {
    let args = match serde_json::from_str::<serde_json::Value>(&c.function.arguments) {
        Ok(v) => v.to_string(),
        Err(_) => format!("{} (not valid JSON)", c.function.arguments),
    };
    let id = if c.id.is_empty() {
        String::new()
    } else {
        format!("  [id {}]", c.id)
    };
    format!("tool call {}({args}){id}", c.function.name)
}

fn finish_name(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
    }
}

/// `[prompt 37 tokens | 8 tokens in 0.31 s, TTFT 0.16 s, 134 tok/s | finish stop]`.
fn stats_line(o: &Outcome, color: bool) -> String {
    let mut parts = Vec::new();
    if let Some(p) = o.prompt_tokens() {
        parts.push(format!("prompt {p} tokens"));
    }
    let mut gen = format!("{} tokens in {:.2} s", o.completion_tokens(), o.timing.e2e);
    if let Some(t) = o.timing.ttft() {
        gen.push_str(&format!(", TTFT {t:.2} s"));
    }
    if let Some(r) = o.decode_tok_s() {
        gen.push_str(&format!(", {r:.0} tok/s"));
    }
    parts.push(gen);
    if let Some(r) = o.finish_reason {
        parts.push(format!("finish {}", finish_name(r)));
    }
    let line = format!("[{}]", parts.join(" | "));
    if color {
        format!("{DIM}{line}{RESET}")
    } else {
        line
    }
}

fn outcome_json(o: &Outcome) -> serde_json::Value {
    json!({
        "content": o.content,
        "reasoning": (!o.reasoning.is_empty()).then_some(&o.reasoning),
        "tool_calls": o.tool_calls,
        "finish_reason": o.finish_reason,
        "usage": o.usage,
        "ttft_s": o.timing.ttft(),
        "e2e_s": o.timing.e2e,
        "decode_tok_s": o.decode_tok_s(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::timing::Timing;
    use hearth_protocol::openai::{FunctionCall, Usage};

    fn outcome(content: &str, reasoning: &str, finish: FinishReason) -> Outcome {
        Outcome {
            content: content.into(),
            reasoning: reasoning.into(),
            finish_reason: Some(finish),
            usage: Some(Usage::new(10, 16)),
            timing: Timing {
                token_times: vec![0.1, 0.2],
                e2e: 0.5,
            },
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_answer_cut_by_length_explains_thinking() {
        let why = empty_answer(&outcome("", "hmm", FinishReason::Length)).unwrap();
        assert!(
            why.contains("finish_reason length after 16 tokens"),
            "{why}"
        );
        assert!(why.contains("--no-think"), "{why}");
        let why = empty_answer(&outcome(" ", "", FinishReason::Length)).unwrap();
        assert!(why.contains("--max-tokens"), "{why}");
        assert!(empty_answer(&outcome("Paris", "", FinishReason::Length)).is_none());
    }

    #[test]
    fn reasoning_is_dimmed_above_the_answer_or_labelled_without_color() {
        for (color, want) in [
            (true, "\x1b[2mhmm, easy\x1b[0m\n\nParis\n"),
            (false, "thinking: hmm, easy\n\nParis\n"),
        ] {
            let mut p = Printer::to(Vec::new(), true, color);
            p.piece(Piece::Reasoning("hmm, "));
            p.piece(Piece::Reasoning("easy"));
            p.piece(Piece::Content("Paris"));
            p.end(&outcome("Paris", "hmm, easy", FinishReason::Stop));
            assert_eq!(String::from_utf8(p.out).unwrap(), want);
        }
    }

    #[test]
    fn tool_calls_and_stats_read_well() {
        let call = ToolCall {
            id: "call_1".into(),
            kind: ToolType::Function,
            function: FunctionCall {
                name: "get_weather".into(),
                arguments: "{\"city\": \"Paris\"}".into(),
            },
        };
        assert_eq!(
            tool_call_line(&call),
            "tool call get_weather({\"city\":\"Paris\"})  [id call_1]"
        );
        let line = stats_line(&outcome("x", "", FinishReason::Stop), false);
        assert_eq!(
            line,
            "[prompt 10 tokens | 16 tokens in 0.50 s, TTFT 0.10 s, 38 tok/s | finish stop]"
        );
        assert!(stats_line(&outcome("x", "", FinishReason::Stop), true).starts_with(DIM));
    }
}

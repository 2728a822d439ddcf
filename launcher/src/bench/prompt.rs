//! Synthetic prompts of an exact length in tokens: seeded random words, tokenized by the
//! server's `/tokenize` and cut to the length, sent as token ids. Every prompt differs from
//! its first token, so prefix caching cannot flatter the numbers unless asked to (the
//! prefix-cache mode prepends a shared prefix on purpose). A server without `/tokenize` gets
//! text of about the right length, and the report says the lengths are approximate.

use anyhow::Context;
use hearth_protocol::openai::Prompt;

use crate::client::rng::Rng;
use crate::client::{server, Target};

/// Common short English words; most are one token in the vocabularies of current models.
const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "which",
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "river",
    "green",
    "small",
    "large",
    "early",
    "young",
    "important",
    "public",
    "bad",
    "same",
    "able",
    "red",
    "blue",
    "old",
    "new",
    "good",
    "high",
    "long",
    "great",
    "little",
    "own",
    "other",
];

/// `n` random words.
pub fn words(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n * 6);
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len())]);
    }
    s
}

/// Makes prompts for one server.
#[derive(Debug, Clone)]
pub struct PromptMaker {
    http: reqwest::Client,
    target: Target,
    model: String,
    /// Whether the server tokenizes for us (exact lengths).
    pub exact: bool,
}

impl PromptMaker {
    /// Probes `/tokenize` once.
    pub async fn new(http: reqwest::Client, target: Target, model: String) -> anyhow::Result<Self> {
        let exact = server::tokenize(&http, &target, &model, "hello world")
            .await?
            .is_some();
        Ok(Self {
            http,
            target,
            model,
            exact,
        })
    }

    /// Exactly `n` tokens (or about `n` without `/tokenize`), different for every `seed`.
    pub async fn make(&self, seed: u64, n: u32) -> anyhow::Result<Prompt> {
        let ids = self.ids(seed, n).await?;
        Ok(match ids {
            Some(ids) => Prompt::Tokens(ids),
            None => Prompt::Text(words(&mut Rng::new(seed), n as usize)),
        })
    }

    /// Token ids of exactly `n` tokens; `None` without `/tokenize`.
    pub async fn ids(&self, seed: u64, n: u32) -> anyhow::Result<Option<Vec<u32>>> {
        if !self.exact {
            return Ok(None);
        }
        let want = n as usize;
        let mut rng = Rng::new(seed);
        let mut text = words(&mut rng, want);
        for _ in 0..8 {
            let ids = server::tokenize(&self.http, &self.target, &self.model, &text)
                .await?
                .context("/tokenize stopped answering")?;
            if ids.len() >= want {
                return Ok(Some(ids[..want].to_vec()));
            }
            text.push(' ');
            text.push_str(&words(&mut rng, want - ids.len() + 8));
        }
        anyhow::bail!("could not make a prompt of {n} tokens from random words")
    }
}

/// Joins two prompts (a shared prefix and a request's own part) of the same kind.
pub fn join(prefix: &Prompt, rest: &Prompt) -> Prompt {
    match (prefix, rest) {
        (Prompt::Tokens(a), Prompt::Tokens(b)) => Prompt::Tokens([a.as_slice(), b].concat()),
        (Prompt::Text(a), Prompt::Text(b)) => Prompt::Text(format!("{a} {b}")),
        (_, other) => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_seeded_and_differ_between_seeds() {
        let a = words(&mut Rng::new(1), 50);
        assert_eq!(a, words(&mut Rng::new(1), 50));
        assert_ne!(a, words(&mut Rng::new(2), 50));
        assert_eq!(a.split(' ').count(), 50);
        // Different seeds differ early, so prompts share no cacheable prefix block.
        let firsts: std::collections::HashSet<String> =
            (0..64).map(|s| words(&mut Rng::new(s), 4)).collect();
        assert_eq!(firsts.len(), 64);
    }

    #[test]
    fn join_concatenates_ids() {
        let p = join(&Prompt::Tokens(vec![1, 2]), &Prompt::Tokens(vec![3]));
        assert_eq!(p, Prompt::Tokens(vec![1, 2, 3]));
    }
}

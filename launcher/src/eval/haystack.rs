//! Long inputs of a chosen length in tokens: filler prose from seeded templates, with
//! facts ("needles") placed at chosen depths. Lengths are fitted with the server's
//! `/tokenize` over the whole chat (template included) when it has one, else estimated at
//! four characters per token.

use hearth_protocol::openai::ChatMessage;

use crate::client::rng::Rng;
use crate::client::{server, Target};

const NAMES: &[&str] = &[
    "Ada", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
    "Kaito", "Lena", "Marek", "Nadia", "Oscar", "Priya",
];
const PLACES: &[&str] = &[
    "market", "library", "harbour", "bakery", "museum", "station", "garden", "workshop",
];
const TOWNS: &[&str] = &[
    "Eldmoor",
    "Brackwater",
    "Fennick",
    "Thistlebury",
    "Marrowgate",
    "Oakhollow",
    "Quillby",
];
const THINGS: &[&str] = &[
    "apples",
    "candles",
    "notebooks",
    "lanterns",
    "ropes",
    "jars of honey",
    "maps",
    "kettles",
];
const TOPICS: &[&str] = &[
    "road repairs",
    "the autumn fair",
    "river levels",
    "school meals",
    "the old bridge",
    "tram timetables",
    "street lighting",
];
const WEATHER: &[&str] = &["mild", "windy", "grey", "bright", "damp", "cold"];
const DAYS: &[&str] = &[
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// One filler sentence.
pub fn sentence(rng: &mut Rng) -> String {
    let pick = |rng: &mut Rng, l: &[&'static str]| l[rng.below(l.len())];
    match rng.below(4) {
        0 => format!(
            "{} walked to the {} on {} and bought {} {}.",
            pick(rng, NAMES),
            pick(rng, PLACES),
            pick(rng, DAYS),
            2 + rng.below(9),
            pick(rng, THINGS)
        ),
        1 => format!(
            "The weather in {} was {} for most of the week, and the {} stayed quiet.",
            pick(rng, TOWNS),
            pick(rng, WEATHER),
            pick(rng, PLACES)
        ),
        2 => format!(
            "A committee met at the {} in {} to argue about {} until late in the evening.",
            pick(rng, PLACES),
            pick(rng, TOWNS),
            pick(rng, TOPICS)
        ),
        _ => format!(
            "{} wrote a long letter about {} to a friend who lives in {}.",
            pick(rng, NAMES),
            pick(rng, TOPICS),
            pick(rng, TOWNS)
        ),
    }
}

/// `n` filler sentences with `facts` inserted at fractions of the way through
/// (`(0.5, "The code is 1234.")` lands in the middle).
pub fn text(seed: u64, n: usize, facts: &[(f64, String)]) -> String {
    let mut rng = Rng::new(seed);
    let mut out: Vec<String> = (0..n).map(|_| sentence(&mut rng)).collect();
    let mut placed: Vec<(usize, &String)> = facts
        .iter()
        .map(|(f, s)| (((f.clamp(0.0, 1.0)) * n as f64).round() as usize, s))
        .collect();
    // Insert from the back so earlier positions stay valid.
    placed.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    for (i, s) in placed {
        out.insert(i.min(out.len()), s.clone());
    }
    out.join(" ")
}

/// Measures chats in tokens.
#[derive(Debug, Clone)]
pub struct Sizer {
    pub http: reqwest::Client,
    pub target: Target,
    pub model: String,
}

impl Sizer {
    /// Tokens of the chat, exact when the server tokenizes, else estimated; and whether exact.
    pub async fn count(&self, messages: &[ChatMessage]) -> anyhow::Result<(u32, bool)> {
        if let Some(n) =
            server::chat_tokens(&self.http, &self.target, &self.model, messages).await?
        {
            return Ok((n, true));
        }
        let chars: usize = messages.iter().map(|m| m.text_content().len() + 8).sum();
        Ok((u32::try_from(chars / 4).unwrap_or(u32::MAX), false))
    }

    /// The largest filler count whose chat (`build(n)`) stays within `target` tokens, with
    /// the chat and its size.
    pub async fn fit(
        &self,
        target: u32,
        build: impl Fn(usize) -> Vec<ChatMessage>,
    ) -> anyhow::Result<Fitted> {
        let (base, _) = self.count(&build(0)).await?;
        let (probe, _) = self.count(&build(40)).await?;
        let per = (f64::from(probe.saturating_sub(base)) / 40.0).max(1.0);
        let mut n = (f64::from(target.saturating_sub(base)) / per) as usize;
        for _ in 0..6 {
            let messages = build(n);
            let (tokens, exact) = self.count(&messages).await?;
            if tokens <= target || n == 0 {
                return Ok(Fitted {
                    messages,
                    tokens,
                    exact,
                });
            }
            let over = f64::from(tokens - target) / per;
            n = n.saturating_sub(over.ceil() as usize + 1);
        }
        let messages = build(n);
        let (tokens, exact) = self.count(&messages).await?;
        Ok(Fitted {
            messages,
            tokens,
            exact,
        })
    }
}

/// A chat fitted to a length.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub messages: Vec<ChatMessage>,
    pub tokens: u32,
    pub exact: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_land_where_asked_and_filler_is_seeded() {
        let facts = vec![
            (0.0, "FIRST.".to_owned()),
            (0.5, "MIDDLE.".to_owned()),
            (1.0, "LAST.".to_owned()),
        ];
        let t = text(7, 10, &facts);
        assert!(t.starts_with("FIRST."), "{t}");
        assert!(t.ends_with("LAST."), "{t}");
        let mid = t.find("MIDDLE.").unwrap();
        assert!(mid > t.len() / 3 && mid < 2 * t.len() / 3, "{t}");
        assert_eq!(text(7, 10, &[]), text(7, 10, &[]));
        assert_ne!(text(7, 10, &[]), text(8, 10, &[]));
    }
}

//! Request sampling options -> the engine's `SamplingParams`, with every value range-checked and
//! every refusal naming the field, the value and what is allowed.

use hearth_protocol::openai::SamplingOptions;
use hearth_runtime::engine::MAX_N;
use hearth_runtime::SamplingParams;

use crate::error::ApiError;

/// Text-side settings that travel beside the engine's sampling parameters.
#[derive(Debug, Clone, Default)]
pub struct TextOptions {
    pub stop: Vec<String>,
    pub include_stop_str: bool,
    pub skip_special: bool,
}

fn range(name: &str, v: f32, lo: f32, hi: f32) -> Result<f32, ApiError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(v)
    } else {
        Err(ApiError::bad(
            name,
            format!("{name} is {v}; allowed: {lo} to {hi}"),
        ))
    }
}

pub fn params(o: &SamplingOptions) -> Result<(SamplingParams, usize, TextOptions), ApiError> {
    let mut p = SamplingParams::default();
    if let Some(t) = o.temperature {
        p.temperature = range("temperature", t, 0.0, 2.0)?;
    }
    if let Some(t) = o.top_p {
        p.top_p = range("top_p", t, 0.0, 1.0)?;
        if p.top_p == 0.0 {
            return Err(ApiError::bad(
                "top_p",
                "top_p is 0; allowed: greater than 0, at most 1",
            ));
        }
    }
    if let Some(k) = o.top_k {
        if k < -1 {
            return Err(ApiError::bad(
                "top_k",
                format!("top_k is {k}; allowed: -1 or 0 (off), or a positive count"),
            ));
        }
        p.top_k = k.max(0) as usize;
    }
    if let Some(m) = o.min_p {
        p.min_p = range("min_p", m, 0.0, 1.0)?;
    }
    if let Some(s) = o.seed {
        p.seed = Some(s as u64);
    }
    if let Some(v) = o.presence_penalty {
        p.presence_penalty = range("presence_penalty", v, -2.0, 2.0)?;
    }
    if let Some(v) = o.frequency_penalty {
        p.frequency_penalty = range("frequency_penalty", v, -2.0, 2.0)?;
    }
    if let Some(v) = o.repetition_penalty {
        p.repetition_penalty = range("repetition_penalty", v, 0.01, 10.0)?;
    }
    if let Some(v) = o.min_tokens {
        p.min_tokens = v as usize;
    }
    p.ignore_eos = o.ignore_eos.unwrap_or(false);
    p.stop_token_ids = o.stop_token_ids.clone().unwrap_or_default();
    if o.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
        return Err(ApiError::bad(
            "logit_bias",
            "logit_bias is not supported yet; omit it",
        ));
    }
    let n = o.n.unwrap_or(1) as usize;
    if n == 0 || n > MAX_N {
        return Err(ApiError::bad(
            "n",
            format!("n is {n}; allowed: 1 to {MAX_N}"),
        ));
    }
    let stop = o.stop.clone().map(|s| s.into_vec()).unwrap_or_default();
    if let Some(i) = stop.iter().position(String::is_empty) {
        return Err(ApiError::bad(
            "stop",
            format!("stop[{i}] is empty; stop strings need at least one character"),
        ));
    }
    let text = TextOptions {
        stop,
        include_stop_str: o.include_stop_str_in_output.unwrap_or(false),
        skip_special: o.skip_special_tokens.unwrap_or(true),
    };
    Ok((p, n, text))
}

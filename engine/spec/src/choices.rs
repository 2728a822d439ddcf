//! The closed sets of names a spec may use (devices, dtypes, quantizations, parsers, ...), each
//! an enum that knows its spellings, so error messages and the resolved YAML use the same words
//! as vLLM's flags.

use std::fmt;

use serde::{Serialize, Serializer};

/// Declares a string enum: `Variant = "spelling"`, optional `aliases { "alt" => Variant }`.
/// `ACCEPTED` lists every spelling (canonical ones first), for error messages.
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $name:ident { $($variant:ident = $text:literal),+ $(,)? }
        $(aliases { $($alias:literal => $target:ident),+ $(,)? })?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ACCEPTED: &'static [&'static str] = &[$($text),+ $($(, $alias)+)?];

            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some(Self::$variant),)+
                    $($($alias => Some(Self::$target),)+)?
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

choice! {
    /// Which backend runs the model; `auto` picks CUDA when a GPU is visible.
    Device { Auto = "auto", Cpu = "cpu", Cuda = "cuda" }
}

choice! {
    /// Activation / unquantized weight dtype (`half` is vLLM's alias of float16).
    Dtype { Auto = "auto", Bfloat16 = "bfloat16", Float16 = "float16", Float32 = "float32" }
    aliases { "half" => Float16 }
}

choice! {
    /// Weight quantization format of the checkpoint (absent = unquantized or detected).
    Quantization {
        ModeloptFp4 = "modelopt_fp4",
        Fp8 = "fp8",
        Awq = "awq",
        AwqMarlin = "awq_marlin",
        Gptq = "gptq",
        Gguf = "gguf",
        Mxfp4 = "mxfp4",
        CompressedTensors = "compressed-tensors",
    }
}

choice! {
    /// KV cache element type; the fp8 ones quantize with a per-tensor scale.
    KvCacheDtype {
        Auto = "auto",
        Fp8 = "fp8",
        Fp8E4m3 = "fp8_e4m3",
        Bfloat16 = "bfloat16",
        Float16 = "float16",
    }
}

impl KvCacheDtype {
    pub fn is_fp8(self) -> bool {
        matches!(self, KvCacheDtype::Fp8 | KvCacheDtype::Fp8E4m3)
    }
}

choice! {
    /// Speculative decoding drafter.
    SpecMethod { Mtp = "mtp", Eagle = "eagle", Ngram = "ngram" }
}

choice! {
    /// Tool-call output format of the model (text/parsers/tool/<name>.rs).
    ToolCallParser {
        Glm47 = "glm47",
        Glm45 = "glm45",
        Hermes = "hermes",
        DeepseekV3 = "deepseek_v3",
        DeepseekV31 = "deepseek_v31",
        Qwen3Coder = "qwen3_coder",
    }
}

choice! {
    /// Reasoning (thinking) output format of the model (text/parsers/reasoning/<name>.rs).
    ReasoningParser {
        Glm45 = "glm45",
        DeepseekR1 = "deepseek_r1",
        DeepseekV3 = "deepseek_v3",
        Qwen3 = "qwen3",
    }
}

choice! {
    /// Docker restart policy of the engine container.
    RestartPolicy {
        No = "no",
        OnFailure = "on-failure",
        Always = "always",
        UnlessStopped = "unless-stopped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_aliases_parse() {
        for s in Quantization::ACCEPTED {
            assert_eq!(Quantization::parse(s).map(|q| q.as_str()), Some(*s));
        }
        assert_eq!(Dtype::parse("half"), Some(Dtype::Float16));
        assert_eq!(
            Dtype::ACCEPTED,
            ["auto", "bfloat16", "float16", "float32", "half"]
        );
        assert_eq!(KvCacheDtype::parse("fp9"), None);
        assert!(KvCacheDtype::Fp8E4m3.is_fp8() && !KvCacheDtype::Auto.is_fp8());
        assert_eq!(RestartPolicy::OnFailure.to_string(), "on-failure");
    }
}

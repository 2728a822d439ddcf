//! Deserializing fields that are "a string, or else an array/object" (`content`, `stop`,
//! `system`, `tool_choice`). `#[serde(untagged)]` would accept the same JSON, but on a
//! mistake it only says "data did not match any variant"; dispatching on the JSON kind
//! keeps the inner error, e.g. "unknown variant `hologram`, expected one of `text`, ...".

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer, StrDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// What [`deserialize`] found.
pub(crate) enum StrOr<S, O> {
    Str(S),
    Other(O),
}

/// Parses a JSON string as `S`, or an array or object as `O`; `expecting` completes
/// "invalid type: ..., expected ...".
pub(crate) fn deserialize<'de, D, S, O>(
    d: D,
    expecting: &'static str,
) -> Result<StrOr<S, O>, D::Error>
where
    D: Deserializer<'de>,
    S: Deserialize<'de>,
    O: Deserialize<'de>,
{
    d.deserialize_any(StrOrVisitor {
        expecting,
        marker: PhantomData,
    })
}

struct StrOrVisitor<S, O> {
    expecting: &'static str,
    marker: PhantomData<fn() -> (S, O)>,
}

impl<'de, S: Deserialize<'de>, O: Deserialize<'de>> Visitor<'de> for StrOrVisitor<S, O> {
    type Value = StrOr<S, O>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        S::deserialize(StrDeserializer::<E>::new(v)).map(StrOr::Str)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        O::deserialize(SeqAccessDeserializer::new(seq)).map(StrOr::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        O::deserialize(MapAccessDeserializer::new(map)).map(StrOr::Other)
    }
}

/// Implements `Deserialize` for a two-variant enum `$ty::{$str_variant(S), $other_variant(O)}`.
macro_rules! impl_str_or_deserialize {
    ($ty:ty, $str_variant:ident, $other_variant:ident, $expecting:literal) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                Ok(match crate::str_or::deserialize(d, $expecting)? {
                    crate::str_or::StrOr::Str(s) => Self::$str_variant(s),
                    crate::str_or::StrOr::Other(o) => Self::$other_variant(o),
                })
            }
        }
    };
}
pub(crate) use impl_str_or_deserialize;

//! Zero-sized types for JSON fields whose value is a fixed string (`"object": "list"`,
//! `"type": "message"`). They serialize to that string, parse only from it, and make the
//! constant impossible to misspell when a response is built.

/// Declares a tag type: `wire_tag!(Name = "value")`.
macro_rules! wire_tag {
    ($( $(#[$meta:meta])* $name:ident = $value:literal; )+) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name;

        impl $name {
            /// The string this tag stands for on the wire.
            pub const VALUE: &'static str = $value;
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let got = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                if got == $value {
                    Ok($name)
                } else {
                    Err(serde::de::Error::invalid_value(
                        serde::de::Unexpected::Str(&got),
                        &$value,
                    ))
                }
            }
        }
    )+};
}

wire_tag! {
    /// `"chat.completion"`
    ChatCompletionObject = "chat.completion";
    /// `"chat.completion.chunk"`
    ChatCompletionChunkObject = "chat.completion.chunk";
    /// `"text_completion"`
    TextCompletionObject = "text_completion";
    /// `"list"`
    ListObject = "list";
    /// `"model"`
    ModelObject = "model";
    /// `"message"` (Anthropic message type)
    MessageType = "message";
    /// `"assistant"` (Anthropic response role)
    AssistantRole = "assistant";
    /// `"error"` (Anthropic error envelope type)
    ErrorType = "error";
    /// `"text"` (Anthropic system prompt block type)
    TextType = "text";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_and_rejects_other_values() {
        assert_eq!(serde_json::to_string(&ListObject).unwrap(), "\"list\"");
        let _: ListObject = serde_json::from_str("\"list\"").unwrap();
        let err = serde_json::from_str::<ListObject>("\"model\"").unwrap_err();
        assert!(err.to_string().contains("expected list"), "{err}");
    }
}

//! What a provider's JSON error says: `{"error": {"type", "code", "message"}}` (OpenAI,
//! Anthropic, llama.cpp, vLLM), `{"error": "message"}`, or the same keys at the top level
//! (older vLLM). It is read field by field, skipping everything else unread: an upstream's
//! error body is never built into a JSON tree of whatever size the upstream chose.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

/// The parts of an error the classification uses. Read it through `Upstream::detail`, which
/// blanks out the key.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ErrorDetail {
    /// A short identifier such as `overloaded_error`, if it looks like one.
    pub kind: Option<String>,
    /// The error's textual `code` (OpenAI's `content_policy_violation`, say) where it also
    /// has a `type`, which `kind` holds.
    pub code: Option<String>,
    /// The human message.
    pub message: Option<String>,
    /// A numeric `code` that can be an HTTP status (vLLM and llama.cpp put the status they
    /// would have answered with there).
    pub status: Option<u16>,
}

impl ErrorDetail {
    /// Reads an error object, or an object holding one under `error`; anything that is not
    /// one of those shapes says nothing.
    pub(crate) fn parse(json: &[u8]) -> Self {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let fields = deserializer
            .deserialize_any(FieldsVisitor)
            .unwrap_or_default();
        let error = match fields.nested {
            Some(Nested::Object(inner)) => *inner,
            Some(Nested::Message(message)) => Fields {
                message: Some(message),
                ..Fields::default()
            },
            None => fields,
        };
        let identifier = |k: &String| {
            !k.is_empty()
                && k.len() <= 64
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        };
        let code = error.code_text.clone().filter(identifier);
        let kind = error.kind.or(error.code_text).filter(identifier);
        Self {
            kind,
            code,
            message: error.message,
            status: error.code_number.and_then(|n| u16::try_from(n).ok()),
        }
    }
}

/// The keys of one error object.
#[derive(Debug, Default)]
struct Fields {
    kind: Option<String>,
    code_text: Option<String>,
    code_number: Option<u64>,
    message: Option<String>,
    nested: Option<Nested>,
}

/// What `error` held.
#[derive(Debug)]
enum Nested {
    Object(Box<Fields>),
    Message(String),
}

/// A string, or nothing for a value of any other kind (skipped unread).
struct Text(Option<String>);

/// A string, a number, or nothing.
struct Code(Option<String>, Option<u64>);

/// An object, a string, or nothing.
struct NestedValue(Option<Nested>);

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an error object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "type" => fields.kind = map.next_value::<Text>()?.0,
                "message" => fields.message = map.next_value::<Text>()?.0,
                "code" => {
                    let Code(text, number) = map.next_value()?;
                    fields.code_text = text;
                    fields.code_number = number;
                }
                "error" => fields.nested = map.next_value::<NestedValue>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Fields, E> {
        Ok(Fields::default())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Fields, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Fields::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Fields, E> {
        Ok(Fields::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Fields, E> {
        Ok(Fields::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Fields, E> {
        Ok(Fields::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Fields, E> {
        Ok(Fields::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Fields, E> {
        Ok(Fields::default())
    }
}

/// Implements `Deserialize` for a type read with `deserialize_any` and `$visitor`.
macro_rules! any_of {
    ($ty:ty, $visitor:ident) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any($visitor)
            }
        }
    };
}

struct TextVisitor;
any_of!(Text, TextVisitor);

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
        Ok(Text(Some(text.to_owned())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text, E> {
        Ok(Text(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text(None))
    }
}

struct CodeVisitor;
any_of!(Code, CodeVisitor);

impl<'de> Visitor<'de> for CodeVisitor {
    type Value = Code;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a number")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Code, E> {
        Ok(Code(Some(text.to_owned()), None))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Code, E> {
        Ok(Code(None, Some(number)))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Code, E> {
        Ok(Code(None, None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Code, E> {
        Ok(Code(None, None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Code, E> {
        Ok(Code(None, None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Code, E> {
        Ok(Code(None, None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Code, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Code(None, None))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Code, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Code(None, None))
    }
}

struct NestedVisitor;
any_of!(NestedValue, NestedVisitor);

impl<'de> Visitor<'de> for NestedVisitor {
    type Value = NestedValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an error object or a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NestedValue, A::Error> {
        let fields = FieldsVisitor.visit_map(map)?;
        // One level deep: an `error` inside the nested object is not followed further.
        Ok(NestedValue(Some(Nested::Object(Box::new(Fields {
            nested: None,
            ..fields
        })))))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<NestedValue, E> {
        Ok(NestedValue(Some(Nested::Message(text.to_owned()))))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<NestedValue, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(NestedValue(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<NestedValue, E> {
        Ok(NestedValue(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<NestedValue, E> {
        Ok(NestedValue(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<NestedValue, E> {
        Ok(NestedValue(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<NestedValue, E> {
        Ok(NestedValue(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<NestedValue, E> {
        Ok(NestedValue(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(json: &str) -> ErrorDetail {
        ErrorDetail::parse(json.as_bytes())
    }

    #[test]
    fn reads_each_shape_providers_send() {
        let nested = detail(r#"{"error":{"type":"overloaded_error","message":"Busy","code":529}}"#);
        assert_eq!(nested.kind.as_deref(), Some("overloaded_error"));
        assert_eq!(nested.message.as_deref(), Some("Busy"));
        assert_eq!(nested.status, Some(529));
        let flat = detail(r#"{"object":"error","message":"too long","code":400,"param":null}"#);
        assert_eq!(
            (flat.message.as_deref(), flat.status),
            (Some("too long"), Some(400))
        );
        assert_eq!(
            detail(r#"{"error":"plain words"}"#).message.as_deref(),
            Some("plain words")
        );
        let coded = detail(r#"{"error":{"code":"rate_limit_exceeded","message":"x"}}"#);
        assert_eq!(coded.kind.as_deref(), Some("rate_limit_exceeded"));
        // The kind must look like an identifier; a sentence is no kind.
        assert_eq!(detail(r#"{"type":"not an identifier"}"#).kind, None);
        assert_eq!(detail(r#"{"code":70000}"#).status, None);
    }

    #[test]
    fn anything_else_says_nothing_and_is_skipped_unread() {
        for junk in ["", "not json", "[1,2]", "42", "null", r#""just a string""#] {
            assert_eq!(detail(junk), ErrorDetail::default(), "{junk}");
        }
        // Fields of the wrong kind are skipped, deep structures walked without being built.
        let deep = format!(
            r#"{{"error":{{"type":{{"a":[1,2,{{}}]}},"message":"kept","extra":{}1{}}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        let read = detail(&deep);
        assert_eq!((read.kind, read.message.as_deref()), (None, Some("kept")));
    }
}

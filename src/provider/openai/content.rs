//! What of a chat completions chunk is more than plain text: `delta.content` as a list of
//! typed parts (reasoning and text), and Azure OpenAI's content filter verdicts.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::execution::{ReasoningPiece, Text};
use crate::provider::ProviderEvent;

/// `delta.content`: text, or a list of typed parts (Mistral's reasoning models send a
/// `thinking` part, then `text` parts; some gateways send reasoning parts with a signature).
/// Read by hand so that the usual case, a string, costs what `Option<Text>` did.
#[derive(Debug)]
pub(super) enum Content {
    Text(Text),
    Parts(Vec<Part>),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of content parts")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content::Text(Text::from(text)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Content, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl Content {
    /// The text of every part, in order (a `thinking` part's own list of text parts).
    fn texts(&self) -> Vec<&Text> {
        match self {
            Self::Text(text) => vec![text],
            Self::Parts(parts) => parts.iter().filter_map(|p| p.text.as_ref()).collect(),
        }
    }
}

/// One typed part of `delta.content`.
#[derive(Debug, Deserialize)]
pub(super) struct Part {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<Text>,
    /// A reasoning part's text: a string, or a list of text parts.
    #[serde(default)]
    thinking: Option<Content>,
    #[serde(default)]
    reasoning: Option<Content>,
    /// The signature that closes a reasoning part, where the server sends one.
    #[serde(default)]
    signature: Option<Text>,
}

/// What Azure OpenAI's content filter stopped, as evidence: `content filter: violence
/// (medium), ...` for each category it filtered; `None` when it names none.
pub(super) fn filtered(results: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Verdict {
        #[serde(default)]
        filtered: bool,
        #[serde(default)]
        severity: Option<String>,
    }
    let verdicts: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_str(results.get()).ok()?;
    let named: Vec<String> = verdicts
        .into_iter()
        // Names, not upstream prose: short ones only.
        .filter(|(category, _)| category.len() <= 64)
        .filter_map(|(category, verdict)| {
            let verdict: Verdict = serde_json::from_value(verdict).ok()?;
            verdict
                .filtered
                .then(|| match verdict.severity.filter(|s| s.len() <= 16) {
                    Some(severity) => format!("{category} ({severity})"),
                    None => category,
                })
        })
        .take(8)
        .collect();
    (!named.is_empty()).then(|| format!("content filter: {}", named.join(", ")))
}

/// The events of `delta.content`'s typed parts: text parts are output, `thinking` and
/// `reasoning` parts reasoning (with the signature that closes one); other kinds (images,
/// references) carry nothing for the reply and are skipped.
pub(super) fn parts_out(parts: Vec<Part>, out: &mut Vec<ProviderEvent>) {
    for part in parts {
        match part.kind.as_deref() {
            Some("thinking" | "reasoning") => {
                let texts = match part.thinking.as_ref().or(part.reasoning.as_ref()) {
                    Some(content) => content.texts(),
                    None => part.text.iter().collect(),
                };
                for text in texts.into_iter().filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::Reasoning(ReasoningPiece::Text, text.clone()));
                }
                if let Some(signature) = part.signature.filter(|s| !s.is_empty()) {
                    out.push(ProviderEvent::Reasoning(
                        ReasoningPiece::Signature,
                        signature,
                    ));
                }
            }
            None | Some("text" | "output_text") => {
                if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    out.push(ProviderEvent::TextDelta(text));
                }
            }
            Some(_) => {}
        }
    }
}

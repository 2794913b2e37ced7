//! The hand reader against serde on the same chunks.

use proptest::prelude::*;

use super::text_chunk;
use crate::provider::gemini::Chunk;
use crate::provider::scan::arbitrary;

/// What a chunk of one text part means, as text: the hand reader's, or serde's when the
/// chunk is of that shape.
fn meaning(text: &str, model: Option<&str>, usage: Option<[Option<u64>; 4]>) -> String {
    format!("{text:?} {model:?} {usage:?}")
}

/// The hand reader's answer, checked against serde's when it has one.
fn agrees(data: &str) -> Option<String> {
    let fast = text_chunk(data).map(|c| {
        let usage = c.usage.map(|u| {
            [
                u.prompt_token_count,
                u.candidates_token_count,
                u.thoughts_token_count,
                u.cached_content_token_count,
            ]
        });
        meaning(&c.text, c.model.as_deref(), usage)
    });
    if let Some(fast) = &fast {
        let typed: Chunk = serde_json::from_str(data).expect(data);
        assert!(
            typed.error.is_none() && typed.prompt_feedback.is_none(),
            "{data}"
        );
        let [candidate] = typed.candidates.as_deref().expect(data) else {
            panic!("not one candidate: {data}");
        };
        assert_eq!(candidate.index, 0, "{data}");
        assert!(candidate.finish_reason.is_none(), "{data}");
        let parts = candidate.content.as_ref().and_then(|c| c.parts.as_deref());
        let [part] = parts.expect(data) else {
            panic!("not one part: {data}");
        };
        assert!(!part.thought && part.thought_signature.is_none(), "{data}");
        assert!(part.function_call.is_none(), "{data}");
        let usage = typed.usage_metadata.as_ref().map(|u| {
            [
                u.prompt_token_count,
                u.candidates_token_count,
                u.thoughts_token_count,
                u.cached_content_token_count,
            ]
        });
        let text = part.text.as_deref().expect(data);
        let typed = meaning(text, typed.model_version.as_deref(), usage);
        assert_eq!(fast, &typed, "{data}");
    }
    fast
}

#[test]
fn geminis_text_chunks_are_read_by_hand() {
    let real = r#"{"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 9,"totalTokenCount": 9,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 9}]},"modelVersion": "gemini-2.5-flash","responseId": "abc"}"#;
    assert_eq!(
        agrees(real).as_deref(),
        Some(r#""Hello" Some("gemini-2.5-flash") Some([Some(9), None, None, None])"#)
    );
    let plain = r#"{"candidates":[{"content":{"parts":[{"text":" a\nb"}],"role":"model"},"index":0}],"modelVersion":"m"}"#;
    assert_eq!(agrees(plain).as_deref(), Some(r#"" a\nb" Some("m") None"#));
    // serde's to read, or to refuse:
    for data in [
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":1}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a","thought":true}]}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b"}]}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"\u00e9"}]}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"promptFeedback":{}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":-1}}"#,
        r#"{"candidates":[],"modelVersion":"m"}"#,
        r#"{"modelVersion":"m"}"#,
    ] {
        assert_eq!(agrees(data), None, "{data}");
    }
}

/// A chunk: mostly one candidate's text part, and its near misses.
fn chunk() -> impl Strategy<Value = String> {
    let part = arbitrary::shaped(
        vec![
            arbitrary::text()
                .prop_map(|t| format!("\"text\":{t}"))
                .boxed(),
        ],
        prop_oneof![
            Just(r#""thought":true"#.to_owned()),
            Just(r#""text":"b""#.to_owned())
        ],
    );
    let parts = prop_oneof![
        8 => part.clone().prop_map(|p| format!("[{p}]")),
        1 => Just("[]".to_owned()),
        1 => (part.clone(), part).prop_map(|(a, b)| format!("[{a},{b}]")),
    ];
    let content = arbitrary::shaped(
        vec![
            parts.prop_map(|p| format!("\"parts\":{p}")).boxed(),
            arbitrary::text()
                .prop_map(|t| format!("\"role\":{t}"))
                .boxed(),
        ],
        Just(r#""role":"user""#.to_owned()),
    );
    let candidate = arbitrary::shaped(
        vec![
            content.prop_map(|c| format!("\"content\":{c}")).boxed(),
            prop_oneof![4 => Just("0"), 1 => arbitrary::number()]
                .prop_map(|n| format!("\"index\":{n}"))
                .boxed(),
        ],
        Just(r#""finishReason":"STOP""#.to_owned()),
    );
    let candidates = prop_oneof![
        8 => candidate.clone().prop_map(|c| format!("[{c}]")),
        1 => Just("[]".to_owned()),
        1 => (candidate.clone(), candidate).prop_map(|(a, b)| format!("[{a},{b}]")),
    ];
    let count = |key: &'static str| {
        arbitrary::number()
            .prop_map(move |n| format!("\"{key}\":{n}"))
            .boxed()
    };
    let usage = arbitrary::shaped(
        vec![
            count("promptTokenCount"),
            count("candidatesTokenCount"),
            count("totalTokenCount"),
            prop_oneof![
                Just(r#""promptTokensDetails":[{"modality":"TEXT","tokenCount":9}]"#.to_owned()),
                Just(r#""promptTokensDetails":[]"#.to_owned()),
                Just(
                    r#""promptTokensDetails":[{"modality":"TEXT"},{"tokenCount":1.5}]"#.to_owned()
                ),
            ]
            .boxed(),
        ],
        prop_oneof![
            count("thoughtsTokenCount"),
            count("cachedContentTokenCount")
        ],
    );
    arbitrary::shaped(
        vec![
            candidates
                .prop_map(|c| format!("\"candidates\":{c}"))
                .boxed(),
            usage.prop_map(|u| format!("\"usageMetadata\":{u}")).boxed(),
            arbitrary::text()
                .prop_map(|t| format!("\"modelVersion\":{t}"))
                .boxed(),
            arbitrary::text()
                .prop_map(|t| format!("\"responseId\":{t}"))
                .boxed(),
        ],
        Just(r#""promptFeedback":{"blockReason":"SAFETY"}"#.to_owned()),
    )
}

// The usual shape comes out of the strategy about one in sixty times, so many cases.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(data in chunk()) {
        agrees(&data);
    }
}

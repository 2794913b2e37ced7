//! The hand reader against serde on the same text: what it reads, it reads to the `Chunk`
//! serde makes; what serde refuses, it does not read.

use proptest::prelude::*;

use super::chunk;
use crate::provider::openai::Chunk;

/// The hand reader's answer, checked against serde's when it has one.
fn agrees(data: &str) -> Option<String> {
    let fast = chunk(data).map(|c| format!("{c:?}"));
    if let Some(fast) = &fast {
        let typed = serde_json::from_str::<Chunk>(data)
            .map(|c| format!("{c:?}"))
            .map_err(|e| e.to_string());
        assert_eq!(Ok(fast), typed.as_ref(), "{data}");
    }
    fast
}

#[test]
fn the_usual_chunks_are_read_by_hand_as_serde_reads_them() {
    for data in [
        // OpenAI's: the role first, then text, then the finish.
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
        // The bench mock's, and spaced out.
        r#"{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[{"index":0,"delta":{"content":" word3"},"finish_reason":null}]}"#,
        "{ \"model\" : \"m\" ,\n \"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"héllo ✓\" } } ] }",
        // vLLM's last, a chunk with nothing, another choice's, a refusal.
        r#"{"id":"x","model":"m","choices":null}"#,
        r#"{"choices":[]}"#,
        "{}",
        r#"{"choices":[{"index":1,"delta":null,"finish_reason":"length"}]}"#,
        r#"{"choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}"#,
        // The simple escapes, decoded.
        r#"{"choices":[{"index":0,"delta":{"content":"line\nnext \"quoted\" back\\slash\ttab \/ \r\b\f"}}]}"#,
    ] {
        assert!(agrees(data).is_some(), "not read by hand: {data}");
    }
}

#[test]
fn anything_else_is_left_to_serde() {
    for data in [
        // A `\u` escape, an escape serde refuses, an escape outside the text, a tool call,
        // usage, reasoning, a second choice, an error.
        r#"{"choices":[{"index":0,"delta":{"content":"caf\u00e9"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"bad \x escape"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"cut \"#,
        r#"{"choices":[{"index":0,"delta":{"con\/tent":"a"}}]}"#,
        r#"{"model":"m\/1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}"#,
        r#"{"error":{"message":"boom"}}"#,
        r#"{"x_groq":{"usage":null}}"#,
        // Numbers it does not expect, a field twice, what serde refuses.
        r#"{"created":1.5,"choices":[]}"#,
        r#"{"created":1e3,"choices":[]}"#,
        r#"{"created":-1,"choices":[]}"#,
        r#"{"created":01,"choices":[]}"#,
        r#"{"choices":[{"index":00}]}"#,
        r#"{"created":18446744073709551616,"choices":[]}"#,
        r#"{"choices":[{"index":-1}]}"#,
        r#"{"choices":[{"index":4294967296}]}"#,
        r#"{"model":"a","model":"b"}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"model":"a"} trailing"#,
        r#"{"model":"a""#,
        r#"{"model":"a",}"#,
        r#"{"model":"unterminated}"#,
        r#"["model"]"#,
        "",
        "{\"model\":\"tab\there\"}",
    ] {
        assert_eq!(agrees(data), None, "read by hand: {data}");
    }
}

/// A value of the kind `key` takes, or some other JSON.
fn value(key: &'static str) -> BoxedStrategy<String> {
    let text = prop_oneof![
        "[a-z ]{0,8}".prop_map(|s| format!("\"{s}\"")),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        // The simple escapes, `/` escaped too as some servers do.
        "[a-z\n\"\\\\/\t\r\u{8}\u{c} ]{0,12}"
            .prop_map(|s| serde_json::to_string(&s).unwrap().replace('/', "\\/")),
    ];
    let other = prop_oneof![
        Just("null".to_owned()),
        Just("0".to_owned()),
        Just("1.5".to_owned()),
        Just("01".to_owned()),
        Just("-2".to_owned()),
        Just("true".to_owned()),
        Just("{}".to_owned()),
        Just("[]".to_owned()),
        text,
    ];
    match key {
        "created" | "index" => {
            prop_oneof![(0..5_000_000_000u64).prop_map(|n| n.to_string()), other].boxed()
        }
        "delta" => prop_oneof![
            object(&["role", "content", "refusal", "tool_calls"], 3),
            other
        ]
        .boxed(),
        "choices" => prop_oneof![
            proptest::collection::vec(
                object(&["index", "delta", "logprobs", "finish_reason"], 4),
                0..3
            )
            .prop_map(|c| format!("[{}]", c.join(","))),
            other
        ]
        .boxed(),
        _ => other.boxed(),
    }
}

/// An object of up to `most` fields named from `keys` (repeats allowed), each with a value
/// of its kind or another, spaced at random.
fn object(keys: &'static [&'static str], most: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(
        (
            proptest::sample::select(keys),
            proptest::sample::select(&["", " ", "\n "][..]),
        )
            .prop_flat_map(|(key, space)| {
                value(key).prop_map(move |v| format!("{space}\"{key}\"{space}:{space}{v}"))
            }),
        0..=most,
    )
    .prop_map(|fields| format!("{{{}}}", fields.join(",")))
    .boxed()
}

proptest! {
    #[test]
    fn what_it_reads_serde_reads_the_same(
        data in object(&["id", "object", "created", "model", "choices", "usage", "error"], 6)
    ) {
        agrees(&data);
    }
}

//! The hand reader against serde on the same text: what it reads, it reads to the `Chunk`
//! serde makes; what serde refuses, it does not read.

use proptest::prelude::*;

use super::repeat::text_chunk;
use super::{Repeat, read};
use crate::provider::openai::Chunk;

/// The hand reader's answer, checked against serde's when it has one.
fn agrees(data: &str) -> Option<String> {
    let fast = read(data).map(|(c, _)| format!("{c:?}"));
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
        // The last chunk's counts: the bench mock's, and OpenAI's with their details.
        r#"{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":1700000000,"model":"mock-model","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":20,"total_tokens":40}}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#,
        r#"{"choices":[],"usage":{}}"#,
    ] {
        assert!(agrees(data).is_some(), "not read by hand: {data}");
    }
}

#[test]
fn anything_else_is_left_to_serde() {
    for data in [
        // A `\u` escape, an escape serde refuses, an escape outside the text, a tool call,
        // counts that are not plain integers or named twice, reasoning, a second choice, an
        // error.
        r#"{"choices":[{"index":0,"delta":{"content":"caf\u00e9"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"bad \x escape"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"cut \"#,
        r#"{"choices":[{"index":0,"delta":{"con\/tent":"a"}}]}"#,
        r#"{"model":"m\/1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":2}}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}"#,
        r#"{"choices":[],"usage":{"total_tokens":1.5}}"#,
        r#"{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":1}}}"#,
        r#"{"choices":[],"usage":{"completion_tokens_details":null}}"#,
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
        "created" | "index" | "prompt_tokens" | "completion_tokens" | "total_tokens"
        | "cached_tokens" | "reasoning_tokens" | "audio_tokens" => {
            prop_oneof![3 => (0..5_000_000_000u64).prop_map(|n| n.to_string()), 1 => other].boxed()
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
        "usage" => prop_oneof![
            object(
                &[
                    "prompt_tokens",
                    "completion_tokens",
                    "total_tokens",
                    "prompt_tokens_details",
                    "completion_tokens_details",
                ],
                5
            ),
            other
        ]
        .boxed(),
        "prompt_tokens_details" => {
            prop_oneof![object(&["cached_tokens", "audio_tokens"], 3), other].boxed()
        }
        "completion_tokens_details" => {
            prop_oneof![object(&["reasoning_tokens", "audio_tokens"], 3), other].boxed()
        }
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
    fn the_counts_are_read_as_serde_reads_them(usage in value("usage")) {
        agrees(&format!(r#"{{"choices":[],"usage":{usage}}}"#));
    }

    #[test]
    fn what_it_reads_serde_reads_the_same(
        data in object(
            &["id", "object", "created", "model", "choices", "usage", "error", "obfuscation"],
            6,
        )
    ) {
        agrees(&data);
    }
}

/// `data` read as the kept chunk with another text, if it is one: the model is the kept
/// chunk's, which this takes from reading `data` whole.
fn again(repeat: &Repeat, data: &str) -> Option<Chunk> {
    let text = repeat.again(data)?;
    let model = read(data).and_then(|(c, _)| c.model);
    Some(text_chunk(model, text))
}

/// A chunk of `model`'s `text` (any JSON value), with `tail` in its choice and `extra` at its
/// end: the chunks of one reply, and some that are not.
fn of_a_reply() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("\"m\""), Just("\"n\""), Just("null")],
        value("content"),
        // Each differs from another of its kind in bytes, not length.
        prop_oneof![
            Just(""),
            Just(",\"finish_reason\":null"),
            Just(",\"finish_reason\":\"ab\""),
            Just(",\"logprobs\":null"),
        ],
        prop_oneof![
            Just(String::new()),
            Just(",\"usage\":null".to_owned()),
            Just(",\"created\":12".to_owned()),
            "[a-zA-Z0-9]{0,6}".prop_map(|pad| format!(",\"obfuscation\":\"{pad}\"")),
            "[a-zA-Z0-9]{0,6}".prop_map(|pad| format!(",\"obfuscation\":\"{pad}\",\"usage\":null")),
            "[a-zA-Z0-9]{0,6}".prop_map(|pad| format!(",\"obfuscation\":\"{pad}\",\"created\":1.5")),
            Just(",\"obfuscation\":\"a\\nb\"".to_owned()),
        ],
    )
        .prop_map(|(model, text, tail, extra)| {
            format!(
                r#"{{"id":"c","model":{model},"choices":[{{"index":0,"delta":{{"content":{text}}}{tail}}}]{extra}}}"#
            )
        })
}

proptest! {
    #[test]
    fn a_chunk_read_as_one_like_it_reads_as_it_reads_alone(
        chunks in proptest::collection::vec(
            prop_oneof![
                4 => of_a_reply(),
                1 => object(&["id", "model", "choices", "usage"], 4),
            ],
            1..12,
        )
    ) {
        let mut repeat = Repeat::default();
        for data in &chunks {
            let alone = read(data).map(|(c, _)| c);
            let read = match again(&repeat, data) {
                Some(chunk) => Some(chunk),
                None => repeat.chunk(data),
            };
            prop_assert_eq!(format!("{read:?}"), format!("{alone:?}"), "{}", data);
        }
    }
}

#[test]
fn the_chunks_of_a_reply_are_read_as_one_like_the_last() {
    let chunk = |text: &str| {
        format!(
            r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{{"index":0,"delta":{{"content":{text}}},"logprobs":null,"finish_reason":null}}]}}"#
        )
    };
    let mut repeat = Repeat::default();
    assert!(
        again(&repeat, &chunk("\"a\"")).is_none(),
        "nothing kept yet"
    );
    repeat.chunk(&chunk("\"a\"")).unwrap();
    for text in ["\" b\"", "\"\"", "\"line\\nnext\"", "\"héllo ✓\""] {
        let kept = again(&repeat, &chunk(text)).map(|c| format!("{c:?}"));
        let alone = read(&chunk(text)).map(|(c, _)| format!("{c:?}"));
        assert!(kept.is_some(), "{text}");
        assert_eq!(kept, alone, "{text}");
    }
    // OpenAI's padding, of another length in each.
    let padded = |text: &str, pad: &str| {
        chunk(text).replace("}]}", &format!("}}],\"obfuscation\":\"{pad}\"}}"))
    };
    repeat.chunk(&padded("\"a\"", "xyz")).unwrap();
    for (text, pad) in [("\" b\"", "Q"), ("\"c\"", ""), ("\"d\"", "0123456789")] {
        let kept = again(&repeat, &padded(text, pad)).map(|c| format!("{c:?}"));
        let alone = read(&padded(text, pad)).map(|(c, _)| format!("{c:?}"));
        assert!(kept.is_some(), "{text} {pad}");
        assert_eq!(kept, alone, "{text} {pad}");
    }
    assert!(
        again(&repeat, &padded("\"a\"", "x\\ny")).is_none(),
        "an escape in the padding"
    );
    let after = chunk("\"a\"").replace("}]}", "}],\"obfuscation\":\"x\",\"created\":1.5}");
    assert!(
        again(&repeat, &after).is_none(),
        "more after the padding: {after}"
    );
    assert!(again(&repeat, &chunk("\"a\"")).is_none(), "no padding");
    repeat.chunk(&chunk("\"a\"")).unwrap();
    // Not its text, or not the same around it.
    for data in [
        chunk("null"),
        chunk("1"),
        chunk("\"\\u00e9\""),
        chunk("\"a\"").replace("\"logprobs\":null", "\"logprobs\":{}"),
        chunk("\"a\"").replace("}]}", "}],\"usage\":{\"prompt_tokens\":1}}"),
        chunk("\"a\"").replace("null}]}", "\"ab\"}]}"),
        chunk("\"a\"").replace("gpt-4o-mini", "gpt-4o-mino"),
    ] {
        assert!(again(&repeat, &data).is_none(), "{data}");
    }
}

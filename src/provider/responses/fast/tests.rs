//! The hand reader against serde on the same events.

use proptest::prelude::*;

use super::text_delta;
use crate::provider::responses::Event;
use crate::provider::scan::arbitrary;

/// The hand reader's answer, checked against serde's when it has one.
fn agrees(data: &str) -> Option<String> {
    let fast = text_delta(data).map(|t| t.to_string());
    if let Some(text) = &fast {
        let typed: Event = serde_json::from_str(data).expect(data);
        assert_eq!(typed.kind, "response.output_text.delta", "{data}");
        assert_eq!(typed.delta.as_deref(), Some(text.as_str()), "{data}");
    }
    fast
}

#[test]
fn output_text_deltas_are_read_by_hand() {
    let cases = [
        (
            r#"{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello","logprobs":[],"obfuscation":"kR8x"}"#,
            Some("Hello"),
        ),
        (
            r#"{ "delta" : "a\"b\n" , "type" : "response.output_text.delta" , "logprobs" : [ ] }"#,
            Some("a\"b\n"),
        ),
        // serde's to read, or to refuse:
        (r#"{"type":"response.refusal.delta","delta":"no"}"#, None),
        (r#"{"delta":"a"}"#, None),
        (r#"{"type":"response.output_text.delta"}"#, None),
        (
            r#"{"type":"response.output_text.delta","delta":"\u00e9"}"#,
            None,
        ),
        (
            r#"{"type":"response.output_text.delta","delta":"a","output_index":4294967296}"#,
            None,
        ),
        (
            r#"{"type":"response.output_text.delta","delta":"a","logprobs":[{"token":"a"}]}"#,
            None,
        ),
        (
            r#"{"type":"response.output_text.delta","delta":"a","delta":"b"}"#,
            None,
        ),
    ];
    for (data, want) in cases {
        assert_eq!(agrees(data).as_deref(), want, "{data}");
    }
}

/// An event: mostly an output text delta, and its near misses.
fn event() -> impl Strategy<Value = String> {
    let number = |key: &'static str| {
        arbitrary::number()
            .prop_map(move |n| format!("\"{key}\":{n}"))
            .boxed()
    };
    let text = |key: &'static str| {
        arbitrary::text()
            .prop_map(move |t| format!("\"{key}\":{t}"))
            .boxed()
    };
    arbitrary::shaped(
        vec![
            prop_oneof![
                9 => Just("\"response.output_text.delta\""),
                1 => Just("\"response.refusal.delta\""),
                1 => Just("null"),
            ]
            .prop_map(|k| format!("\"type\":{k}"))
            .boxed(),
            text("delta"),
            number("sequence_number"),
            text("item_id"),
            number("output_index"),
            number("content_index"),
            prop_oneof![4 => Just("[]"), 1 => Just("[ ]"), 1 => Just("[1]"), 1 => Just("null")]
                .prop_map(|l| format!("\"logprobs\":{l}"))
                .boxed(),
            text("obfuscation"),
        ],
        prop_oneof![
            Just(r#""response":{"model":"m"}"#.to_owned()),
            Just(r#""delta":"again""#.to_owned()),
        ],
    )
}

// The usual shape comes out of the strategy about one in sixteen times, so many cases.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(data in event()) {
        agrees(&data);
    }
}

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

/// A field of an event: one of the usual ones or something else, well formed or not.
fn field() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        Just("0"),
        Just("7"),
        Just("01"),
        Just("-1"),
        Just("2.5"),
        Just("4294967296"),
        Just("null"),
    ];
    prop_oneof![
        3 => prop_oneof![
            Just("\"response.output_text.delta\""),
            Just("\"response.refusal.delta\""),
            Just("null"),
        ]
        .prop_map(|k| format!("\"type\":{k}")),
        3 => arbitrary::text().prop_map(|t| format!("\"delta\":{t}")),
        2 => (
            prop_oneof![Just("output_index"), Just("sequence_number"), Just("content_index")],
            number,
        )
            .prop_map(|(k, n)| format!("\"{k}\":{n}")),
        1 => arbitrary::text().prop_map(|t| format!("\"item_id\":{t}")),
        1 => arbitrary::text().prop_map(|t| format!("\"obfuscation\":{t}")),
        1 => prop_oneof![Just("[]"), Just("[ ]"), Just("[1]"), Just("null")]
            .prop_map(|l| format!("\"logprobs\":{l}")),
        1 => Just(r#""response":{"model":"m"}"#.to_owned()),
    ]
}

proptest! {
    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(data in arbitrary::object(field())) {
        agrees(&data);
    }
}

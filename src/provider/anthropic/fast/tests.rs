//! The hand reader against serde on the same events.

use proptest::prelude::*;

use super::text_delta;
use crate::provider::anthropic::Event;
use crate::provider::scan::arbitrary;

/// The hand reader's answer, checked against serde's when it has one.
fn agrees(data: &str) -> Option<(u32, String)> {
    let fast = text_delta(data).map(|(i, t)| (i, t.to_string()));
    if let Some((index, text)) = &fast {
        let typed: Event = serde_json::from_str(data).expect(data);
        assert_eq!(typed.kind, "content_block_delta", "{data}");
        assert_eq!(typed.index, Some(*index), "{data}");
        let delta = typed.delta.expect(data);
        assert_eq!(delta.kind.as_deref(), Some("text_delta"), "{data}");
        assert_eq!(delta.text.as_deref(), Some(text.as_str()), "{data}");
    }
    fast
}

#[test]
fn anthropics_text_deltas_are_read_by_hand() {
    let cases = [
        (
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
            Some((0, "Hello")),
        ),
        (
            r#" { "delta" : { "text" : "a\"b\n" , "type" : "text_delta" } , "index" : 2 , "type" : "content_block_delta" } "#,
            Some((2, "a\"b\n")),
        ),
        // serde's to read, or to refuse:
        (
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            None,
        ),
        (
            r#"{"type":"content_block_delta","index":0,"delta":{"text":"a"}}"#,
            None,
        ),
        (
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}"#,
            None,
        ),
        (
            r#"{"index":0,"delta":{"type":"text_delta","text":"a"}}"#,
            None,
        ),
        (
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\u00e9"}}"#,
            None,
        ),
        (
            r#"{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"a"}}"#,
            None,
        ),
        (
            r#"{"type":"message_delta","index":0,"delta":{"type":"text_delta","text":"a"}}"#,
            None,
        ),
    ];
    for (data, want) in cases {
        let got = agrees(data);
        assert_eq!(got.as_ref().map(|(i, t)| (*i, t.as_str())), want, "{data}");
    }
}

/// A field of an event: one of the usual ones or something else, well formed or not.
fn field() -> impl Strategy<Value = String> {
    let text = arbitrary::text();
    let kind = prop_oneof![
        Just("\"text_delta\""),
        Just("\"content_block_delta\""),
        Just("\"thinking_delta\""),
        Just("null"),
    ];
    let delta_field = prop_oneof![
        3 => text.clone().prop_map(|t| format!("\"text\":{t}")),
        3 => kind.clone().prop_map(|k| format!("\"type\":{k}")),
        1 => Just(r#""partial_json":"{}""#.to_owned()),
    ];
    prop_oneof![
        3 => kind.prop_map(|k| format!("\"type\":{k}")),
        3 => prop_oneof![Just("0"), Just("7"), Just("01"), Just("-1"), Just("1e0"), Just("99999999999")]
            .prop_map(|n| format!("\"index\":{n}")),
        3 => proptest::collection::vec(delta_field, 0..3)
            .prop_map(|f| format!("\"delta\":{{{}}}", f.join(","))),
        1 => Just(r#""usage":{"output_tokens":1}"#.to_owned()),
        1 => Just(r#""delta":null"#.to_owned()),
    ]
}

proptest! {
    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(
        data in arbitrary::object(field()),
    ) {
        agrees(&data);
    }
}

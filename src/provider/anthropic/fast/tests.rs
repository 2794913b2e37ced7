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

/// An event: mostly a text delta, and its near misses.
fn event() -> impl Strategy<Value = String> {
    let delta = arbitrary::shaped(
        vec![
            prop_oneof![9 => Just("\"text_delta\""), 1 => Just("\"thinking_delta\""), 1 => Just("null")]
                .prop_map(|k| format!("\"type\":{k}"))
                .boxed(),
            arbitrary::text().prop_map(|t| format!("\"text\":{t}")).boxed(),
        ],
        Just(r#""partial_json":"{}""#.to_owned()),
    );
    arbitrary::shaped(
        vec![
            prop_oneof![9 => Just("\"content_block_delta\""), 1 => Just("\"message_delta\""), 1 => Just("null")]
                .prop_map(|k| format!("\"type\":{k}"))
                .boxed(),
            arbitrary::number().prop_map(|n| format!("\"index\":{n}")).boxed(),
            delta.prop_map(|d| format!("\"delta\":{d}")).boxed(),
        ],
        prop_oneof![
            Just(r#""usage":{"output_tokens":1}"#.to_owned()),
            Just(r#""delta":null"#.to_owned()),
            Just(r#""index":1"#.to_owned()),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(data in event()) {
        agrees(&data);
    }
}

//! The hand reader against serde on the same events.

use proptest::prelude::*;

use super::{event as read_event, text_delta};
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

/// The hand reader's event, checked against serde's when it has one.
fn agrees_on_event(data: &str) -> bool {
    let fast = read_event(data);
    if let Some(fast) = &fast {
        let typed: Event = serde_json::from_str(data).expect(data);
        assert_eq!(format!("{fast:?}"), format!("{typed:?}"), "{data}");
    }
    fast.is_some()
}

#[test]
fn the_events_around_a_reply_are_read_by_hand() {
    let read = [
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":1,"service_tier":"standard"}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        r#"{"type":"message_stop"}"#,
        r#"{"type": "ping"}"#,
    ];
    for data in read {
        assert!(agrees_on_event(data), "read by hand: {data}");
    }
    // serde's to read, or to refuse:
    let left = [
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1,"server_tool_use":{"web_search_requests":1}}}"#,
        r#"{"type":"message_start","message":{"content":[{"type":"text"}],"model":"m"}}"#,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        r#"{"type":"content_block_stop","index":-1}"#,
        r#"{"type":"content_block_stop","index":0,"index":1}"#,
        r#"{"index":0}"#,
        r#"{"type":"message_stop"} x"#,
        // A block's deltas: text_delta's, or serde's.
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"text":"a"}}"#,
    ];
    for data in left {
        assert!(!agrees_on_event(data), "left to serde: {data}");
    }
}

/// Token counts, mostly the usual ones.
fn usage() -> BoxedStrategy<String> {
    let count = |key: &'static str| {
        arbitrary::number()
            .prop_map(move |n| format!("\"{key}\":{n}"))
            .boxed()
    };
    arbitrary::shaped(
        vec![
            count("input_tokens"),
            count("output_tokens"),
            count("cache_creation_input_tokens"),
            count("cache_read_input_tokens"),
            arbitrary::text()
                .prop_map(|t| format!("\"service_tier\":{t}"))
                .boxed(),
        ],
        prop_oneof![
            Just(r#""server_tool_use":{"web_search_requests":1}"#.to_owned()),
            Just(r#""output_tokens":2"#.to_owned()),
        ],
    )
}

/// One of the events around a reply's text, and their near misses.
fn other_event() -> impl Strategy<Value = String> {
    let field = |key: &'static str, value: BoxedStrategy<String>| {
        value.prop_map(move |v| format!("\"{key}\":{v}")).boxed()
    };
    let plain = |texts: &'static [&'static str]| {
        proptest::sample::select(texts)
            .prop_map(str::to_owned)
            .boxed()
    };
    let block = arbitrary::shaped(
        vec![
            field("type", plain(&["\"text\"", "\"tool_use\"", "null"])),
            field("text", arbitrary::text().boxed()),
        ],
        Just(r#""id":"t""#.to_owned()),
    );
    let delta = arbitrary::shaped(
        vec![
            field("stop_reason", arbitrary::text().boxed()),
            field("stop_sequence", arbitrary::text().boxed()),
            field("type", plain(&["\"text_delta\"", "null"])),
            field("text", arbitrary::text().boxed()),
        ],
        Just(r#""partial_json":"{}""#.to_owned()),
    );
    let message = arbitrary::shaped(
        vec![
            field("id", arbitrary::text().boxed()),
            field("type", plain(&["\"message\""])),
            field("role", plain(&["\"assistant\""])),
            field("content", plain(&["[]", "[ ]", "[1]"])),
            field("model", arbitrary::text().boxed()),
            field("stop_reason", plain(&["null"])),
            field("stop_sequence", plain(&["null"])),
            field("usage", usage()),
        ],
        Just(r#""container":null"#.to_owned()),
    );
    let kind = plain(&[
        "\"message_start\"",
        "\"content_block_start\"",
        "\"content_block_stop\"",
        "\"message_delta\"",
        "\"message_stop\"",
        "\"ping\"",
        "\"a\\u0062\"",
        "null",
    ]);
    // Now and then a field serde reads another way: an error, an object as null, a repeat.
    let odd = plain(&[
        r#""error":{"type":"x"}"#,
        r#""message":null"#,
        r#""content_block":null"#,
        r#""delta":null"#,
        r#""usage":null"#,
        r#""type":"ping""#,
        r#""index":0"#,
    ]);
    let fields = |usual: Vec<BoxedStrategy<String>>| arbitrary::shaped(usual, odd.clone());
    prop_oneof![
        fields(vec![field("type", kind.clone()), field("message", message)]),
        fields(vec![
            field("type", kind.clone()),
            field("index", arbitrary::number().prop_map(str::to_owned).boxed()),
            field("content_block", block),
        ]),
        fields(vec![
            field("type", kind.clone()),
            field("index", arbitrary::number().prop_map(str::to_owned).boxed()),
        ]),
        fields(vec![
            field("type", kind.clone()),
            field("delta", delta),
            field("usage", usage()),
        ]),
        fields(vec![field("type", kind)]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn what_the_event_reader_reads_serde_reads_the_same(data in other_event()) {
        agrees_on_event(&data);
    }
}

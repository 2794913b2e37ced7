//! Anthropic messages stream events, as a real server writes them, for the tests' upstreams.

use super::adapters::event;

/// `message_start` with this `usage` object.
pub fn message_start(usage: &str) -> String {
    event(
        "message_start",
        &format!(
            r#"{{"type":"message_start","message":{{"id":"msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{usage}}}}}"#
        ),
    )
}

/// `content_block_start` of `block` at `index`.
pub fn block_start(index: u32, block: &str) -> String {
    event(
        "content_block_start",
        &format!(r#"{{"type":"content_block_start","index":{index},"content_block":{block}}}"#),
    )
}

/// A `text_delta` of block `index`.
pub fn text_delta(index: u32, text: &str) -> String {
    let text = serde_json::json!(text);
    delta(index, &format!(r#"{{"type":"text_delta","text":{text}}}"#))
}

/// An `input_json_delta` of block `index`.
pub fn json_delta(index: u32, partial: &str) -> String {
    let partial = serde_json::json!(partial);
    delta(
        index,
        &format!(r#"{{"type":"input_json_delta","partial_json":{partial}}}"#),
    )
}

/// `content_block_stop` of block `index`.
pub fn block_stop(index: u32) -> String {
    event(
        "content_block_stop",
        &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
    )
}

/// `message_delta` with the stop reason and cumulative output tokens.
pub fn message_delta(stop_reason: &str, output_tokens: u64) -> String {
    event(
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop_reason}","stop_sequence":null}},"usage":{{"output_tokens":{output_tokens}}}}}"#
        ),
    )
}

/// `message_stop`.
pub fn message_stop() -> String {
    event("message_stop", r#"{"type":"message_stop"}"#)
}

/// `ping`.
pub fn ping() -> String {
    event("ping", r#"{"type": "ping"}"#)
}

/// A `content_block_delta` of block `index` with this `delta` object.
pub fn delta(index: u32, delta: &str) -> String {
    event(
        "content_block_delta",
        &format!(r#"{{"type":"content_block_delta","index":{index},"delta":{delta}}}"#),
    )
}

//! Entry points for the fuzzers (`fuzz/`) and the regression tests of what they found: not
//! an API. They panic on what they find, which is how a fuzzer learns of it.

use prost::Message;

use super::codec::Counted;
use super::decode;
use crate::pb;
use crate::runtime::Runtime;
use crate::runtime::limits::{
    MAX_CAPABILITIES, MAX_CONTENT_PARTS, MAX_CONTENT_PARTS_IN_ALL, MAX_LABELS,
    MAX_MESSAGE_TOOL_CALLS, MAX_MESSAGES, MAX_STOP_SEQUENCES, MAX_TOOL_CALLS_IN_ALL, MAX_TOOLS,
};

/// A request's bytes as the server takes them: counted on the wire, decoded, converted and
/// validated against `runtime`'s config. Panics if one of them does, or if a request the
/// wire count let through decodes to lists over their caps (the count is what keeps decoding
/// from building more than a request's size warrants).
pub fn request(runtime: &Runtime, bytes: &[u8]) {
    if pb::ExecuteRequest::count(bytes).is_err() {
        return;
    }
    let Ok(wire) = pb::ExecuteRequest::decode(bytes) else {
        return;
    };
    within_caps(&wire);
    if let Ok(request) = decode::execute_request(wire) {
        let _ = runtime.check(&request);
    }
}

fn within_caps(wire: &pb::ExecuteRequest) {
    let at_most = |len: usize, max: usize, what: &str| {
        assert!(
            len <= max,
            "the wire count let {len} {what} through (at most {max})"
        );
    };
    if let Some(input) = &wire.input {
        at_most(input.messages.len(), MAX_MESSAGES, "messages");
        for m in &input.messages {
            at_most(m.content.len(), MAX_CONTENT_PARTS, "parts in a message");
            at_most(
                m.tool_calls.len(),
                MAX_MESSAGE_TOOL_CALLS,
                "tool calls in a message",
            );
        }
        let parts = input.messages.iter().map(|m| m.content.len()).sum();
        at_most(parts, MAX_CONTENT_PARTS_IN_ALL, "parts");
        let calls = input.messages.iter().map(|m| m.tool_calls.len()).sum();
        at_most(calls, MAX_TOOL_CALLS_IN_ALL, "tool calls");
        at_most(input.tools.len(), MAX_TOOLS, "tools");
        let stops = input
            .parameters
            .as_ref()
            .map_or(0, |p| p.stop_sequences.len());
        at_most(stops, MAX_STOP_SEQUENCES, "stop sequences");
    }
    let capabilities = wire
        .requirements
        .as_ref()
        .map_or(0, |r| r.capabilities.len());
    at_most(capabilities, MAX_CAPABILITIES, "capabilities");
    at_most(wire.labels.len(), MAX_LABELS, "labels");
}

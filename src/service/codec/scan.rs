//! Counting an `ExecuteRequest`'s lists on the wire: a walk over the protobuf encoding that
//! reads only keys and lengths, allocates nothing, and stops at the first malformed byte
//! (decoding then refuses the message). Fields repeated across several occurrences of a
//! message field count together, as decoding merges them.

use tonic::Status;

use crate::pb::fields::{
    execute_request, execution_input, generation_parameters, message, requirements,
};
use crate::runtime::limits::{
    MAX_CAPABILITIES, MAX_CONTENT_PARTS, MAX_CONTENT_PARTS_IN_ALL, MAX_LABELS,
    MAX_MESSAGE_TOOL_CALLS, MAX_MESSAGES, MAX_STOP_SEQUENCES, MAX_TOOL_CALLS_IN_ALL, MAX_TOOLS,
};
use crate::runtime::{RuntimeError, Violations};
use crate::service::status::to_status;

/// Calls `field` with the number and bytes of each length-delimited field of one encoded
/// message, in order, and skips the others; stops at the first malformed byte.
fn walk<'a>(mut buf: &'a [u8], mut field: impl FnMut(u32, &'a [u8])) {
    while let Some(key) = varint(&mut buf) {
        let Ok(number) = u32::try_from(key >> 3) else {
            return;
        };
        let skipped = match key & 7 {
            0 => varint(&mut buf).map(drop),
            1 => skip(&mut buf, 8).map(drop),
            5 => skip(&mut buf, 4).map(drop),
            2 => varint(&mut buf)
                .and_then(|len| usize::try_from(len).ok())
                .and_then(|len| skip(&mut buf, len))
                .map(|bytes| field(number, bytes)),
            // Groups are not in this schema: the decoder refuses them.
            _ => None,
        };
        if skipped.is_none() {
            return;
        }
    }
}

/// A base-128 varint, at most ten bytes; `None` at the end or on a malformed one.
fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, byte) in buf.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Some(value);
        }
    }
    None
}

fn skip<'a>(buf: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let (head, rest) = buf.split_at_checked(len)?;
    *buf = rest;
    Some(head)
}

/// How many times length-delimited field `number` occurs in `buf`.
fn occurrences(buf: &[u8], number: u32) -> usize {
    let mut count = 0;
    walk(buf, |n, _| count += usize::from(n == number));
    count
}

/// Counts of the lists an `ExecuteRequest` holds.
#[derive(Default)]
struct Counts {
    messages: usize,
    parts: usize,
    tool_calls: usize,
    tools: usize,
    stop_sequences: usize,
    capabilities: usize,
    labels: usize,
    /// The first message over a per-message cap, with its count.
    parts_in_one: Option<(usize, usize)>,
    calls_in_one: Option<(usize, usize)>,
}

fn count(request: &[u8]) -> Counts {
    let mut counts = Counts::default();
    walk(request, |number, bytes| match number {
        execute_request::REQUIREMENTS => {
            counts.capabilities += occurrences(bytes, requirements::CAPABILITIES);
        }
        execute_request::LABELS => counts.labels += 1,
        execute_request::INPUT => input(bytes, &mut counts),
        _ => {}
    });
    counts
}

fn input(bytes: &[u8], counts: &mut Counts) {
    walk(bytes, |number, bytes| match number {
        execution_input::MESSAGES => {
            let index = counts.messages;
            counts.messages += 1;
            let (mut parts, mut calls) = (0, 0);
            walk(bytes, |number, _| match number {
                message::CONTENT => parts += 1,
                message::TOOL_CALLS => calls += 1,
                _ => {}
            });
            counts.parts += parts;
            counts.tool_calls += calls;
            if parts > MAX_CONTENT_PARTS && counts.parts_in_one.is_none() {
                counts.parts_in_one = Some((index, parts));
            }
            if calls > MAX_MESSAGE_TOOL_CALLS && counts.calls_in_one.is_none() {
                counts.calls_in_one = Some((index, calls));
            }
        }
        execution_input::TOOLS => counts.tools += 1,
        execution_input::PARAMETERS => {
            counts.stop_sequences += occurrences(bytes, generation_parameters::STOP_SEQUENCES);
        }
        _ => {}
    });
}

/// Refuses an `ExecuteRequest` whose lists are over their caps, naming each list once.
pub(super) fn execute_request(bytes: &[u8]) -> Result<(), Status> {
    let counts = count(bytes);
    let mut v = Violations::new();
    let mut over = |field: String, len: usize, max: usize, what: &str| {
        if len > max {
            v.push(
                field,
                format!("has {len} {what}; at most {max} are allowed"),
            );
        }
    };
    over(
        "input.messages".into(),
        counts.messages,
        MAX_MESSAGES,
        "entries",
    );
    if let Some((i, parts)) = counts.parts_in_one {
        let field = format!("input.messages[{i}].content");
        over(field, parts, MAX_CONTENT_PARTS, "entries");
    }
    // The list already named for its length is not named again for what it holds in all.
    let messages_fit = counts.messages <= MAX_MESSAGES;
    if messages_fit {
        over(
            "input.messages".into(),
            counts.parts,
            MAX_CONTENT_PARTS_IN_ALL,
            "content parts in all",
        );
    }
    if let Some((i, calls)) = counts.calls_in_one {
        let field = format!("input.messages[{i}].tool_calls");
        over(field, calls, MAX_MESSAGE_TOOL_CALLS, "entries");
    }
    if messages_fit {
        over(
            "input.messages".into(),
            counts.tool_calls,
            MAX_TOOL_CALLS_IN_ALL,
            "tool calls in all",
        );
    }
    over("input.tools".into(), counts.tools, MAX_TOOLS, "entries");
    over(
        "input.parameters.stop_sequences".into(),
        counts.stop_sequences,
        MAX_STOP_SEQUENCES,
        "entries",
    );
    over(
        "requirements.capabilities".into(),
        counts.capabilities,
        MAX_CAPABILITIES,
        "entries",
    );
    over("labels".into(), counts.labels, MAX_LABELS, "entries");
    if v.is_empty() {
        return Ok(());
    }
    Err(to_status(RuntimeError::InvalidArgument(v)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use prost::Message;
    use tonic_types::StatusExt;

    use super::*;
    use crate::pb;

    fn with_messages(messages: Vec<pb::Message>) -> pb::ExecuteRequest {
        pb::ExecuteRequest {
            ability: "chat".into(),
            input: Some(pb::ExecutionInput {
                messages,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn parts(n: usize) -> pb::Message {
        pb::Message {
            content: vec![pb::ContentPart::default(); n],
            ..Default::default()
        }
    }

    /// The violations of the encoded request, as `field: description`.
    fn violations(request: &pb::ExecuteRequest) -> Vec<String> {
        let Err(status) = execute_request(&request.encode_to_vec()) else {
            return Vec::new();
        };
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let details = status.get_error_details();
        let bad = details.bad_request().expect("a BadRequest");
        bad.field_violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect()
    }

    #[test]
    fn lists_at_their_caps_pass() {
        let mut request = with_messages(vec![pb::Message::default(); MAX_MESSAGES]);
        request.input.as_mut().unwrap().messages[0] = parts(MAX_CONTENT_PARTS);
        request.requirements = Some(pb::Requirements {
            capabilities: vec![String::new(); MAX_CAPABILITIES],
        });
        request.labels = (0..MAX_LABELS)
            .map(|i| (i.to_string(), String::new()))
            .collect();
        assert_eq!(violations(&request), Vec::<String>::new());
    }

    #[test]
    fn each_list_over_its_cap_is_named_once() {
        let mut request = with_messages(vec![pb::Message::default(); MAX_MESSAGES + 1]);
        request.input.as_mut().unwrap().messages[3] = parts(MAX_CONTENT_PARTS + 1);
        request.requirements = Some(pb::Requirements {
            capabilities: vec![String::new(); 10_000],
        });
        let input = request.input.as_mut().unwrap();
        input.tools = vec![pb::ToolDefinition::default(); MAX_TOOLS + 1];
        input.parameters = Some(pb::GenerationParameters {
            stop_sequences: vec![String::new(); MAX_STOP_SEQUENCES + 1],
            ..Default::default()
        });
        assert_eq!(
            violations(&request),
            [
                "input.messages: has 10001 entries; at most 10000 are allowed",
                "input.messages[3].content: has 1001 entries; at most 1000 are allowed",
                "input.tools: has 257 entries; at most 256 are allowed",
                "input.parameters.stop_sequences: has 17 entries; at most 16 are allowed",
                "requirements.capabilities: has 10000 entries; at most 64 are allowed",
            ]
        );
    }

    #[test]
    fn parts_and_tool_calls_count_in_all() {
        let request = with_messages(vec![parts(600); 20]);
        assert_eq!(
            violations(&request),
            ["input.messages: has 12000 content parts in all; at most 10000 are allowed"]
        );
        let calls = pb::Message {
            tool_calls: vec![pb::ToolCall::default(); 200],
            ..Default::default()
        };
        let request = with_messages(vec![calls; 51]);
        assert_eq!(
            violations(&request),
            ["input.messages: has 10200 tool calls in all; at most 10000 are allowed"]
        );
    }

    #[test]
    fn repeated_occurrences_of_a_message_field_count_together() {
        // Decoding merges the two `input`s: so does the count.
        let half = with_messages(vec![pb::Message::default(); 6_000]).encode_to_vec();
        let twice = [half.as_slice(), half.as_slice()].concat();
        let count = count(&twice);
        assert_eq!(count.messages, 12_000);
        assert!(execute_request(&twice).is_err());
    }

    #[test]
    fn malformed_bytes_are_left_to_the_decoder() {
        for bytes in [
            &[0xff][..],
            &[0x1a, 0x05, 0x0a],
            &[0x0b],
            &[0x1a, 0xff, 0xff, 0xff],
        ] {
            assert!(execute_request(bytes).is_ok(), "{bytes:?}");
            assert!(pb::ExecuteRequest::decode(bytes).is_err(), "{bytes:?}");
        }
    }
}

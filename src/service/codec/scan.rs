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

/// How deep groups may nest, as deep as prost decodes them.
const MAX_DEPTH: u32 = 100;

/// Calls `field` with the number and bytes of each length-delimited field of one encoded
/// message, in order, and skips the others; stops at the first malformed byte, where the
/// decoder will refuse the message.
fn walk<'a>(mut buf: &'a [u8], mut field: impl FnMut(u32, &'a [u8])) {
    while let Some(item) = item(&mut buf, 0) {
        match item {
            Item::Field(number, Some(bytes)) => field(number, bytes),
            Item::Field(_, None) => {}
            Item::EndGroup(_) => return,
        }
    }
}

/// What comes next in an encoded message.
enum Item<'a> {
    /// A field's number, and its bytes when length-delimited.
    Field(u32, Option<&'a [u8]>),
    /// The end of the group of this number.
    EndGroup(u32),
}

#[inline]
fn item<'a>(buf: &mut &'a [u8], depth: u32) -> Option<Item<'a>> {
    let key = varint(buf)?;
    let number = u32::try_from(key >> 3).ok()?;
    let bytes = match key & 7 {
        0 => varint(buf).map(|_| None)?,
        1 => skip(buf, 8).map(|_| None)?,
        5 => skip(buf, 4).map(|_| None)?,
        2 => {
            let len = usize::try_from(varint(buf)?).ok()?;
            Some(skip(buf, len)?)
        }
        // A group is in no message of this schema, but an unknown field may be one, and the
        // decoder skips it whole: so does the walk, or what follows it would go uncounted.
        3 if depth < MAX_DEPTH => {
            skip_group(buf, number, depth + 1)?;
            None
        }
        4 => return Some(Item::EndGroup(number)),
        _ => return None,
    };
    Some(Item::Field(number, bytes))
}

/// Skips to the end of the group `number` began.
fn skip_group(buf: &mut &[u8], number: u32, depth: u32) -> Option<()> {
    loop {
        match item(buf, depth)? {
            Item::EndGroup(end) => return (end == number).then_some(()),
            Item::Field(..) => {}
        }
    }
}

/// A base-128 varint, at most ten bytes; `None` at the end or on a malformed one.
#[inline]
fn varint(buf: &mut &[u8]) -> Option<u64> {
    // Keys and short lengths, nearly all of them: one byte.
    if let Some((&byte, rest)) = buf.split_first()
        && byte < 0x80
    {
        *buf = rest;
        return Some(u64::from(byte));
    }
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
    over(
        &mut v,
        "input.messages",
        counts.messages,
        MAX_MESSAGES,
        "entries",
    );
    if let Some((i, parts)) = counts.parts_in_one {
        let field = format!("input.messages[{i}].content");
        over(&mut v, field, parts, MAX_CONTENT_PARTS, "entries");
    }
    // The list already named for its length is not named again for what it holds in all.
    let messages_fit = counts.messages <= MAX_MESSAGES;
    if messages_fit {
        let (parts, max) = (counts.parts, MAX_CONTENT_PARTS_IN_ALL);
        over(&mut v, "input.messages", parts, max, "content parts in all");
    }
    if let Some((i, calls)) = counts.calls_in_one {
        let field = format!("input.messages[{i}].tool_calls");
        over(&mut v, field, calls, MAX_MESSAGE_TOOL_CALLS, "entries");
    }
    if messages_fit {
        let (calls, max) = (counts.tool_calls, MAX_TOOL_CALLS_IN_ALL);
        over(&mut v, "input.messages", calls, max, "tool calls in all");
    }
    over(&mut v, "input.tools", counts.tools, MAX_TOOLS, "entries");
    over(
        &mut v,
        "input.parameters.stop_sequences",
        counts.stop_sequences,
        MAX_STOP_SEQUENCES,
        "entries",
    );
    over(
        &mut v,
        "requirements.capabilities",
        counts.capabilities,
        MAX_CAPABILITIES,
        "entries",
    );
    over(&mut v, "labels", counts.labels, MAX_LABELS, "entries");
    if v.is_empty() {
        return Ok(());
    }
    Err(to_status(RuntimeError::InvalidArgument(v)))
}

/// A violation of `field` when it holds `len` of `what`, over `max`. The field's name
/// becomes a `String` only then: a request within its caps allocates nothing here.
fn over(v: &mut Violations, field: impl Into<String>, len: usize, max: usize, what: &str) {
    if len > max {
        v.push(
            field,
            format!("has {len} {what}; at most {max} are allowed"),
        );
    }
}

#[cfg(test)]
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
    fn an_unknown_group_does_not_hide_what_follows_it() {
        // Field 15 as a group holding a nested group (field 16) and a varint, then the list.
        let group = [0x7b, 0x83, 0x01, 0x08, 0x01, 0x84, 0x01, 0x7c];
        let messages = with_messages(vec![pb::Message::default(); MAX_MESSAGES + 1]);
        let bytes = [&group[..], &messages.encode_to_vec()].concat();
        assert!(pb::ExecuteRequest::decode(bytes.as_slice()).is_ok());
        assert_eq!(count(&bytes).messages, MAX_MESSAGES + 1);
        assert!(execute_request(&bytes).is_err());
        // An end-group of another number ends nothing: malformed, left to the decoder.
        let crossed = [0x7b, 0x84, 0x01];
        assert!(pb::ExecuteRequest::decode(&crossed[..]).is_err());
        assert!(execute_request(&crossed).is_ok());
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

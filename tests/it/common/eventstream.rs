//! AWS event-stream messages (`application/vnd.amazon.eventstream`) written by hand, as
//! Bedrock frames its replies: a prelude of two lengths and their CRC-32, string headers, the
//! JSON payload, and the message's CRC-32. Written here from the format's description rather
//! than with the runtime's own code, so the two check each other.

use super::upstream::{Behaviour, Step};

/// The media type of an event stream.
pub const MEDIA_TYPE: &str = "application/vnd.amazon.eventstream";

/// One message with string `headers` and `payload`.
pub fn message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(u8::try_from(name.len()).unwrap());
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = 16 + head.len() + payload.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap().to_be_bytes());
    out.extend_from_slice(&u32::try_from(head.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}

/// A Converse stream event of type `kind`.
pub fn event(kind: &str, json: &str) -> Vec<u8> {
    message(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        json.as_bytes(),
    )
}

/// An exception of type `kind` (e.g. `throttlingException`).
pub fn exception(kind: &str, json: &str) -> Vec<u8> {
    message(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json.as_bytes(),
    )
}

/// A 200 event stream with one `Send` per message.
pub fn reply(messages: &[Vec<u8>]) -> Behaviour {
    steps(messages.iter().cloned().map(Step::Send).collect())
}

/// A 200 event stream played step by step.
pub fn steps(steps: Vec<Step>) -> Behaviour {
    Behaviour::Reply {
        status: 200,
        headers: vec![("content-type".into(), MEDIA_TYPE.into())],
        steps,
    }
}

use super::*;

/// What the parser makes of `bytes` fed in pieces of `size` bytes: the messages' types and
/// payloads, or its error.
fn feed(bytes: &[u8], size: usize) -> Result<Vec<(String, Vec<u8>)>, EventStreamError> {
    let mut parser = EventStreamParser::default();
    let mut out = Vec::new();
    for piece in bytes.chunks(size.max(1)) {
        parser.push(piece, &mut |m| {
            out.push((m.event_type.to_owned(), m.payload.to_vec()));
        })?;
    }
    Ok(out)
}

fn vector(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/src/provider/eventstream/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

#[test]
fn awss_valid_vectors_decode_in_pieces_of_every_size() {
    for (name, payload) in [
        ("valid_with_all_headers_and_payload", &b"some payload"[..]),
        ("valid_no_headers", b"another test payload"),
        ("valid_empty_payload", b""),
    ] {
        let bytes = vector(name);
        for size in 1..=bytes.len() {
            let messages = feed(&bytes, size).unwrap();
            assert_eq!(
                messages,
                [(String::new(), payload.to_vec())],
                "{name} by {size}"
            );
        }
    }
}

#[test]
fn a_message_with_every_header_type_keeps_its_string_headers() {
    let bytes = vector("valid_with_all_headers_and_payload");
    let mut parser = EventStreamParser::default();
    let mut seen = 0;
    parser
        .push(&bytes, &mut |m| {
            seen += 1;
            assert_eq!(m.payload, b"some payload");
            assert_eq!(m.message_type, "");
        })
        .unwrap();
    assert_eq!(seen, 1);
}

/// The vectors altered a header without a new CRC fail the message CRC, which is checked
/// before anything in the message is read.
#[test]
fn awss_invalid_vectors_are_refused_or_never_complete() {
    for (name, expected) in [
        (
            "invalid_prelude_checksum",
            Err(EventStreamError::PreludeChecksum),
        ),
        (
            "invalid_message_checksum",
            Err(EventStreamError::MessageChecksum),
        ),
        (
            "invalid_header_value_type",
            Err(EventStreamError::MessageChecksum),
        ),
        (
            "invalid_header_string_value_length",
            Err(EventStreamError::MessageChecksum),
        ),
        (
            "invalid_header_name_length",
            Err(EventStreamError::MessageChecksum),
        ),
        (
            "invalid_header_name_length_too_long",
            Err(EventStreamError::MessageChecksum),
        ),
        ("invalid_headers_length", Err(EventStreamError::Length)),
        (
            "invalid_header_string_length_cut_off",
            Err(EventStreamError::MessageChecksum),
        ),
    ] {
        let bytes = vector(name);
        for size in [1, 7, bytes.len()] {
            assert_eq!(feed(&bytes, size), expected, "{name} by {size}");
        }
    }
}

#[test]
fn headers_that_break_the_format_under_a_good_crc_are_refused() {
    let good = encode(&[("h", "v")], b"{}");
    // Each header section below replaces `good`'s, with both CRCs made right for it.
    for headers in [
        &[1, b'h', 0x60][..],            // an unknown value type
        &[1, b'h', 7, 0, 9, b'v'],       // a string longer than the headers
        &[9, b'h', 7, 0, 1, b'v'],       // a name longer than the headers
        &[2, 0xff, 0xfe, 7, 0, 1, b'v'], // a name that is not UTF-8
        &[1, b'h', 7, 0, 1, 0xff],       // a string value that is not UTF-8
    ] {
        let mut message = Vec::new();
        let total = u32::try_from(16 + headers.len() + 2).unwrap();
        message.extend_from_slice(&total.to_be_bytes());
        message.extend_from_slice(&u32::try_from(headers.len()).unwrap().to_be_bytes());
        message.extend_from_slice(&crc32fast::hash(&message).to_be_bytes());
        message.extend_from_slice(headers);
        message.extend_from_slice(b"{}");
        message.extend_from_slice(&crc32fast::hash(&message).to_be_bytes());
        assert_eq!(
            feed(&message, 5),
            Err(EventStreamError::Header),
            "{headers:?}"
        );
    }
    assert_eq!(feed(&good, 5).unwrap().len(), 1);
}

#[test]
fn a_round_trip_keeps_headers_and_payload() {
    let mut bytes = encode(
        &[
            (":message-type", "event"),
            (":event-type", "contentBlockDelta"),
        ],
        br#"{"delta":{"text":"Hi"}}"#,
    );
    bytes.extend(encode(
        &[
            (":message-type", "exception"),
            (":exception-type", "throttlingException"),
        ],
        br#"{"message":"slow down"}"#,
    ));
    let mut parser = EventStreamParser::default();
    let mut out = Vec::new();
    parser
        .push(&bytes, &mut |m| {
            out.push((
                m.message_type.to_owned(),
                m.event_type.to_owned(),
                m.exception_type.to_owned(),
            ));
        })
        .unwrap();
    assert_eq!(
        out,
        [
            ("event".into(), "contentBlockDelta".into(), String::new()),
            (
                "exception".into(),
                String::new(),
                "throttlingException".into()
            ),
        ]
    );
}

#[test]
fn a_wrong_byte_anywhere_is_refused() {
    let bytes = encode(
        &[(":event-type", "messageStop")],
        br#"{"stopReason":"end_turn"}"#,
    );
    for at in 0..bytes.len() {
        let mut broken = bytes.clone();
        broken[at] ^= 0x01;
        // A length made larger waits for bytes that never come: a cut, no message.
        if let Ok(messages) = feed(&broken, bytes.len()) {
            assert!(messages.is_empty(), "byte {at}");
        }
    }
}

#[test]
fn a_prelude_claiming_more_than_the_bound_is_refused_at_once() {
    let mut prelude = (u32::MAX).to_be_bytes().to_vec();
    prelude.extend_from_slice(&0u32.to_be_bytes());
    let crc = crc32fast::hash(&prelude);
    prelude.extend_from_slice(&crc.to_be_bytes());
    assert_eq!(feed(&prelude, 12), Err(EventStreamError::TooLarge));
    // Nothing of it was kept waiting for the rest.
    let mut parser = EventStreamParser::with_limit(64);
    let long = encode(&[], &[b'x'; 100]);
    assert_eq!(
        parser.push(&long[..12], &mut |_| {}),
        Err(EventStreamError::TooLarge)
    );
}

#[test]
fn a_message_cut_short_is_dropped_at_the_end() {
    let bytes = encode(
        &[(":event-type", "messageStart")],
        br#"{"role":"assistant"}"#,
    );
    let mut parser = EventStreamParser::default();
    let mut seen = 0;
    parser
        .push(&bytes[..bytes.len() - 1], &mut |_| seen += 1)
        .unwrap();
    Framing::finish(&mut parser, &mut |_| seen += 1).unwrap();
    assert_eq!(seen, 0);
}

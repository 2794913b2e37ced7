use proptest::prelude::*;

use super::*;

fn parse_pieces<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<OwnedEvent>, SseError> {
    parse_limited(MAX_EVENT_BYTES, pieces)
}

fn parse_limited<'a>(
    limit: usize,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<OwnedEvent>, SseError> {
    let mut parser = SseParser::with_limit(limit);
    let mut out = Vec::new();
    for piece in pieces {
        parser.push(piece, &mut |e| out.push(OwnedEvent::of(e)))?;
    }
    parser.finish(&mut |e| out.push(OwnedEvent::of(e)))?;
    Ok(out)
}

fn parse(text: &str) -> Vec<OwnedEvent> {
    parse_pieces([text.as_bytes()]).unwrap()
}

fn ev(event: Option<&str>, data: &str) -> OwnedEvent {
    OwnedEvent {
        event: event.map(str::to_owned),
        data: data.to_owned(),
    }
}

const SAMPLE: &str = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive comment\n\ndata: one\ndata: two\n\nevent: ping\ndata:{}\n\n";

#[test]
fn parses_named_events_multi_line_data_and_comments() {
    assert_eq!(
        parse(SAMPLE),
        vec![
            ev(Some("message_start"), "{\"a\":1}"),
            ev(None, "one\ntwo"),
            ev(Some("ping"), "{}"),
        ]
    );
}

#[test]
fn crlf_lf_and_cr_line_ends_are_the_same() {
    let lf = parse(SAMPLE);
    assert_eq!(parse(&SAMPLE.replace('\n', "\r\n")), lf);
    assert_eq!(parse(&SAMPLE.replace('\n', "\r")), lf);
}

#[test]
fn any_split_of_the_stream_gives_the_same_events() {
    for text in [
        SAMPLE.to_owned(),
        SAMPLE.replace('\n', "\r\n"),
        SAMPLE.replace('\n', "\r"),
        format!("\u{feff}{SAMPLE}"),
    ] {
        let whole = parse(&text);
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(
                parse_pieces([a, b]).unwrap(),
                whole,
                "cut at {cut} of {text:?}"
            );
        }
        let one_by_one = parse_pieces(bytes.chunks(1)).unwrap();
        assert_eq!(one_by_one, whole);
    }
}

#[test]
fn field_rules_follow_the_format() {
    // One leading space is removed, not two; a line without a colon is a field with no value;
    // `id`, `retry` and unknown fields are ignored; an event without data is not dispatched and
    // does not leak its type into the next one.
    let text =
        "data:  two spaces\n\ndata\n\nid: 7\nretry: 10\nfoo: bar\nevent: lonely\n\ndata: x\n\n";
    assert_eq!(
        parse(text),
        vec![ev(None, " two spaces"), ev(None, ""), ev(None, "x")]
    );
}

#[test]
fn a_byte_order_mark_at_the_start_is_skipped() {
    assert_eq!(parse("\u{feff}data: hi\n\n"), vec![ev(None, "hi")]);
    // Only there: further on it is part of a field's name (an unknown one, ignored), even
    // after an event that went out from where it lay.
    assert_eq!(
        parse("data: hi\n\n\u{feff}data: later\n\n"),
        vec![ev(None, "hi")]
    );
}

/// At a whole body's end, an event whose last line is complete goes out without its blank
/// line; one whose last line was cut short is dropped.
#[test]
fn at_the_end_an_event_of_complete_lines_goes_out_and_a_cut_one_is_dropped() {
    assert_eq!(parse("data: done\n\ndata: half"), vec![ev(None, "done")]);
    assert_eq!(
        parse("data: done\n\ndata: last\n"),
        vec![ev(None, "done"), ev(None, "last")]
    );
    assert_eq!(
        parse("data: done\n\ndata: last\r"),
        vec![ev(None, "done"), ev(None, "last")]
    );
}

#[test]
fn large_events_in_small_pieces() {
    let payload = "x".repeat(1000 * 1024);
    let text = format!("data: {payload}\n\ndata: after\n\n");
    let events = parse_pieces(text.as_bytes().chunks(1500)).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].data.len(), payload.len());
    assert_eq!(events[1].data, "after");
}

#[test]
fn invalid_utf8_is_malformed_and_keeps_the_line_for_the_log() {
    let error = parse_pieces([&b"data: ok\n\ndata: \xff\xfe bad\n\n"[..]]).unwrap_err();
    match &error {
        SseError::InvalidUtf8 { line } => assert!(line.starts_with("data: "), "{line}"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(!error.what().contains("bad"));
    let error = parse_pieces([&b"event: \xff\n"[..]]).unwrap_err();
    assert!(matches!(error, SseError::InvalidUtf8 { .. }), "{error:?}");
}

#[test]
fn an_ignored_line_is_ignored_whatever_its_bytes() {
    let events = parse_pieces([&b": \xff comment\nid: \xfe\n\xff: x\ndata: ok\n\n"[..]]).unwrap();
    assert_eq!(events, vec![ev(None, "ok")]);
}

#[test]
fn lines_and_events_past_the_limit_are_malformed() {
    let mut parser = SseParser::with_limit(16);
    let mut out = Vec::new();
    assert_eq!(
        parser.push(&[b'a'; 17], &mut |e| out.push(OwnedEvent::of(e))),
        Err(SseError::TooLarge)
    );
    let mut parser = SseParser::with_limit(16);
    let many = "data: 12345\n".repeat(4);
    assert_eq!(
        parser.push(many.as_bytes(), &mut |e| out.push(OwnedEvent::of(e))),
        Err(SseError::TooLarge)
    );
    assert!(out.is_empty());
}

#[test]
fn the_default_limit_is_one_mebibyte_for_data_and_line_together() {
    let mut parser = SseParser::default();
    let mut out = Vec::new();
    let line = vec![b'x'; 1024 * 1024 + 1];
    assert_eq!(
        parser.push(&line, &mut |e| out.push(OwnedEvent::of(e))),
        Err(SseError::TooLarge)
    );
    // Half a MiB of data gathered, and a line of more than the rest still coming: too large
    // together, though each alone would fit.
    let mut parser = SseParser::default();
    let half = format!("data: {}\n", "y".repeat(512 * 1024));
    assert_eq!(
        parser.push(half.as_bytes(), &mut |e| out.push(OwnedEvent::of(e))),
        Ok(())
    );
    let rest = vec![b'z'; 600 * 1024];
    assert_eq!(
        parser.push(&rest, &mut |e| out.push(OwnedEvent::of(e))),
        Err(SseError::TooLarge)
    );
    assert!(out.is_empty());
    // Events of 900 KiB each pass, one after another: whole (read where they lie), then in
    // pieces (gathered in the parser's line buffer and its data).
    let mut parser = SseParser::default();
    let event = format!("data: {}\n\n", "w".repeat(900 * 1024));
    for piece in [event.len(), 64 * 1024, 64 * 1024] {
        for piece in event.as_bytes().chunks(piece) {
            assert_eq!(
                parser.push(piece, &mut |e| out.push(OwnedEvent::of(e))),
                Ok(())
            );
        }
    }
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|e| e.data.len() == 900 * 1024));
    // Once they are out, their memory is let go: a call keeps what a usual event needs.
    assert!(parser.data.capacity() <= KEPT_BYTES && parser.buf.capacity() <= KEPT_BYTES);
}

/// Lines an event stream is made of, each with its own line end: every field the parser
/// tells apart, and bytes that are not UTF-8.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just(&b""[..]),
        Just(&b"data: {\"a\":1}"[..]),
        Just(&b"data:x"[..]),
        Just(&b"data:  two"[..]),
        Just(&b"data"[..]),
        Just(&b"data: "[..]),
        Just(&b"data:"[..]),
        Just(&b"data: \xff"[..]),
        Just(&b"event: ping"[..]),
        Just(&b"event: \xfe"[..]),
        Just(&b": comment \xff"[..]),
        Just(&b"id: 7"[..]),
        Just(&b"\xef\xbb\xbfdata: bom"[..]),
    ];
    let end = prop_oneof![Just(&b"\n"[..]), Just(&b"\r\n"[..]), Just(&b"\r"[..])];
    prop::collection::vec((line, end), 0..24).prop_map(|lines| {
        lines
            .into_iter()
            .flat_map(|(line, end)| [line, end].concat())
            .collect()
    })
}

proptest! {
    /// Read whole, an event of one data line and its blank line goes out from the piece
    /// itself; read a byte at a time, every event is gathered line by line. Both give the
    /// same events, or the same error, and so does the stream cut anywhere (where an event
    /// may go out from the parser's own buffer, the rest of its line having come before),
    /// under the default limit and under limits the lines reach.
    #[test]
    fn an_event_read_in_place_is_the_event_gathered(
        text in stream(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        limit in prop_oneof![Just(MAX_EVENT_BYTES), 1..48usize],
    ) {
        let one_by_one = parse_limited(limit, text.chunks(1));
        prop_assert_eq!(&parse_limited(limit, [&text[..]]), &one_by_one);
        let mut at: Vec<usize> = cuts.iter().map(|cut| cut.index(text.len() + 1)).collect();
        at.sort_unstable();
        let ends = at.iter().copied().chain([text.len()]);
        let pieces = [0].into_iter().chain(at.iter().copied()).zip(ends);
        let cut = parse_limited(limit, pieces.map(|(from, to)| &text[from..to]));
        prop_assert_eq!(cut, one_by_one);
    }
}

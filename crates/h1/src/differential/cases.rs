//! The corpus: what a server sends to the first request, what the runtime's client makes of
//! it, and, where hyper makes something else of it on purpose, what and why. Every row of
//! `docs/h1.md` is held by a case here.

use super::Outcome;

pub(super) struct Case {
    pub name: String,
    /// What the server sends in answer to the first request.
    pub bytes: Vec<u8>,
    /// Whether the server closes the connection after them.
    pub closes: bool,
    /// What the runtime's client makes of them.
    pub ours: Outcome,
    /// What hyper makes of them, and why the client differs, where it does.
    pub hyper: Option<(Outcome, &'static str)>,
}

/// A body that ended cleanly; `reused`: the connection carried the next request.
fn ok(status: u16, body: &str, reused: bool) -> Outcome {
    Outcome {
        status: Some(status),
        body: body.into(),
        ended: true,
        reused,
    }
}

/// A body that broke after `body`.
fn broken(status: u16, body: &str) -> Outcome {
    Outcome {
        status: Some(status),
        body: body.into(),
        ended: false,
        reused: false,
    }
}

/// No head was taken.
fn refused() -> Outcome {
    Outcome {
        status: None,
        body: String::new(),
        ended: false,
        reused: false,
    }
}

/// `head` (lines joined with CRLF, then an empty line) and `body`.
fn message(head: &[&str], body: &str) -> Vec<u8> {
    let mut bytes = head.join("\r\n").into_bytes();
    bytes.extend_from_slice(b"\r\n\r\n");
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// A 200 with the `extra` header lines, and `body`.
fn sized(extra: &[&str], body: &str) -> Vec<u8> {
    let mut head = vec!["HTTP/1.1 200 OK"];
    head.extend_from_slice(extra);
    message(&head, body)
}

/// A chunked 200 of `body` (its chunks, as the server frames them).
fn chunked(body: &str) -> Vec<u8> {
    message(&["HTTP/1.1 200 OK", "Transfer-Encoding: chunked"], body)
}

/// A 200 with one filler header of `size` bytes.
fn large(size: usize) -> Vec<u8> {
    let filler = format!("X-Filler: {}", "a".repeat(size));
    message(&["HTTP/1.1 200 OK", &filler, "Content-Length: 0"], "")
}

struct Cases(Vec<Case>);

impl Cases {
    /// A case hyper reads the same.
    fn same(&mut self, name: &str, bytes: Vec<u8>, closes: bool, ours: Outcome) -> &mut Self {
        self.0.push(Case {
            name: name.into(),
            bytes,
            closes,
            ours,
            hyper: None,
        });
        self
    }

    /// A case hyper reads as `hyper`, and why the client reads it differently.
    fn differs(
        &mut self,
        name: &str,
        bytes: Vec<u8>,
        closes: bool,
        (ours, hyper): (Outcome, Outcome),
        why: &'static str,
    ) -> &mut Self {
        self.same(name, bytes, closes, ours);
        if let Some(case) = self.0.last_mut() {
            case.hyper = Some((hyper, why));
        }
        self
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "a corpus: one response per case, read top to bottom"
)]
pub(super) fn all() -> Vec<Case> {
    let mut cases = Cases(Vec::new());
    let (keep, close) = (false, true);
    // Valid responses.
    cases
        .same(
            "sized",
            sized(&["Content-Length: 5"], "hello"),
            keep,
            ok(200, "hello", true),
        )
        .same(
            "equal duplicate lengths",
            sized(&["Content-Length: 5", "Content-Length: 5, 5"], "hello"),
            keep,
            ok(200, "hello", true),
        )
        .same(
            "chunked with extensions and trailers",
            chunked("5;a=b\r\nhello\r\n6 ; x=\"y z\"\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"),
            keep,
            ok(200, "hello world", true),
        )
        .same(
            "chunk sizes with leading zeros and upper-case hex",
            chunked("00A\r\n0123456789\r\n0000\r\n\r\n"),
            keep,
            ok(200, "0123456789", true),
        )
        .same(
            "chunk size with whitespace before the line end",
            chunked("2 \t\r\nhi\r\n0\r\n\r\n"),
            keep,
            ok(200, "hi", true),
        )
        .same(
            "close-delimited",
            message(&["HTTP/1.1 200 OK"], "until the close"),
            close,
            ok(200, "until the close", false),
        )
        .same(
            "interim responses before the final one",
            [
                &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"[..],
                &sized(&["Content-Length: 2"], "ok"),
            ]
            .concat(),
            keep,
            ok(200, "ok", true),
        )
        .same(
            "204",
            message(&["HTTP/1.1 204 No Content"], ""),
            keep,
            ok(204, "", true),
        )
        .same(
            "304 with the representation's length",
            message(&["HTTP/1.1 304 Not Modified", "Content-Length: 100"], ""),
            keep,
            ok(304, "", true),
        )
        .same(
            "HTTP/1.0 keep-alive",
            message(
                &[
                    "HTTP/1.0 200 OK",
                    "Connection: keep-alive",
                    "Content-Length: 2",
                ],
                "ok",
            ),
            keep,
            ok(200, "ok", true),
        )
        .same(
            "HTTP/1.0 without keep-alive",
            message(&["HTTP/1.0 200 OK", "Content-Length: 2"], "ok"),
            close,
            ok(200, "ok", false),
        )
        .same(
            "HTTP/1.0 close-delimited",
            message(&["HTTP/1.0 200 OK"], "until the close"),
            close,
            ok(200, "until the close", false),
        )
        .same(
            "Connection: close",
            sized(&["Connection: close", "Content-Length: 2"], "ok"),
            close,
            ok(200, "ok", false),
        )
        .same(
            "keep-alive then close",
            sized(
                &[
                    "Connection: keep-alive",
                    "Connection: close",
                    "Content-Length: 2",
                ],
                "ok",
            ),
            close,
            ok(200, "ok", false),
        )
        .same(
            "bare LF line ends in the head",
            b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok".to_vec(),
            keep,
            ok(200, "ok", true),
        );
    malformed(&mut cases);
    cases.0
}

#[expect(
    clippy::too_many_lines,
    reason = "a corpus: one malformed response per case, read top to bottom"
)]
fn malformed(cases: &mut Cases) {
    let (keep, close) = (false, true);
    let many: Vec<String> = (0..101).map(|i| format!("X-{i}: v")).collect();
    let many_headers: Vec<&str> = std::iter::once("HTTP/1.1 200 OK")
        .chain(many.iter().map(String::as_str))
        .collect();
    // Chunked framing: every line ends in CRLF, a size is hex digits that fit 64 bits.
    for (name, body) in [
        (
            "bare CR in a chunk-size line",
            "2\r\nhi\r\n2\rxx\nhi\r\n0\r\n\r\n",
        ),
        (
            "bare CR in a chunk extension",
            "2\r\nhi\r\n2;a\rb\r\nhi\r\n0\r\n\r\n",
        ),
        (
            "bare LF ending a chunk-size line",
            "2\r\nhi\r\n2\nhi\r\n0\r\n\r\n",
        ),
        (
            "bare LF in a chunk extension",
            "2\r\nhi\r\n2;a\nhi\r\n0\r\n\r\n",
        ),
        ("bare LF after chunk data", "2\r\nhi\n2\r\nhi\r\n0\r\n\r\n"),
        ("bare CR in a trailer", "2\r\nhi\r\n0\r\nX: a\rb\r\n\r\n"),
        ("bare LF in a trailer", "2\r\nhi\r\n0\r\nX: a\nY: b\r\n\r\n"),
        (
            "junk after a chunk size",
            "2\r\nhi\r\n2 3\r\nhi\r\n0\r\n\r\n",
        ),
        ("chunk size overflow", "2\r\nhi\r\n10000000000000000\r\n"),
        ("negative chunk size", "2\r\nhi\r\n-2\r\nhi\r\n0\r\n\r\n"),
        (
            "hex-invalid chunk size",
            "2\r\nhi\r\n0x2\r\nhi\r\n0\r\n\r\n",
        ),
        ("empty chunk size", "2\r\nhi\r\n\r\nhi\r\n0\r\n\r\n"),
        ("chunk data past its size", "2\r\nhiX\r\n0\r\n\r\n"),
        ("cut chunked body", "2\r\nhi\r\n5\r\n"),
    ] {
        cases.same(name, chunked(body), close, broken(200, "hi"));
    }
    cases
        .same(
            "bare LF ending the trailers",
            chunked("2\r\nhi\r\n0\r\n\n"),
            close,
            broken(200, "hi"),
        )
        .differs(
            "chunk extensions past 16 KiB in all",
            chunked(&format!(
                "{}0\r\n\r\n",
                format!("1;{}\r\na\r\n", "x".repeat(1000)).repeat(20)
            )),
            keep,
            (ok(200, &"a".repeat(20), true), broken(200, &"a".repeat(16))),
            "each line is bounded (the decoder keeps none of it); hyper also bounds them body-wide, which would cut a long stream that extends every chunk",
        )
        .differs(
            "101 trailer fields",
            chunked(&format!("2\r\nhi\r\n0\r\n{}\r\n", "X-T: v\r\n".repeat(101))),
            keep,
            (ok(200, "hi", true), broken(200, "hi")),
            "trailers are skipped, never kept, so only their 16 KiB matter; hyper keeps them, and bounds their count as a head's",
        );
    // Head framing.
    for (name, head) in [
        (
            "conflicting lengths",
            &["Content-Length: 2", "Content-Length: 3"][..],
        ),
        (
            "conflicting lengths in one field",
            &["Content-Length: 2, 3"],
        ),
        ("negative length", &["Content-Length: -1"]),
        ("length overflow", &["Content-Length: 18446744073709551616"]),
        ("empty length", &["Content-Length:"]),
        ("obs-fold", &["X-A: b", " c", "Content-Length: 2"]),
        ("space before the colon", &["Content-Length : 2"]),
        ("bare CR in the head", &["X-A: b\rc", "Content-Length: 2"]),
    ] {
        cases.same(name, sized(head, "ok"), close, refused());
    }
    cases
        .same(
            "status below 100",
            message(&["HTTP/1.1 099 Odd", "Content-Length: 2"], "ok"),
            close,
            refused(),
        )
        .same(
            "HTTP/2.0 status line",
            message(&["HTTP/2.0 200 OK", "Content-Length: 2"], "ok"),
            close,
            refused(),
        )
        .same(
            "cut head",
            b"HTTP/1.1 200 OK\r\nContent-Le".to_vec(),
            close,
            refused(),
        )
        .same(
            "cut sized body",
            sized(&["Content-Length: 10"], "short"),
            close,
            broken(200, "short"),
        )
        .same(
            "bytes after the body",
            sized(
                &["Content-Length: 2"],
                "okHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1",
            ),
            keep,
            ok(200, "ok", false),
        )
        .same(
            "204 with a body",
            message(&["HTTP/1.1 204 No Content", "Content-Length: 5"], "hello"),
            keep,
            ok(204, "", false),
        )
        .same(
            "head past hyper's bound too",
            large(500 * 1024),
            keep,
            refused(),
        )
        .same(
            "too many headers",
            message(&many_headers, ""),
            keep,
            refused(),
        )
        .differs(
            "Content-Length with chunked",
            sized(
                &["Content-Length: 2", "Transfer-Encoding: chunked"],
                "2\r\nhi\r\n0\r\n\r\n",
            ),
            keep,
            (ok(200, "hi", false), ok(200, "hi", true)),
            "read as chunked (RFC 9112 section 6.3), but never reused: whoever framed it may frame the next one by its length",
        )
        .differs(
            "Transfer-Encoding in HTTP/1.0",
            message(
                &["HTTP/1.0 200 OK", "Transfer-Encoding: chunked"],
                "2\r\nhi\r\n0\r\n\r\n",
            ),
            close,
            (ok(200, "hi", false), refused()),
            "RFC 9112 section 6.1: faulty framing, to be processed and the connection closed after; hyper refuses it",
        )
        .differs(
            "Transfer-Encoding other than chunked",
            sized(&["Transfer-Encoding: gzip"], "xyz"),
            close,
            (refused(), ok(200, "xyz", false)),
            "the client asks for no coding and decodes none: the SSE parser would get coded bytes; hyper reads them until the close",
        )
        .differs(
            "chunked after another coding",
            sized(
                &["Transfer-Encoding: gzip, chunked"],
                "2\r\nhi\r\n0\r\n\r\n",
            ),
            keep,
            (refused(), ok(200, "hi", true)),
            "under the chunks the body is still coded, which the client cannot read; hyper hands the coded bytes out",
        )
        .differs(
            "head past 64 KiB",
            large(70 * 1024),
            keep,
            (refused(), ok(200, "", true)),
            "provider heads are a few KiB; the bound is what a hostile upstream makes each connection hold (hyper's is about 400 KiB)",
        )
        .differs(
            "101 to a request that asked for no upgrade",
            message(&["HTTP/1.1 101 Switching Protocols", "Upgrade: h2c"], ""),
            keep,
            (refused(), ok(101, "", false)),
            "the client never asks for an upgrade, so a switch answers nothing it sent; hyper returns the 101 and ends the connection's HTTP",
        );
}

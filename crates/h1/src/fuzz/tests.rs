//! The fuzz entry point on generated responses: a fuzzer's work in miniature, on stable and
//! in every test run. Heads with interim responses, either framing or none, chunked bodies
//! whose lines end in CRLF, a bare LF or a bare CR, trailers, bytes past the body, and one
//! byte changed anywhere; each cut anywhere, the connection closed after it or not.

use proptest::prelude::*;

use super::{input, response};

/// Mostly CRLF, sometimes what a lenient or broken server sends.
fn line_end() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just("\r\n"), 1 => Just("\n"), 1 => Just("\r")]
}

/// One chunk: its size, whether it has an extension, and the ends of its size line and data.
fn chunk() -> impl Strategy<Value = (usize, bool, &'static str, &'static str)> {
    (1..40usize, any::<bool>(), line_end(), line_end())
}

prop_compose! {
    fn stream()(
        interim in 0..3usize,
        http11 in any::<bool>(),
        status in prop::sample::select(vec![200u16, 204, 304, 429, 101, 99]),
        length in prop::option::of(0..60usize),
        chunked in any::<bool>(),
        connection in prop::sample::select(vec!["", "Connection: close", "Connection: keep-alive"]),
        head_end in line_end(),
        chunks in prop::collection::vec(chunk(), 0..4),
        trailer in any::<bool>(),
        last in (line_end(), line_end()),
        body in 0..80usize,
        past in prop::sample::select(vec!["", "x", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]),
    ) -> Vec<u8> {
        let mut out = "HTTP/1.1 100 Continue\r\n\r\n".repeat(interim);
        let version = if http11 { "HTTP/1.1" } else { "HTTP/1.0" };
        out.push_str(&format!("{version} {status:03} Status{head_end}"));
        if let Some(length) = length {
            out.push_str(&format!("Content-Length: {length}{head_end}"));
        }
        if chunked {
            out.push_str(&format!("Transfer-Encoding: chunked{head_end}"));
        }
        if !connection.is_empty() {
            out.push_str(&format!("{connection}{head_end}"));
        }
        out.push_str(head_end);
        if chunked {
            for (size, extension, size_end, data_end) in chunks {
                let extension = if extension { ";a=b" } else { "" };
                let data = "d".repeat(size);
                out.push_str(&format!("{size:x}{extension}{size_end}{data}{data_end}"));
            }
            let (size_end, end) = last;
            let trailer = if trailer { format!("X-T: 1{end}") } else { String::new() };
            out.push_str(&format!("0{size_end}{trailer}{end}"));
        } else {
            out.push_str(&"b".repeat(body));
        }
        out.push_str(past);
        out.into_bytes()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn generated_responses_read_the_same_however_they_are_cut(
        stream in stream(),
        change in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        cuts in prop::collection::vec(any::<u16>(), 0..8),
        closes in any::<bool>(),
    ) {
        let mut stream = stream;
        if let Some((at, byte)) = change {
            let at = at.index(stream.len());
            stream[at] = byte;
        }
        response(&stream, &cuts, closes);
    }
}

/// Every input under the repository's `fuzz/regressions/h1/`: what a fuzzer once found (or a
/// seed that covers a shape) stays fixed.
#[test]
fn the_regressions_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/h1");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    for path in inputs {
        eprintln!("{}", path.display());
        input(&std::fs::read(&path).unwrap());
    }
}

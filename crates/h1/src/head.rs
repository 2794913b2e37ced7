//! A response head: the status line and headers, parsed with `httparse`, and what they say
//! about the body that follows (RFC 9112 section 6.3) and the connection after it.

use std::mem::MaybeUninit;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::framing::{Chunked, Framing};

/// The largest response head accepted (status line and headers). Real provider heads are a
/// few KiB; the bound is what a hostile one can make the client hold.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The most headers a response may carry.
const MAX_HEADERS: usize = 100;

/// A parsed response head.
#[derive(Debug)]
pub(crate) struct Head {
    /// The status code.
    pub status: u16,
    /// The headers (the values are kept as sent, names lower-cased).
    pub headers: HeaderMap,
    /// Where the body ends.
    pub framing: Framing,
    /// Whether the connection may carry another request once the body is read.
    pub keep_alive: bool,
}

/// Why bytes are not a response head.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Not an HTTP/1.x head: the parser's reason.
    #[error("the response head is not HTTP/1.x: {0}")]
    Malformed(httparse::Error),
    /// Longer than the client reads.
    #[error("the response head passes {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    /// A `Content-Length` that is not one number.
    #[error("the response's Content-Length is malformed or conflicting")]
    BadLength,
    /// A `Transfer-Encoding` other than `chunked` alone.
    #[error("the response's Transfer-Encoding is not `chunked` alone")]
    UnsupportedCoding,
    /// A status below 100.
    #[error("the response's status {0} is below 100")]
    BadStatus(u16),
    /// A `101 Switching Protocols`.
    #[error("the server switched protocols")]
    Switched,
}

/// Parses the head at the start of `input`: `Ok(None)` while it is incomplete, else the head
/// and how many bytes it took. Interim (1xx) responses are skipped; they count towards
/// [`MAX_HEAD_BYTES`] with the final head, so an endless run of them is refused too.
pub(crate) fn parse(input: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut taken = 0;
    loop {
        if input.len() == taken {
            // Nothing to parse yet (a poll before the answer came): partial, as the parser
            // would say.
            return Ok(None);
        }
        // Slots left uninitialised: the parser writes each one it fills, and 100 empty ones
        // written first cost more than parsing a provider's usual head.
        let mut slots = [const { MaybeUninit::uninit() }; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            &input[taken..],
            &mut slots,
        );
        let size = match parsed {
            Ok(httparse::Status::Complete(size)) => size,
            Ok(httparse::Status::Partial) if input.len() > MAX_HEAD_BYTES => {
                return Err(HeadError::TooLarge);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(error) => return Err(HeadError::Malformed(error)),
        };
        taken += size;
        if taken > MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
        let status = response.code.unwrap_or_default();
        match status {
            // httparse takes any three digits; no status is below 100 (RFC 9110 section 15).
            0..=99 => return Err(HeadError::BadStatus(status)),
            101 => return Err(HeadError::Switched),
            100..=199 => continue,
            _ => {}
        }
        let http11 = response.version == Some(1);
        let mut headers = HeaderMap::with_capacity(response.headers.len());
        for header in response.headers.iter() {
            // httparse has checked the name's token characters and the value's bytes.
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(header.name.as_bytes()),
                HeaderValue::from_bytes(header.value),
            ) {
                headers.append(name, value);
            }
        }
        let (framing, delimited) = framing(status, http11, &headers)?;
        let keep_alive = delimited && persistent(http11, &headers);
        return Ok(Some((
            Head {
                status,
                headers,
                framing,
                keep_alive,
            },
            taken,
        )));
    }
}

/// The body's framing, and whether it is delimited so that the connection can outlive it.
/// `chunked` is the only transfer coding taken (no compression is asked for); a response
/// with both it and a `Content-Length`, or chunked in HTTP/1.0, is read but its connection
/// is not reused (RFC 9112 sections 6.1 and 6.3: such framing may be a smuggling attempt).
fn framing(status: u16, http11: bool, headers: &HeaderMap) -> Result<(Framing, bool), HeadError> {
    if status == 204 || status == 304 {
        return Ok((Framing::Length(0), true));
    }
    let mut codings = headers.get_all(http::header::TRANSFER_ENCODING).iter();
    if let Some(coding) = codings.next() {
        let chunked = coding
            .to_str()
            .is_ok_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
        if !chunked || codings.next().is_some() {
            return Err(HeadError::UnsupportedCoding);
        }
        let plain = http11 && !headers.contains_key(http::header::CONTENT_LENGTH);
        return Ok((Framing::Chunked(Chunked::default()), plain));
    }
    let mut length = None;
    for value in headers.get_all(http::header::CONTENT_LENGTH) {
        for part in value.to_str().map_err(|_| HeadError::BadLength)?.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HeadError::BadLength);
            }
            let n: u64 = part.parse().map_err(|_| HeadError::BadLength)?;
            if length.is_some_and(|l| l != n) {
                return Err(HeadError::BadLength);
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(n) => (Framing::Length(n), true),
        None => (Framing::UntilClose, false),
    })
}

/// Whether the server keeps the connection open: never if it says `close`, else always in
/// HTTP/1.1, and in HTTP/1.0 only if it says `keep-alive`.
fn persistent(http11: bool, headers: &HeaderMap) -> bool {
    let says = |option: &str| {
        headers
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|o| o.trim().eq_ignore_ascii_case(option))
    };
    !says("close") && (http11 || says("keep-alive"))
}

#[cfg(test)]
mod tests {

    use super::*;

    fn parsed(text: &str) -> (Head, usize) {
        parse(text.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn a_chunked_head_is_parsed_and_keeps_the_connection() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                    Transfer-Encoding: chunked\r\n\r\nbody";
        let (head, taken) = parsed(text);
        assert_eq!(head.status, 200);
        assert_eq!(&text[taken..], "body");
        assert_eq!(head.headers["content-type"], "text/event-stream");
        assert!(matches!(head.framing, Framing::Chunked(_)) && head.keep_alive);
    }

    #[test]
    fn an_incomplete_head_waits_and_a_huge_one_is_refused() {
        assert!(parse(b"HTTP/1.1 200 OK\r\nA: b\r\n").unwrap().is_none());
        assert!(parse(b"").unwrap().is_none(), "nothing yet");
        assert!(
            parse(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap().is_none(),
            "an interim response, and nothing after it yet"
        );
        let mut huge = b"HTTP/1.1 200 OK\r\n".to_vec();
        huge.extend(b"x-filler: ".iter().chain(&vec![b'a'; MAX_HEAD_BYTES]));
        assert_eq!(parse(&huge).unwrap_err(), HeadError::TooLarge);
        assert!(matches!(
            parse(b"SMTP ready\r\n\r\n").unwrap_err(),
            HeadError::Malformed(_)
        ));
    }

    #[test]
    fn an_endless_run_of_interim_responses_is_refused() {
        let run = "HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_HEAD_BYTES / 20);
        assert_eq!(parse(run.as_bytes()).unwrap_err(), HeadError::TooLarge);
    }

    #[test]
    fn interim_responses_are_skipped_and_a_protocol_switch_refused() {
        let (head, _) = parsed(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\nHTTP/1.1 429 Slow\r\nContent-Length: 2\r\n\r\n{}",
        );
        assert_eq!(head.status, 429);
        assert!(matches!(head.framing, Framing::Length(2)));
        assert_eq!(
            parse(b"HTTP/1.1 101 Switching\r\n\r\n").unwrap_err(),
            HeadError::Switched
        );
    }

    #[test]
    fn a_status_below_100_is_refused() {
        // It was taken as a final response.
        for status in ["000", "099"] {
            let text = format!("HTTP/1.1 {status} Odd\r\nContent-Length: 0\r\n\r\n");
            let error = parse(text.as_bytes()).unwrap_err();
            assert!(matches!(error, HeadError::BadStatus(_)), "{status}");
        }
    }

    #[test]
    fn framing_and_persistence_follow_rfc_9112() {
        let (head, _) = parsed("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n");
        assert!(matches!(head.framing, Framing::Length(3)) && head.keep_alive);
        let (head, _) = parsed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\n");
        assert!(!head.keep_alive);
        let (head, _) = parsed("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n");
        assert!(!head.keep_alive);
        let (head, _) =
            parsed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 3\r\n\r\n");
        assert!(head.keep_alive);
        let (head, _) = parsed("HTTP/1.1 200 OK\r\n\r\n");
        assert!(matches!(head.framing, Framing::UntilClose) && !head.keep_alive);
        let (head, _) = parsed("HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n");
        assert!(!head.keep_alive);
        // Both framings, or chunked in HTTP/1.0: read as chunked, never reused.
        for text in [
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let (head, _) = parsed(text);
            assert!(matches!(head.framing, Framing::Chunked(_)) && !head.keep_alive);
        }
        for coding in ["gzip", "gzip, chunked", "chunked, chunked"] {
            let text = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {coding}\r\n\r\n");
            let error = parse(text.as_bytes()).unwrap_err();
            assert_eq!(error, HeadError::UnsupportedCoding, "{coding}");
        }
        let (head, _) = parsed("HTTP/1.1 204 No Content\r\n\r\n");
        assert!(head.framing.is_done() && head.keep_alive);
        for conflicting in ["1, 2", "-1", "x"] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {conflicting}\r\n\r\n");
            assert_eq!(
                parse(text.as_bytes()).unwrap_err(),
                HeadError::BadLength,
                "{conflicting}"
            );
        }
    }
}

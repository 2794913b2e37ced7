//! The W3C trace context a request came with (`traceparent`, `tracestate`): kept with the
//! execution so its provider requests continue the caller's trace, whether or not this
//! runtime exports spans of its own.
//!
//! Parsed strictly, as the W3C Trace Context recommendation says a receiver must: a header
//! that is not a valid `traceparent` is dropped (never forwarded), and `tracestate` travels
//! only with a valid `traceparent`.

use std::fmt::Write as _;
use std::sync::Arc;

/// The longest `tracestate` forwarded; the recommendation asks for at least 512 characters.
pub const MAX_TRACESTATE: usize = 512;

/// A trace position: the trace, the span that is the parent of what comes next, its flags,
/// and the vendors' `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace; never all zeros.
    pub trace_id: [u8; 16],
    /// The parent span; never all zeros.
    pub span_id: [u8; 8],
    /// Trace flags; bit 0 is `sampled`.
    pub flags: u8,
    /// `tracestate`, as received (at most [`MAX_TRACESTATE`] bytes of visible ASCII).
    pub state: Option<Arc<str>>,
}

impl TraceContext {
    /// The context `traceparent` (and the `tracestate` headers, joined with commas as the
    /// recommendation says) describe, or `None` when `traceparent` is not valid. A
    /// `tracestate` that is too long or holds other than visible ASCII is dropped alone.
    pub fn parse<'a>(
        traceparent: &[u8],
        tracestate: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<Self> {
        let field = |at: usize, len: usize| -> Option<&[u8]> {
            let field = traceparent.get(at..at + len)?;
            field
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                .then_some(field)
        };
        let version = field(0, 2)?;
        // `ff` is forbidden; version 00 is exactly 55 characters; a later version may add
        // fields after a dash, which this reader skips.
        let length_ok = match version {
            b"ff" => false,
            b"00" => traceparent.len() == 55,
            _ => traceparent.len() == 55 || traceparent.get(55) == Some(&b'-'),
        };
        if !length_ok
            || [2, 35, 52]
                .iter()
                .any(|at| traceparent.get(*at) != Some(&b'-'))
        {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        let mut flags = [0u8; 1];
        hex_into(field(3, 32)?, &mut trace_id);
        hex_into(field(36, 16)?, &mut span_id);
        hex_into(field(53, 2)?, &mut flags);
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let mut joined = String::new();
        for part in tracestate {
            if part.len() > MAX_TRACESTATE || !part.iter().all(|b| (b' '..=b'~').contains(b)) {
                joined.clear();
                break;
            }
            if !joined.is_empty() {
                joined.push(',');
            }
            // Visible ASCII: one char per byte.
            joined.extend(part.iter().map(|b| char::from(*b)));
        }
        let state =
            (!joined.is_empty() && joined.len() <= MAX_TRACESTATE).then(|| Arc::from(joined));
        Some(Self {
            trace_id,
            span_id,
            flags: flags[0],
            state,
        })
    }

    /// The same trace and state, with `span_id` as the parent.
    pub fn child(&self, span_id: [u8; 8], flags: u8) -> Self {
        Self {
            span_id,
            flags,
            ..self.clone()
        }
    }

    /// The `traceparent` header's value (version 00).
    pub fn traceparent(&self) -> String {
        let mut value = String::with_capacity(55);
        value.push_str("00-");
        hex(&mut value, &self.trace_id);
        value.push('-');
        hex(&mut value, &self.span_id);
        value.push('-');
        hex(&mut value, &[self.flags]);
        value
    }
}

fn hex_into(digits: &[u8], out: &mut [u8]) {
    let nibble = |d: u8| {
        if d.is_ascii_digit() {
            d - b'0'
        } else {
            d - b'a' + 10
        }
    };
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0]) << 4 | nibble(pair[1]);
    }
}

fn hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02x}");
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    const VALID: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let states: [&[u8]; 2] = [b"rojo=00f067aa0ba902b7", b"congo=t61rcWkgMzE"];
        let context = TraceContext::parse(VALID, states).expect("valid");
        assert_eq!(context.traceparent().as_bytes(), VALID);
        assert_eq!(context.flags, 1);
        assert_eq!(
            context.state.as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        let child = context.child([7; 8], 0);
        assert_eq!(
            child.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0707070707070707-00"
        );
        assert_eq!(child.state, context.state);
    }

    #[test]
    fn what_the_recommendation_calls_invalid_is_dropped() {
        let invalid: &[&[u8]] = &[
            b"",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
        ];
        for value in invalid {
            assert_eq!(
                TraceContext::parse(value, []),
                None,
                "{}",
                String::from_utf8_lossy(value)
            );
        }
    }

    #[test]
    fn a_later_version_is_read_as_far_as_version_00_goes() {
        let later = b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        let context = TraceContext::parse(later, []).expect("valid");
        assert_eq!(context.traceparent().as_bytes(), VALID);
    }

    #[test]
    fn a_bad_tracestate_is_dropped_alone() {
        let long = vec![b'a'; MAX_TRACESTATE + 1];
        let half = vec![b'a'; MAX_TRACESTATE / 2 + 1];
        let bad: [&[&[u8]]; 4] = [&[&long], &[b"a=\n"], &[b""], &[&half, &half]];
        for states in bad {
            let context = TraceContext::parse(VALID, states.iter().copied()).expect("valid");
            assert_eq!(context.state, None);
        }
    }
}

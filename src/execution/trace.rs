//! The W3C trace context a request came with (`traceparent`, `tracestate`): kept with the
//! execution so its provider requests continue the caller's trace, whether or not this
//! runtime exports spans of its own.
//!
//! Parsed strictly, as the W3C Trace Context recommendation says a receiver must: a header
//! that is not a valid `traceparent` is dropped (never forwarded), and `tracestate` travels
//! only with a valid `traceparent`.

use std::fmt::Write as _;
use std::sync::Arc;

/// The header that carries the trace position.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// The header that carries the vendors' trace state.
pub(crate) const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` forwarded; the recommendation asks for at least 512 characters.
pub(super) const MAX_TRACESTATE: usize = 512;

/// A trace position: the trace, the span that is the parent of what comes next, its flags,
/// and the vendors' `tracestate`. Made only valid: never an all-zero id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
    state: Option<Arc<str>>,
}

/// The flags this version knows (`sampled`, and level 2's `random`): the rest are zero.
const KNOWN_FLAGS: u8 = 0b11;

/// The longest `tracestate` entry kept when the whole is too long.
const MAX_ENTRY: usize = 128;

impl TraceContext {
    /// A context, or `None` for an all-zero id. `state` is kept as [`parse`](Self::parse)
    /// keeps a `tracestate`.
    pub(crate) fn new(
        trace_id: [u8; 16],
        span_id: [u8; 8],
        flags: u8,
        state: Option<&str>,
    ) -> Option<Self> {
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags: flags & KNOWN_FLAGS,
            state: state.and_then(|s| joined_state([s.as_bytes()])),
        })
    }

    /// The context `traceparent` (and the `tracestate` headers, joined with commas as the
    /// recommendation says) describe, or `None` when `traceparent` is not valid. A
    /// `tracestate` with other than visible ASCII is dropped alone; one too long loses
    /// entries as the recommendation says.
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
        let mut context = Self::new(trace_id, span_id, flags[0], None)?;
        context.state = joined_state(tracestate);
        Some(context)
    }

    /// The trace.
    pub(crate) fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The parent span.
    pub(crate) fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// The trace flags; bit 0 is `sampled`.
    pub(crate) fn flags(&self) -> u8 {
        self.flags
    }

    /// The `tracestate` to send on.
    pub(crate) fn state(&self) -> Option<&str> {
        self.state.as_deref()
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

/// The `tracestate` headers as one value, or `None` when empty or not visible ASCII (tabs,
/// the optional whitespace, allowed). Over [`MAX_TRACESTATE`], entries over 128 characters go
/// first, then entries from the end, until it fits.
fn joined_state<'a>(headers: impl IntoIterator<Item = &'a [u8]>) -> Option<Arc<str>> {
    let mut entries: Vec<&str> = Vec::new();
    for header in headers {
        if !header
            .iter()
            .all(|b| (b' '..=b'~').contains(b) || *b == b'\t')
        {
            return None;
        }
        // Visible ASCII is UTF-8.
        let header = std::str::from_utf8(header).ok()?;
        entries.extend(header.split(',').map(str::trim).filter(|e| !e.is_empty()));
    }
    let length = |entries: &[&str]| {
        entries.iter().map(|e| e.len()).sum::<usize>() + entries.len().saturating_sub(1)
    };
    if length(&entries) > MAX_TRACESTATE {
        entries.retain(|e| e.len() <= MAX_ENTRY);
        while length(&entries) > MAX_TRACESTATE {
            entries.pop();
        }
    }
    (!entries.is_empty()).then(|| Arc::from(entries.join(",")))
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
mod tests {
    use super::*;

    const VALID: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let states: [&[u8]; 2] = [b"rojo=00f067aa0ba902b7", b"congo=t61rcWkgMzE"];
        let context = TraceContext::parse(VALID, states).expect("valid");
        assert_eq!(context.traceparent().as_bytes(), VALID);
        assert_eq!(context.flags(), 1);
        assert_eq!(
            context.state(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        let child = TraceContext::new(context.trace_id(), [7; 8], 0xff, context.state());
        let child = child.expect("valid");
        assert_eq!(
            child.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0707070707070707-03",
            "flags this version does not know are zero"
        );
        assert_eq!(child.state(), context.state());
        assert_eq!(TraceContext::new([0; 16], [7; 8], 1, None), None);
        assert_eq!(TraceContext::new([7; 16], [0; 8], 1, None), None);
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
        let bad: [&[&[u8]]; 3] = [&[b"a=\n"], &[b""], &[b" , "]];
        for states in bad {
            let context = TraceContext::parse(VALID, states.iter().copied()).expect("valid");
            assert_eq!(context.state(), None);
        }
        let tab = TraceContext::parse(VALID, [&b"a=1,\tb=2"[..]]).expect("valid");
        assert_eq!(
            tab.state(),
            Some("a=1,b=2"),
            "optional whitespace is allowed"
        );
    }

    #[test]
    fn a_long_tracestate_loses_its_long_entries_then_its_last() {
        let long = format!("big={}", "x".repeat(MAX_ENTRY));
        let small: Vec<String> = (0..100).map(|i| format!("k{i:03}=v")).collect();
        let mut header = vec![small[0].clone(), long];
        header.extend(small[1..].iter().cloned());
        let header = header.join(",");
        let context = TraceContext::parse(VALID, [header.as_bytes()]).expect("valid");
        let state = context.state().expect("kept in part");
        assert!(state.len() <= MAX_TRACESTATE, "{}", state.len());
        assert!(!state.contains("big="), "the long entry goes first");
        assert!(state.starts_with("k000=v,k001=v"), "{state}");
        assert!(!state.contains("k099"), "then the last entries");
    }
}

//! Entry points for the fuzzers (`fuzz/`) and the regression tests of what they found: not
//! an API. They panic on what they find, which is how a fuzzer learns of it.

use std::sync::OnceLock;

use super::anthropic::EventDecoder;
use super::bedrock::ConverseDecoder;
use super::eventstream::EventStreamParser;
use super::exchange::Decoder;
use super::framing::Framing;
use super::gemini::ChunkDecoder as GeminiDecoder;
use super::http::Upstream;
use super::openai::ChunkDecoder;
use super::responses::ResponseDecoder;
use super::sse::{OwnedEvent, SseParser};
use super::tally::UsageTally;

/// An adapter whose stream handling is fuzzed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Adapter {
    /// OpenAI chat completions chunks.
    OpenAi = 0,
    /// Anthropic messages events.
    Anthropic = 1,
    /// OpenAI Responses API events.
    Responses = 2,
    /// Gemini API chunks.
    Gemini = 3,
}

/// A fuzzer's input for [`stream`]: the first byte picks the adapter (modulo 4: OpenAI chat
/// completions, Anthropic, the Responses API, Gemini), the next eight where the pieces end,
/// the rest is the body.
pub fn stream_input(input: &[u8]) {
    let Some((&pick, rest)) = input.split_first() else {
        return;
    };
    let (cuts, body) = rest.split_at(rest.len().min(8));
    let adapter = match pick % 4 {
        0 => Adapter::OpenAi,
        1 => Adapter::Anthropic,
        2 => Adapter::Responses,
        _ => Adapter::Gemini,
    };
    stream(adapter, body, cuts);
}

/// Feeds `body` to the SSE parser in pieces cut after each offset of `cuts` (taken in turn,
/// modulo what is left), and every event it completes through the adapter's decoder, as a
/// response body would be. Panics if cutting the body differently changed the events.
pub(crate) fn stream(adapter: Adapter, body: &[u8], cuts: &[u8]) {
    // One upstream per adapter for every input.
    static UPSTREAMS: OnceLock<[Upstream; 4]> = OnceLock::new();
    let upstreams = UPSTREAMS.get_or_init(|| {
        [
            upstream(Adapter::OpenAi),
            upstream(Adapter::Anthropic),
            upstream(Adapter::Responses),
            upstream(Adapter::Gemini),
        ]
    });
    let upstream = &upstreams[adapter as usize];
    let whole = events(body, &[]);
    let cut = events(body, cuts);
    assert_eq!(whole, cut, "cutting the body changed what the parser read");
    let Ok(events) = whole else { return };
    let mut usage = UsageTally::default();
    let mut out = Vec::new();
    match adapter {
        Adapter::OpenAi => decode(
            ChunkDecoder::default(),
            upstream,
            events,
            &mut usage,
            &mut out,
        ),
        Adapter::Anthropic => decode(
            EventDecoder::default(),
            upstream,
            events,
            &mut usage,
            &mut out,
        ),
        Adapter::Responses => decode(
            ResponseDecoder::default(),
            upstream,
            events,
            &mut usage,
            &mut out,
        ),
        Adapter::Gemini => decode(
            GeminiDecoder::default(),
            upstream,
            events,
            &mut usage,
            &mut out,
        ),
    }
    let _ = usage.drain(true);
}

fn decode<D: Decoder<Framing = SseParser>>(
    mut decoder: D,
    upstream: &Upstream,
    events: Vec<OwnedEvent>,
    usage: &mut UsageTally,
    out: &mut Vec<super::ProviderEvent>,
) {
    for event in &events {
        match decoder.event(upstream, event.view(), usage, out) {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => {}
        }
    }
    let _ = decoder.finished_at_eof(upstream);
}

/// The events of `body` fed in pieces cut at `cuts`, or the parser's error.
fn events(body: &[u8], cuts: &[u8]) -> Result<Vec<OwnedEvent>, &'static str> {
    let mut parser = SseParser::with_limit(4096);
    let mut out = Vec::new();
    let mut rest = body;
    for cut in cuts {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at(usize::from(*cut) % rest.len() + 1);
        parser
            .push(piece, &mut |e| out.push(OwnedEvent::of(e)))
            .map_err(|e| e.what())?;
        rest = after;
    }
    parser
        .push(rest, &mut |e| out.push(OwnedEvent::of(e)))
        .map_err(|e| e.what())?;
    parser
        .finish(&mut |e| out.push(OwnedEvent::of(e)))
        .map_err(|e| e.what())?;
    Ok(out)
}

fn upstream(adapter: Adapter) -> Upstream {
    let adapter = match adapter {
        Adapter::OpenAi => "openai",
        Adapter::Anthropic => "anthropic",
        Adapter::Responses => "openai-responses",
        Adapter::Gemini => "gemini",
    };
    Upstream::offline("fuzzed", adapter, None)
}

/// A fuzzer's input for AWS's event stream: the first eight bytes say where the pieces end,
/// the rest is a Bedrock response body. The parser must read the same messages (or refuse at
/// the same one) however the body is cut, and each message goes through the Converse decoder.
pub fn eventstream_input(input: &[u8]) {
    static UPSTREAM: OnceLock<Upstream> = OnceLock::new();
    let upstream = UPSTREAM.get_or_init(|| Upstream::offline("fuzzed", "bedrock", None));
    let (cuts, body) = input.split_at(input.len().min(8));
    let whole = messages(body, &[]);
    let cut = messages(body, cuts);
    assert_eq!(whole, cut, "cutting the body changed what the parser read");
    let Ok(messages) = whole else { return };
    let mut decoder = ConverseDecoder::default();
    let mut usage = UsageTally::default();
    let mut out = Vec::new();
    for (message_type, event_type, exception_type, payload) in &messages {
        let message = super::eventstream::Message {
            message_type,
            event_type,
            exception_type,
            error_code: "",
            payload,
        };
        match decoder.event(upstream, message, &mut usage, &mut out) {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) => {}
        }
    }
    let _ = decoder.finished_at_eof(upstream);
    let _ = usage.drain(true);
}

/// A message's types and payload, copied out of the parser.
type OwnedMessage = (String, String, String, Vec<u8>);

/// The messages of `body` fed in pieces cut at `cuts`, or the parser's error.
fn messages(body: &[u8], cuts: &[u8]) -> Result<Vec<OwnedMessage>, &'static str> {
    let mut parser = EventStreamParser::with_limit(4096);
    let mut out = Vec::new();
    let mut on = |m: super::eventstream::Message<'_>| {
        out.push((
            m.message_type.to_owned(),
            m.event_type.to_owned(),
            m.exception_type.to_owned(),
            m.payload.to_vec(),
        ));
    };
    let mut rest = body;
    for cut in cuts {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at(usize::from(*cut) % rest.len() + 1);
        parser.push(piece, &mut on).map_err(|e| e.what())?;
        rest = after;
    }
    parser.push(rest, &mut on).map_err(|e| e.what())?;
    Framing::finish(&mut parser, &mut on).map_err(|e| e.what)?;
    Ok(out)
}

//! How a reply's body is cut into the events an adapter decodes: server-sent events (every
//! HTTP adapter but one, `sse.rs`) or AWS's binary event stream (Bedrock, `eventstream.rs`).
//! The exchange feeds the body to its adapter's framing as it arrives and hands each whole
//! event to the adapter's decoder.

/// A reply body's framing: an incremental parser over pieces of any size.
pub(crate) trait Framing: Default + Send + Unpin + 'static {
    /// One event, lent out of the parser for as long as its handler runs.
    type Event<'a>;

    /// The media type a call asks for (`Accept`) and a successful reply must have.
    const MEDIA_TYPE: &'static str;

    /// Feeds the next piece of the body, handing every event it completes to `on`. After an
    /// error the body is malformed and the parser spent: it is not fed again.
    fn push(
        &mut self,
        piece: &[u8],
        on: &mut dyn for<'a> FnMut(Self::Event<'a>),
    ) -> Result<(), Malformed>;

    /// The body ended: hands over what its end completes, or says what it cut short.
    fn finish(&mut self, on: &mut dyn for<'a> FnMut(Self::Event<'a>)) -> Result<(), Malformed>;
}

/// Why the bytes are not the framing they should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    /// A short description for the error message.
    pub what: &'static str,
    /// The offending bytes, lossily decoded and cut short, for the log only.
    pub offending: String,
}

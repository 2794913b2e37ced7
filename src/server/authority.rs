//! Unix-socket connections accept any `:authority`.
//!
//! gRPC C-core (so grpcio, the client the README names for the socket) sends a `unix:`
//! target's path, percent-encoded, as the `:authority` of every call (grpcio 1.85 on
//! `unix:/tmp/mr.sock` sends `tmp%2Fmr.sock`). h2 builds each request's URI from it and
//! resets the stream (PROTOCOL_ERROR) when it is not a valid authority, which `%` makes it,
//! and has no option to relax that. The runtime never reads the authority, and on a local
//! socket it names nothing; so on Unix connections only, this shim sits under h2, follows
//! the client's frames, and gives every `:authority` literal h2 would refuse a valid value
//! of the same length ([`hpack`]).
//!
//! Same length keeps HPACK's state the same on both sides: an entry a rewritten literal
//! adds to h2's dynamic table has the size the client's encoder counted, so evictions
//! match, and the client's later references to it by index resolve in h2's table to the
//! valid value.
//!
//! Frames pass as they are, in place in h2's read buffer, except a header block with an
//! authority to replace: it is held until whole (HEADERS and its CONTINUATION frames, at
//! most [`MAX_HELD`] bytes) and written again as HEADERS (+ CONTINUATION) frames, its
//! padding dropped and its priority kept. A block that is malformed, larger than that, or
//! not followed by its CONTINUATION frames passes as it is, for h2 to refuse.

#[cfg(any(test, feature = "fuzzing"))]
pub(super) mod fuzz;
mod hpack;
mod huffman;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::MAX_HEADER_LIST;

/// The client connection preface (RFC 9113 §3.4), which passes before the first frame.
const PREFACE: usize = 24;

/// A frame header's length.
const HEAD: usize = 9;

/// Frame types and flags (RFC 9113 §6.2, §6.10).
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The priority fields of a HEADERS frame with the PRIORITY flag.
const PRIORITY_FIELDS: usize = 5;

/// The largest frame the shim writes: HTTP/2's smallest allowed maximum frame size, which
/// every server accepts whatever it advertises.
const MAX_FRAME: usize = 16_384;

/// The most a header block (frames with their headers) may take to be held: one frame of
/// the default maximum size, or a header list as large as the server accepts.
const MAX_HELD: usize = MAX_HEADER_LIST as usize + HEAD;

/// What one read takes from the socket while a block is held.
const READ_CHUNK: usize = 8 * 1024;

/// A Unix connection as h2 reads it: `:authority` values it would refuse replaced.
/// Writes go through untouched.
#[derive(Debug)]
pub(super) struct AnyAuthority<T> {
    inner: T,
    /// Bytes that pass before the next frame header: the preface, then the rest of the
    /// frame passing.
    pass: usize,
    /// Bytes read and not yet decided: the start of a frame header, or of a header block
    /// not yet whole. It begins at a frame header.
    held: BytesMut,
    /// Bytes decided and not yet read by h2: a rewritten block, what came after it.
    ready: BytesMut,
}

impl<T> AnyAuthority<T> {
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            pass: PREFACE,
            held: BytesMut::new(),
            ready: BytesMut::new(),
        }
    }

    /// Moves what `held` lets decide to `ready`: bytes that pass, blocks rewritten.
    fn drain(&mut self) {
        loop {
            let (passed, stop) = scan(&mut self.pass, &self.held);
            self.ready.extend_from_slice(&self.held[..passed]);
            self.held.advance(passed);
            match stop {
                Stop::More => {
                    // Blocks are held rarely (grpcio's first request on a connection):
                    // the room they took is not kept.
                    if self.held.is_empty() {
                        self.held = BytesMut::new();
                    }
                    return;
                }
                Stop::Rewrite { end, frames } => {
                    self.held.advance(end);
                    self.ready.extend_from_slice(&frames);
                }
            }
        }
    }
}

/// Why [`scan`] stopped.
#[derive(Debug, PartialEq)]
enum Stop {
    /// At the end, or at a frame header or header block not yet whole.
    More,
    /// At a header block whose `end` bytes are replaced by `frames`.
    Rewrite { end: usize, frames: Vec<u8> },
}

/// How many of `bytes`' first bytes pass as they are, with `pass` counted down through
/// them, and what follows them.
fn scan(pass: &mut usize, bytes: &[u8]) -> (usize, Stop) {
    let mut at = 0;
    loop {
        let skip = (*pass).min(bytes.len() - at);
        at += skip;
        *pass -= skip;
        let Some(head) = Head::read(&bytes[at..]) else {
            return (at, Stop::More);
        };
        *pass = match head.kind {
            HEADERS => match block(&bytes[at..]) {
                Block::Pass(bytes) => bytes,
                Block::Partial => return (at, Stop::More),
                Block::Rewrite { end, frames } => return (at, Stop::Rewrite { end, frames }),
            },
            _ => HEAD + head.len,
        };
    }
}

/// A frame header.
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    /// The stream identifier as sent, reserved bit included.
    stream: [u8; 4],
}

impl Head {
    /// The header `bytes` begin with, if they hold one whole.
    fn read(bytes: &[u8]) -> Option<Self> {
        let head = bytes.get(..HEAD)?;
        Some(Self {
            len: usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]),
            kind: head[3],
            flags: head[4],
            stream: [head[5], head[6], head[7], head[8]],
        })
    }

    fn stream_id(&self) -> u32 {
        u32::from_be_bytes(self.stream) & 0x7fff_ffff
    }

    fn write(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: [u8; 4]) {
        out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream);
    }
}

/// What to do with the header block a HEADERS frame begins.
enum Block {
    /// Not yet whole: hold it.
    Partial,
    /// The next this many bytes pass as they are (some may not have come yet): a block
    /// with nothing to replace, or one left for h2 to refuse.
    Pass(usize),
    /// Its `end` bytes are replaced by `frames`.
    Rewrite { end: usize, frames: Vec<u8> },
}

/// Decides on the block `bytes` begin with, if they begin with a frame header.
fn block(bytes: &[u8]) -> Block {
    let Some(first) = Head::read(bytes) else {
        return Block::Partial;
    };
    let mut at = 0;
    loop {
        let Some(head) = Head::read(&bytes[at..]) else {
            return Block::Partial;
        };
        if at > 0 && (head.kind != CONTINUATION || head.stream_id() != first.stream_id()) {
            // Not a block HTTP/2 allows: what came of it passes, h2 refuses it.
            return Block::Pass(at);
        }
        let end = at + HEAD + head.len;
        if end > MAX_HELD {
            // Too large to hold: it passes, and its CONTINUATION frames after it.
            return Block::Pass(end);
        }
        if end > bytes.len() {
            return Block::Partial;
        }
        if head.flags & END_HEADERS != 0 {
            return match rewrite(&first, &bytes[..end]) {
                Some(frames) => Block::Rewrite { end, frames },
                None => Block::Pass(end),
            };
        }
        at = end;
    }
}

/// The frames of a whole block, written again if it has an authority to replace.
fn rewrite(first: &Head, frames: &[u8]) -> Option<Vec<u8>> {
    let (priority, fragment) = fields(first, frames.get(HEAD..HEAD + first.len)?)?;
    let rewritten = if frames.len() == HEAD + first.len {
        hpack::rewrite(fragment)?
    } else {
        // Split across CONTINUATION frames (rare: a block of more than one frame).
        let mut whole = fragment.to_vec();
        let mut at = HEAD + first.len;
        while let Some(head) = Head::read(&frames[at..]) {
            whole.extend_from_slice(frames.get(at + HEAD..at + HEAD + head.len)?);
            at += HEAD + head.len;
        }
        hpack::rewrite(&whole)?
    };
    let mut out = Vec::with_capacity(rewritten.len() + 2 * HEAD + PRIORITY_FIELDS);
    let room = MAX_FRAME - priority.len();
    let (chunk, mut rest) = rewritten.split_at(room.min(rewritten.len()));
    let last = if rest.is_empty() { END_HEADERS } else { 0 };
    let flags = first.flags & (END_STREAM | PRIORITY) | last;
    Head::write(
        &mut out,
        priority.len() + chunk.len(),
        HEADERS,
        flags,
        first.stream,
    );
    out.extend_from_slice(priority);
    out.extend_from_slice(chunk);
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(MAX_FRAME.min(rest.len()));
        rest = after;
        let last = if rest.is_empty() { END_HEADERS } else { 0 };
        Head::write(&mut out, chunk.len(), CONTINUATION, last, first.stream);
        out.extend_from_slice(chunk);
    }
    Some(out)
}

/// A HEADERS frame's priority fields (empty without the flag) and its block fragment,
/// padding left out; `None` if its padding is longer than the frame allows.
fn fields<'a>(head: &Head, payload: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    let (padding, body) = if head.flags & PADDED != 0 {
        let (&padding, body) = payload.split_first()?;
        (usize::from(padding), body)
    } else {
        (0, payload)
    };
    let (priority, body) = if head.flags & PRIORITY != 0 {
        body.split_at_checked(PRIORITY_FIELDS)?
    } else {
        (&[][..], body)
    };
    let fragment = body.get(..body.len().checked_sub(padding)?)?;
    Some((priority, fragment))
}

impl<T: AsyncRead + Unpin> AsyncRead for AnyAuthority<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.advance(n);
                if this.ready.is_empty() {
                    this.ready = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if this.held.is_empty() {
                // Read in place: what passes stays where h2 reads it.
                let start = buf.filled().len();
                ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
                let read = &buf.filled()[start..];
                if read.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                let (passed, stop) = scan(&mut this.pass, read);
                if passed < read.len() {
                    // What follows goes after the block, if it was rewritten (`ready` is
                    // empty here), and is decided on from `held`.
                    let rest = &read[passed..];
                    match stop {
                        Stop::More => this.held.extend_from_slice(rest),
                        Stop::Rewrite { end, frames } => {
                            this.ready.extend_from_slice(&frames);
                            this.held.extend_from_slice(&rest[end..]);
                        }
                    }
                    buf.set_filled(start + passed);
                    this.drain();
                }
                if passed > 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            // Room for a chunk, and no more read than that: `held` stays bounded.
            this.held.reserve(READ_CHUNK);
            let mut room = (&mut this.held).limit(READ_CHUNK);
            let read = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.inner),
                cx,
                &mut room
            ))?;
            if read == 0 {
                // The client closed in the middle of a frame: h2 sees it cut short.
                let held = this.held.split();
                this.ready.unsplit(held);
                continue;
            }
            this.drain();
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;

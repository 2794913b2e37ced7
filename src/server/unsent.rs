//! What one connection holds for its client and has not sent: response data its streams
//! have taken from their bodies, waiting for the client's flow-control window or queued in
//! HTTP/2 for a socket the client does not read. Each stream counts what it takes; the
//! socket's writer reads the frames it writes and counts off each DATA frame's payload for
//! its stream; a stream that is reset has whatever it still held dropped by HTTP/2, and is
//! counted off whole. So the count is exact but for a reset stream's frames that HTTP/2 had
//! already handed to the connection's gathered writes (`coalesce.rs`: about 64 KiB and one
//! write at most): they are counted off at the reset, before the socket takes them. A stream
//! takes nothing more while its connection holds `server.max_unsent_bytes` or more: a client
//! that stops reading holds at most that, plus the one piece each of its streams was taking
//! when the bound was reached, plus what its reset streams had gathered, until
//! `server.stream_idle_timeout` resets its streams.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// The HTTP/2 frame types the writer looks at.
const DATA: u8 = 0;
const RST_STREAM: u8 = 3;
/// A frame header's length.
const HEADER: usize = 9;

/// One connection's unsent bytes, by stream.
#[derive(Debug)]
pub(super) struct Unsent {
    /// Streams holding unsent bytes, and how many: few at a time, so a list beats a hash.
    by_stream: Mutex<Vec<(u32, usize)>>,
    total: AtomicUsize,
    /// `server.max_unsent_bytes`: what it may hold before its streams wait.
    bound: usize,
    /// Woken when the total falls below the bound.
    room: Notify,
    /// Every connection's total, when metrics are on.
    gauge: Option<Gauge>,
}

impl Unsent {
    pub(super) fn new(bound: usize, gauge: Option<Gauge>) -> Arc<Self> {
        Arc::new(Self {
            by_stream: Mutex::new(Vec::new()),
            total: AtomicUsize::new(0),
            bound,
            room: Notify::new(),
            gauge,
        })
    }

    /// Whether the connection holds less than its bound.
    pub(super) fn has_room(&self) -> bool {
        self.total.load(Ordering::Acquire) < self.bound
    }

    /// Resolves when the connection may hold less than its bound; check [`Unsent::has_room`]
    /// after registering.
    pub(super) fn room(&self) -> tokio::sync::futures::Notified<'_> {
        self.room.notified()
    }

    /// Stream `stream` took `bytes` to send.
    pub(super) fn took(&self, stream: u32, bytes: usize) {
        let mut by_stream = self.lock();
        match by_stream.iter_mut().find(|(id, _)| *id == stream) {
            Some((_, held)) => *held += bytes,
            None => by_stream.push((stream, bytes)),
        }
        drop(by_stream);
        self.add(bytes);
    }

    /// Stream `stream` was reset: HTTP/2 drops what it still held.
    pub(super) fn forget(&self, stream: u32) {
        let mut by_stream = self.lock();
        let dropped = match by_stream.iter().position(|(id, _)| *id == stream) {
            Some(at) => by_stream.swap_remove(at).1,
            None => 0,
        };
        drop(by_stream);
        self.sub(dropped);
    }

    /// The socket took `sent`: DATA payload bytes by stream.
    fn sent(&self, sent: &[(u32, usize)]) {
        let mut by_stream = self.lock();
        let mut total = 0;
        for &(stream, bytes) in sent {
            if let Some(at) = by_stream.iter().position(|(id, _)| *id == stream) {
                let held = &mut by_stream[at].1;
                let off = bytes.min(*held);
                *held -= off;
                total += off;
                if *held == 0 {
                    by_stream.swap_remove(at);
                }
            }
        }
        drop(by_stream);
        self.sub(total);
    }

    fn add(&self, bytes: usize) {
        self.total.fetch_add(bytes, Ordering::AcqRel);
        if let Some(gauge) = &self.gauge {
            gauge.inc_by(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
    }

    fn sub(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let before = self.total.fetch_sub(bytes, Ordering::AcqRel);
        if let Some(gauge) = &self.gauge {
            gauge.dec_by(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        if before >= self.bound && before - bytes < self.bound {
            self.room.notify_waiters();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(u32, usize)>> {
        self.by_stream
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        // The connection is gone, and what it held with it.
        if let Some(gauge) = &self.gauge {
            gauge.dec_by(i64::try_from(*self.total.get_mut()).unwrap_or(i64::MAX));
        }
    }
}

/// Where the writer is in the frames it writes.
#[derive(Debug, Default)]
struct Frames {
    header: [u8; HEADER],
    /// Header bytes read of the current frame.
    filled: usize,
    /// Payload bytes of the current frame still to come.
    left: usize,
    /// The current frame's type and stream.
    kind: u8,
    stream: u32,
}

impl Frames {
    /// Follows `bytes`, the next the socket took; adds DATA payload bytes by stream to
    /// `sent`, and the streams of RST_STREAM frames to `reset`.
    fn follow(&mut self, mut bytes: &[u8], sent: &mut Vec<(u32, usize)>, reset: &mut Vec<u32>) {
        while !bytes.is_empty() {
            if self.filled < HEADER {
                let take = (HEADER - self.filled).min(bytes.len());
                self.header[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
                self.filled += take;
                bytes = &bytes[take..];
                if self.filled < HEADER {
                    return;
                }
                let [l0, l1, l2, kind, _flags, s0, s1, s2, s3] = self.header;
                self.left = usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2);
                self.kind = kind;
                self.stream = u32::from_be_bytes([s0 & 0x7f, s1, s2, s3]);
                if kind == RST_STREAM {
                    reset.push(self.stream);
                }
            }
            let take = self.left.min(bytes.len());
            if self.kind == DATA && take > 0 {
                match sent.last_mut() {
                    Some((stream, n)) if *stream == self.stream => *n += take,
                    _ => sent.push((self.stream, take)),
                }
            }
            self.left -= take;
            bytes = &bytes[take..];
            if self.left == 0 {
                self.filled = 0;
            }
        }
    }
}

/// A connection's I/O, counting off what its writes carry.
#[derive(Debug)]
pub(super) struct Counted<T> {
    inner: T,
    unsent: Arc<Unsent>,
    frames: Frames,
    sent: Vec<(u32, usize)>,
    reset: Vec<u32>,
}

impl<T> Counted<T> {
    pub(super) fn new(inner: T, unsent: Arc<Unsent>) -> Self {
        Self {
            inner,
            unsent,
            frames: Frames::default(),
            sent: Vec::new(),
            reset: Vec::new(),
        }
    }

    /// Counts off the first `written` bytes of `bufs`.
    fn count(&mut self, bufs: &[io::IoSlice<'_>], mut written: usize) {
        for buf in bufs {
            if written == 0 {
                break;
            }
            let take = buf.len().min(written);
            self.frames
                .follow(&buf[..take], &mut self.sent, &mut self.reset);
            written -= take;
        }
        if !self.sent.is_empty() {
            self.unsent.sent(&self.sent);
            self.sent.clear();
        }
        for stream in self.reset.drain(..) {
            self.unsent.forget(stream);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = std::task::ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.count(&[io::IoSlice::new(buf)], written);
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = std::task::ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        this.count(bufs, written);
        Poll::Ready(Ok(written))
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
mod tests {

    use super::*;

    fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn data_is_counted_off_by_stream_whatever_the_cuts_and_a_reset_drops_the_rest() {
        let mut wire = frame(1, 1, b"headers");
        wire.extend(frame(DATA, 1, &[7; 100]));
        wire.extend(frame(DATA, 3, &[7; 50]));
        wire.extend(frame(8, 0, &[0; 4]));
        wire.extend(frame(RST_STREAM, 5, &[0; 4]));
        for cut in 1..wire.len() {
            let unsent = Unsent::new(1 << 20, None);
            unsent.took(1, 150);
            unsent.took(3, 50);
            unsent.took(5, 70);
            let mut io = Counted::new(Vec::<u8>::new(), unsent.clone());
            let (a, b) = wire.split_at(cut);
            io.count(&[io::IoSlice::new(a), io::IoSlice::new(b)], wire.len());
            // Stream 1 still holds 50; 3 is sent; 5 was reset, its 70 dropped.
            assert_eq!(unsent.total.load(Ordering::Acquire), 50, "cut at {cut}");
            assert_eq!(*unsent.lock(), [(1, 50)]);
        }
    }

    #[test]
    fn only_what_was_written_counts() {
        let unsent = Unsent::new(1 << 20, None);
        unsent.took(1, 100);
        let mut io = Counted::new(Vec::<u8>::new(), unsent.clone());
        let wire = frame(DATA, 1, &[7; 100]);
        // A partial write: the header and 40 payload bytes.
        io.count(&[io::IoSlice::new(&wire)], HEADER + 40);
        assert_eq!(unsent.total.load(Ordering::Acquire), 60);
        io.count(&[io::IoSlice::new(&wire[HEADER + 40..])], 60);
        assert_eq!(unsent.total.load(Ordering::Acquire), 0);
        assert!(unsent.has_room());
    }
}

//! Writes to a client gathered across streams and frames. Each stream runs as a task of its
//! own and wakes the connection's task when it has something to send; tokio runs the task
//! woken last first, so without this the connection would write (one `writev`, a loopback
//! send and the client's wake-up) as soon as the first stream had a frame, once per stream.
//! And h2 writes out every DATA frame of 256 bytes or more before it takes the next frame, so
//! even one task's turn would write once per such frame: a call's first events, its output,
//! then its trailers.
//!
//! Here the frames h2 writes are gathered in a buffer, and a flush steps aside once, to the
//! back of the run queue: the streams that are ready run first and add their frames, and one
//! write carries them all when h2 flushes in the connection's next task. That turn comes at
//! once when nothing else is ready, so a lone call waits for no one. h2 reads the socket in
//! every turn before it flushes at the turn's end, so a read tells this turn from the one
//! that stepped aside. Once the buffer holds [`HOLD`] bytes it is written before it takes
//! more, so it holds at most that and one of h2's writes (its buffer and one DATA frame's
//! payload); it keeps at most [`KEEP`] of its room between flushes.
//!
//! A flush that returns with bytes still held breaks what `AsyncWrite` usually promises; it
//! holds only because h2 alone writes to this, and polls the connection again in the turn it
//! was woken for. A turn's gathering can end early: the accept loop polls the connection
//! again after each new call, and that poll's read lets the flush after it send. A
//! connection that is dropped rather than closed (a forced stop, an idle connection's close
//! after its GOAWAY, a broken socket) loses what its last turn held, where before that would
//! have reached the kernel; one closed through h2 (a drain's GOAWAY, an unanswered keepalive)
//! sends it first.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a connection gathers before it writes ahead of a flush.
const HOLD: usize = 64 * 1024;
/// The most room a connection's buffer keeps between flushes: an idle connection holds no
/// more than this for its next writes.
const KEEP: usize = 16 * 1024;

/// An I/O stream whose writes are gathered and sent one turn of the scheduler after a flush.
#[derive(Debug)]
pub(super) struct Coalesced<T> {
    inner: T,
    /// What was written and not yet sent, from `sent` on.
    held: Vec<u8>,
    /// How much of `held` the socket has taken.
    sent: usize,
    /// Whether a flush with bytes held stepped aside (until they are sent).
    stepped_aside: bool,
    /// Whether the connection has read since it stepped aside: its next task.
    read_since: bool,
}

impl<T> Coalesced<T> {
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            held: Vec::new(),
            sent: 0,
            stepped_aside: false,
            read_since: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalesced<T> {
    /// Sends what is held.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.held.clear();
        self.sent = 0;
        self.held.shrink_to(KEEP);
        Poll::Ready(Ok(()))
    }

    /// Room to hold more: what is held is sent first when it is [`HOLD`] or more (one write
    /// may take it past that).
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held.len() >= HOLD {
            ready!(self.poll_send(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.read_since = true;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        this.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let len = bufs.iter().map(|b| b.len()).sum();
        this.held.reserve(len);
        for buf in bufs {
            this.held.extend_from_slice(buf);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        // Many pieces are gathered as cheaply as one: h2 then copies fewer frames itself.
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.sent < this.held.len() {
            if !this.stepped_aside {
                // A task that wakes itself goes to the back of the run queue; h2 flushes
                // again in its next task.
                this.stepped_aside = true;
                this.read_since = false;
                cx.waker().wake_by_ref();
                return Poll::Ready(Ok(()));
            }
            if !this.read_since {
                // The same turn: more frames are still to come into the buffer. Woken again
                // all the same: should h2 ever flush in a turn without reading first (it
                // does not today), what is held waits one more turn, never for a wake that
                // does not come.
                cx.waker().wake_by_ref();
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_send(cx))?;
        }
        this.stepped_aside = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    use super::*;

    /// A waker that counts its wakes (the server's other tests use it too).
    pub(in crate::server) struct Count(pub(in crate::server) AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A socket that takes at most `per_write` bytes a write, or nothing while `full`.
    #[derive(Default)]
    struct Socket {
        sent: Vec<u8>,
        writes: usize,
        per_write: Option<usize>,
        full: bool,
        broken: bool,
        shut: bool,
    }

    impl AsyncRead for Socket {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Socket {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            if this.broken {
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            if this.full {
                return Poll::Pending;
            }
            let n = this.per_write.map_or(buf.len(), |most| most.min(buf.len()));
            this.sent.extend_from_slice(&buf[..n]);
            this.writes += 1;
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    /// The connection's task as the tests play it: its waker, and how often it was woken.
    struct Task {
        wakes: Arc<Count>,
        waker: Waker,
    }

    impl Task {
        fn new() -> Self {
            let wakes = Arc::new(Count(AtomicUsize::new(0)));
            let waker = Waker::from(wakes.clone());
            Self { wakes, waker }
        }

        fn wakes(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }

        fn write(&self, io: &mut Coalesced<Socket>, bytes: &[u8]) -> Poll<usize> {
            let mut cx = Context::from_waker(&self.waker);
            Pin::new(io).poll_write(&mut cx, bytes).map(Result::unwrap)
        }

        fn write_vectored(&self, io: &mut Coalesced<Socket>, pieces: &[&[u8]]) -> Poll<usize> {
            let mut cx = Context::from_waker(&self.waker);
            let slices: Vec<_> = pieces.iter().map(|p| io::IoSlice::new(p)).collect();
            Pin::new(io)
                .poll_write_vectored(&mut cx, &slices)
                .map(Result::unwrap)
        }

        fn flush(&self, io: &mut Coalesced<Socket>) -> Poll<()> {
            let mut cx = Context::from_waker(&self.waker);
            Pin::new(io).poll_flush(&mut cx).map(Result::unwrap)
        }

        /// What h2 does first in each turn of the connection's task.
        fn read(&self, io: &mut Coalesced<Socket>) {
            let mut cx = Context::from_waker(&self.waker);
            let mut bytes = [0u8; 8];
            let mut buf = ReadBuf::new(&mut bytes);
            assert!(Pin::new(io).poll_read(&mut cx, &mut buf).is_pending());
        }
    }

    #[test]
    fn a_turns_frames_go_out_in_one_write_in_the_next_turn() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket::default());
        task.read(&mut io);
        assert_eq!(task.write(&mut io, b"ab"), Poll::Ready(2));
        // The first flush steps aside: nothing is written, and the task is woken for its
        // next task.
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!((io.inner.writes, task.wakes()), (0, 1));
        // h2 flushes after each large DATA frame: within the turn, they are all gathered.
        assert_eq!(
            task.write_vectored(&mut io, &[b"cd", b"ef"]),
            Poll::Ready(4)
        );
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(task.write(&mut io, b"gh"), Poll::Ready(2));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(io.inner.writes, 0);
        // The next turn reads, then flushes: one write carries everything.
        task.read(&mut io);
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(io.inner.sent, b"abcdefgh");
        assert_eq!(io.inner.writes, 1);
        // A flush with nothing held writes nothing and wakes no one.
        let wakes = task.wakes();
        task.read(&mut io);
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!((io.inner.writes, task.wakes()), (1, wakes));
        // The next flush steps aside again.
        assert_eq!(task.write(&mut io, b"ij"), Poll::Ready(2));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!((io.inner.writes, task.wakes()), (1, wakes + 1));
    }

    #[test]
    fn a_socket_that_takes_part_or_nothing_is_written_from_where_it_stopped() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket {
            per_write: Some(3),
            full: true,
            ..Socket::default()
        });
        assert_eq!(task.write(&mut io, b"abcdefgh"), Poll::Ready(8));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        task.read(&mut io);
        assert_eq!(
            task.flush(&mut io),
            Poll::Pending,
            "the socket takes nothing"
        );
        io.inner.full = false;
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(io.inner.sent, b"abcdefgh");
        assert_eq!(io.inner.writes, 3);
    }

    #[test]
    fn past_its_bound_the_buffer_is_written_before_it_takes_more() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket::default());
        let piece = vec![7u8; HOLD / 2];
        assert_eq!(task.write(&mut io, &piece), Poll::Ready(piece.len()));
        assert_eq!(
            task.write(&mut io, &piece[1..]),
            Poll::Ready(piece.len() - 1)
        );
        // Under the bound, a write is taken whole, though it takes the buffer past it.
        assert_eq!(task.write(&mut io, b"0123456789"), Poll::Ready(10));
        assert_eq!((io.held.len(), io.inner.writes), (HOLD + 9, 0));
        io.inner.full = true;
        assert_eq!(
            task.write(&mut io, b"x"),
            Poll::Pending,
            "full, and held past its bound"
        );
        assert_eq!(io.held.len(), HOLD + 9);
        io.inner.full = false;
        assert_eq!(task.write(&mut io, b"x"), Poll::Ready(1));
        assert_eq!(io.inner.sent.len(), HOLD + 9);
        // What it sent, it no longer keeps room for.
        assert!(io.held.capacity() <= KEEP);
    }

    #[test]
    fn a_flush_in_a_turn_that_did_not_read_still_wakes_for_the_next() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket::default());
        assert_eq!(task.write(&mut io, b"ab"), Poll::Ready(2));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(task.wakes(), 1);
        // A later flush before any read: nothing is written, and the task is woken again, so
        // what is held never waits for a wake that does not come.
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!((io.inner.writes, task.wakes()), (0, 2));
        task.read(&mut io);
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        assert_eq!(io.inner.sent, b"ab");
    }

    #[test]
    fn a_shutdown_sends_what_is_held_first() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket {
            per_write: Some(4),
            full: true,
            ..Socket::default()
        });
        assert_eq!(task.write(&mut io, b"goaway"), Poll::Ready(6));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        let mut cx = Context::from_waker(&task.waker);
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_pending());
        assert!(!io.inner.shut, "not shut while the socket takes nothing");
        io.inner.full = false;
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready());
        assert_eq!(io.inner.sent, b"goaway");
        assert!(io.inner.shut);
    }

    #[test]
    fn a_broken_socket_fails_the_flush_that_sends() {
        let task = Task::new();
        let mut io = Coalesced::new(Socket {
            broken: true,
            ..Socket::default()
        });
        assert_eq!(task.write(&mut io, b"ab"), Poll::Ready(2));
        assert_eq!(task.flush(&mut io), Poll::Ready(()));
        task.read(&mut io);
        let mut cx = Context::from_waker(&task.waker);
        let flushed = Pin::new(&mut io).poll_flush(&mut cx);
        assert!(
            matches!(flushed, Poll::Ready(Err(ref e)) if e.kind() == io::ErrorKind::BrokenPipe),
            "{flushed:?}"
        );
    }
}

//! Writes to a client gathered across streams. Each stream runs as a task of its own and
//! wakes the connection's task when it has something to send; tokio runs the task woken last
//! first, so without this the connection would write (one `writev`, a loopback send and the
//! client's wake-up) as soon as the first stream had a frame, once per stream. Here the first
//! write of a flush steps aside once, to the back of the run queue: the streams that are
//! ready run first and add their frames, and one write carries them all. With nothing else
//! ready the task is polled again at once, so a lone call waits for no one.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// An I/O stream whose writes are held back for one turn of the scheduler per flush.
#[derive(Debug)]
pub(super) struct Coalesced<T> {
    inner: T,
    /// Whether this flush has stepped aside already (until it completes).
    yielded: bool,
}

impl<T> Coalesced<T> {
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            yielded: false,
        }
    }

    /// Ready to write once this flush has stepped aside.
    fn poll_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // A task that wakes itself goes to the back of the run queue.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesced<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesced<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_turn(cx));
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_turn(cx));
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = std::task::ready!(Pin::new(&mut this.inner).poll_flush(cx));
        this.yielded = false;
        Poll::Ready(flushed)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn each_flush_steps_aside_once_then_writes_through() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut io = Coalesced::new(Vec::<u8>::new());
        let mut write = |io: &mut Coalesced<Vec<u8>>, bytes: &[u8]| {
            Pin::new(io).poll_write(&mut cx, bytes).map(Result::unwrap)
        };
        // The first write of a flush waits one turn, and has its task woken for it.
        assert_eq!(write(&mut io, b"ab"), Poll::Pending);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(write(&mut io, b"ab"), Poll::Ready(2));
        assert_eq!(
            write(&mut io, b"cd"),
            Poll::Ready(2),
            "the rest of the flush writes"
        );
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
        // The next flush steps aside again.
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut io).poll_write(&mut cx, b"ef").is_pending());
        assert_eq!(io.inner, b"abcd");
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
    }
}

//! One request and its response on a connection: connecting (or an idle connection),
//! writing the request, reading the head, then the body as the caller asks for it, and the
//! connection back to the idle ones once the body has ended.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use http::header::HeaderMap;
use tokio::io::AsyncWrite;

use super::framing::Framing;
use super::{Cause, Failure, Io, Shared, head};

/// How much room a read has at least: a zero-delay reply of a few dozen chunks fits whole.
const READ_ROOM: usize = 16 * 1024;

/// A response head's status and headers.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HeaderMap,
}

/// What a body read brought.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Data was handed out; more may follow.
    Data,
    /// The body is complete (whatever data came with its end was handed out first).
    End,
}

/// One request and its response on a connection; dropping it before the body's end closes
/// the connection.
pub struct Call {
    shared: Arc<Shared>,
    request: Vec<u8>,
    stage: Stage,
}

type Opening = Pin<Box<dyn Future<Output = Result<Box<dyn Io>, Failure>> + Send>>;

enum Stage {
    Connecting(Opening),
    Writing {
        conn: Conn,
        written: usize,
    },
    /// Reading the head; `reusable` is false when the server answered before it had read the
    /// whole request, whose rest would be taken for the next request's start.
    Head {
        conn: Conn,
        reusable: bool,
    },
    Body {
        conn: Conn,
        framing: Framing,
        keep_alive: bool,
    },
    Over,
}

impl Call {
    /// Starts sending `request` on one of `shared`'s idle connections, or a new one.
    pub(super) fn start(shared: &Arc<Shared>, request: Vec<u8>) -> Self {
        match shared.idle.take() {
            Some(conn) => Self::on(shared, conn, request),
            None => Self {
                shared: shared.clone(),
                request,
                stage: Stage::Connecting(Box::pin(super::connect::open(shared.clone()))),
            },
        }
    }

    /// Starts sending `request` on `conn`: an idle connection, or the fuzz entry point's
    /// in-memory one (`fuzz.rs`), which drives the rest of the call as a socket would.
    pub(super) fn on(shared: &Arc<Shared>, conn: Conn, request: Vec<u8>) -> Self {
        Self {
            shared: shared.clone(),
            request,
            stage: Stage::Writing { conn, written: 0 },
        }
    }

    /// Connects if need be, sends the request and reads the response head.
    pub fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<Result<Response, Failure>> {
        loop {
            match &mut self.stage {
                Stage::Connecting(opening) => {
                    let opened = ready!(opening.as_mut().poll(cx));
                    self.stage = match opened {
                        Ok(io) => Stage::Writing {
                            conn: Conn::new(io),
                            written: 0,
                        },
                        Err(failure) => return self.fail(failure),
                    }
                }
                Stage::Writing { conn, written } => {
                    let reusable = match conn.poll_send(cx, &self.request, written) {
                        Poll::Ready(Ok(())) => true,
                        // A server that answered early (a 413, a 401) and closed: its answer
                        // is the outcome, not the write it cut short.
                        Poll::Ready(Err(e)) => {
                            if !conn.answered() {
                                return self.fail(Failure::Unsent(e.into()));
                            }
                            false
                        }
                        // A server may answer before it has read the whole request and stop
                        // reading (a 413 for a body too large): the write would wait for
                        // ever, so the socket is read meanwhile, and an answer is the outcome.
                        Poll::Pending => match conn.poll_early_answer(cx) {
                            Poll::Ready(Ok(())) => false,
                            Poll::Ready(Err(e)) => {
                                return self.fail(Failure::Unsent(e.into()));
                            }
                            Poll::Pending => return Poll::Pending,
                        },
                    };
                    let Stage::Writing { conn, .. } =
                        std::mem::replace(&mut self.stage, Stage::Over)
                    else {
                        unreachable!("the stage was just matched")
                    };
                    self.stage = Stage::Head { conn, reusable };
                }
                Stage::Head { conn, .. } => match head::parse(conn.unread()) {
                    Ok(Some((head, taken))) => {
                        conn.buf.advance(taken);
                        let Stage::Head { conn, reusable } =
                            std::mem::replace(&mut self.stage, Stage::Over)
                        else {
                            unreachable!("the stage was just matched")
                        };
                        self.stage = Stage::Body {
                            conn,
                            framing: head.framing,
                            keep_alive: head.keep_alive && reusable,
                        };
                        return Poll::Ready(Ok(Response {
                            status: head.status,
                            headers: head.headers,
                        }));
                    }
                    Ok(None) => match ready!(conn.poll_fill_head(cx)) {
                        Ok(0) => {
                            return self.fail(Failure::Lost(Cause::ClosedBeforeResponse));
                        }
                        Ok(_) => {}
                        Err(e) => return self.fail(Failure::Lost(e.into())),
                    },
                    Err(e) => return self.fail(Failure::Lost(e.into())),
                },
                Stage::Body { .. } | Stage::Over => {
                    return self.fail(Failure::Lost(Cause::HeadAlreadyRead));
                }
            }
        }
    }

    /// Reads the body: hands whatever data the buffer and at most one read hold to `data`,
    /// and returns once some was handed out or the body ended. At the end, a connection that
    /// may carry another request goes back to the idle ones.
    pub fn poll_body(
        &mut self,
        cx: &mut Context<'_>,
        data: &mut dyn FnMut(&[u8]),
    ) -> Poll<Result<Progress, Failure>> {
        let Stage::Body { conn, framing, .. } = &mut self.stage else {
            return Poll::Ready(Ok(Progress::End));
        };
        loop {
            let mut handed = false;
            if !conn.buf.is_empty() {
                let decoded = framing.decode(&conn.buf, &mut |piece| {
                    handed = true;
                    data(piece);
                });
                match decoded {
                    Ok(taken) => conn.buf.advance(taken),
                    Err(e) => return self.fail(Failure::Broken(e.into())),
                }
            }
            if framing.is_done() {
                self.release();
                return Poll::Ready(Ok(Progress::End));
            }
            if handed {
                return Poll::Ready(Ok(Progress::Data));
            }
            match ready!(conn.poll_fill(cx, usize::MAX)) {
                Ok(0) if framing.ends_at_close() => {
                    self.stage = Stage::Over;
                    return Poll::Ready(Ok(Progress::End));
                }
                Ok(0) => {
                    return self.fail(Failure::Broken(Cause::ClosedBeforeEnd));
                }
                Ok(_) => {}
                Err(e) => return self.fail(Failure::Broken(e.into())),
            }
        }
    }

    /// How many bytes the call holds read but not yet taken: what the fuzz entry point
    /// (`fuzz.rs`) holds to the bounds.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(super) fn buffered(&self) -> usize {
        match &self.stage {
            Stage::Writing { conn, .. } | Stage::Head { conn, .. } | Stage::Body { conn, .. } => {
                conn.buf.len()
            }
            Stage::Connecting(_) | Stage::Over => 0,
        }
    }

    /// Ends the call: a connection still mid-response is closed.
    pub fn close(&mut self) {
        self.stage = Stage::Over;
    }

    fn fail<T>(&mut self, failure: Failure) -> Poll<Result<T, Failure>> {
        self.stage = Stage::Over;
        Poll::Ready(Err(failure))
    }

    /// The body is read: its connection goes back to the idle ones if it can carry another
    /// request (the server keeps it, and sent nothing past the body).
    fn release(&mut self) {
        if let Stage::Body {
            conn,
            keep_alive: true,
            ..
        } = std::mem::replace(&mut self.stage, Stage::Over)
            && conn.buf.is_empty()
        {
            self.shared.idle.put(conn);
        }
    }
}

/// An open connection and what was read from it but not yet taken.
pub(super) struct Conn {
    io: Box<dyn Io>,
    buf: BytesMut,
}

impl Conn {
    pub(super) fn new(io: Box<dyn Io>) -> Self {
        Self {
            io,
            buf: BytesMut::with_capacity(READ_ROOM),
        }
    }

    fn unread(&self) -> &[u8] {
        &self.buf
    }

    /// Writes `request` from `written` on, then flushes it.
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        request: &[u8],
        written: &mut usize,
    ) -> Poll<std::io::Result<()>> {
        while *written < request.len() {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &request[*written..]))? {
                0 => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                n => *written += n,
            }
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// While a write waits: reads what the server sent, ready once a whole response head
    /// (or more than a head may hold, for the head's parser to refuse) has arrived. Pending
    /// otherwise, registered to be woken by more to read; at the stream's end the wait is
    /// left to the write, which fails once the server is gone. A failed read fails the call.
    fn poll_early_answer(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while matches!(head::parse(&self.buf), Ok(None)) {
            if ready!(self.poll_fill_head(cx))? == 0 {
                return Poll::Pending;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Whether a whole response head has arrived already, reading what the socket holds
    /// without waiting.
    fn answered(&mut self) -> bool {
        let mut now = Context::from_waker(std::task::Waker::noop());
        while self.buf.len() <= head::MAX_HEAD_BYTES
            && matches!(self.poll_fill_head(&mut now), Poll::Ready(Ok(1..)))
        {}
        matches!(head::parse(&self.buf), Ok(Some(_)))
    }

    /// Reads what the socket holds already, without waiting (or registering to be woken).
    pub(super) fn fill_now(&mut self) -> Poll<std::io::Result<usize>> {
        let mut now = Context::from_waker(std::task::Waker::noop());
        self.poll_fill(&mut now, usize::MAX)
    }

    /// Reads more of a response head, never past the byte after its bound: a head that never
    /// ends is refused holding [`head::MAX_HEAD_BYTES`] + 1 bytes, not that and a read's
    /// worth more (the buffer's room doubles as it grows). It is only called while what is
    /// held fits the bound, so there is room for one byte at least.
    fn poll_fill_head(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        let room = (head::MAX_HEAD_BYTES + 1).saturating_sub(self.buf.len());
        self.poll_fill(cx, room)
    }

    /// Reads what the socket has into the buffer, `most` bytes at most: the count, 0 at its
    /// end.
    fn poll_fill(&mut self, cx: &mut Context<'_>, most: usize) -> Poll<std::io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_ROOM / 4 {
            self.buf.reserve(READ_ROOM);
        }
        let mut buf = (&mut self.buf).limit(most);
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut buf)
    }
}

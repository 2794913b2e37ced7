//! Streams held by their connection's task until their request has come. A client writes a
//! call's headers and its message in separate frames (some end it in one more, empty), which
//! often reach the server in separate reads: a stream served from its headers alone would have
//! its task run, find no message, wait, and be woken again by the connection's task once the
//! message came. And h2 keeps every stream of a connection under one lock, which that task
//! holds as it reads, so a stream's task on another worker, reading its message, waits on it
//! there too. Held here instead, a stream's task starts with its message in hand (its data
//! frames, taken in the connection's task: one, or the first two of a longer message) and,
//! when its end came too, never touches the request's half of the stream.
//!
//! A stream waits at most one turn of the connection's task: when a turn ends with streams
//! still waiting, the task wakes itself, and the next turn serves them with whatever has come
//! (their tasks then read the rest as before, within the request's time). So no stream waits
//! for a read that may not come, and a call that came whole waits for no one.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::RecvStream;

use super::stream::Arrived;

/// The streams a connection holds, each with what the connection keeps with it (`T`).
pub(super) struct Arrivals<T> {
    held: Vec<Held<T>>,
}

struct Held<T> {
    recv: RecvStream,
    /// Its data frames taken so far (empty ones skipped): a message of one frame, or the
    /// first two of a longer one.
    data: [Option<Bytes>; 2],
    /// Whether a turn ended with it waiting.
    waited: bool,
    with: T,
}

impl<T> Held<T> {
    /// Whether to serve it now: its request came whole (its data and its end), or more of it
    /// came than is held here, or it waited a turn (with what came). `cx` wakes no one.
    fn ready(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            match self.recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    // A failure here means the stream is gone; its task's read says so.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    // An empty frame carries nothing but, often, the end.
                    if data.is_empty() {
                        continue;
                    }
                    if self.data[0].is_none() {
                        self.data[0] = Some(data);
                    } else {
                        // Its task reads the rest.
                        self.data[1] = Some(data);
                        return true;
                    }
                }
                // Its end, or an error, which its task reads.
                Poll::Ready(_) => return true,
                // Left with h2, the no-op waker is replaced by the stream task's own, which
                // polls before it waits.
                Poll::Pending => return self.waited,
            }
        }
    }
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Self { held: Vec::new() }
    }
}

impl<T> Arrivals<T> {
    /// Holds a stream just accepted, with its request's body `recv`.
    pub(super) fn hold(&mut self, recv: RecvStream, with: T) {
        self.held.push(Held {
            recv,
            data: [None, None],
            waited: false,
            with,
        });
    }

    /// At the end of a turn (every frame read so far is in): moves the streams to serve into
    /// `ready`, in the order they came, and says whether there are any. With none and some
    /// still waiting, it marks them and wakes the task (`cx`) for one more turn.
    pub(super) fn end_turn(&mut self, ready: &mut Vec<(Arrived, T)>, cx: &Context<'_>) -> bool {
        let mut noop = Context::from_waker(Waker::noop());
        ready.extend(
            self.held
                .extract_if(.., |held| held.ready(&mut noop))
                .map(|held| (Arrived::new(held.data, held.recv), held.with)),
        );
        if !ready.is_empty() {
            return true;
        }
        if !self.held.is_empty() {
            for held in &mut self.held {
                held.waited = true;
            }
            cx.waker().wake_by_ref();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use h2::client::SendRequest;
    use h2::server::{Connection, SendResponse};
    use tokio::io::DuplexStream;

    use super::*;
    use crate::server::coalesce::tests::Count;

    type Server = Connection<DuplexStream, Bytes>;

    /// A client and a server over memory, handshakes done.
    async fn pair() -> (SendRequest<Bytes>, Server) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (accepted, handshake) =
            tokio::join!(h2::server::handshake(server), h2::client::handshake(client));
        let (send, connection) = handshake.unwrap();
        tokio::spawn(connection);
        (send, accepted.unwrap())
    }

    /// One turn of the server as the connection's task has it: what has come read, new
    /// streams held, then the turn's end; the streams it serves, and the task's wakes.
    async fn turn(
        server: &mut Server,
        arrivals: &mut Arrivals<SendResponse<Bytes>>,
    ) -> (Vec<(Arrived, SendResponse<Bytes>)>, usize) {
        // The client's connection writes what it was given first.
        tokio::task::yield_now().await;
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        while let Poll::Ready(Some(accepted)) = server.poll_accept(&mut cx) {
            let (request, respond) = accepted.unwrap();
            arrivals.hold(request.into_body(), respond);
        }
        let mut ready = Vec::new();
        arrivals.end_turn(&mut ready, &cx);
        (ready, count.0.load(Ordering::SeqCst))
    }

    fn post() -> http::Request<()> {
        http::Request::post("http://localhost/call")
            .body(())
            .unwrap()
    }

    fn message(bytes: &'static [u8]) -> Bytes {
        Bytes::from_static(bytes)
    }

    #[tokio::test]
    async fn a_request_that_came_whole_is_served_in_its_turn_with_its_message() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        body.send_data(message(b"message"), true).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].0.parts(), (vec![&message(b"message")], false));
        assert_eq!(wakes, 0, "nothing waits, so the task does not wake itself");
        // Nor does one whose headers ended it.
        let _ = client.send_request(post(), true).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready[0].0.parts(), (vec![], false));
        // Nor one whose end came alone, in an empty frame after its message, as some clients
        // send it: the empty frame is read here too.
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        body.send_data(message(b"message"), false).unwrap();
        body.send_data(Bytes::new(), true).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
        assert_eq!(ready[0].0.parts(), (vec![&message(b"message")], false));
    }

    #[tokio::test]
    async fn a_stream_waits_one_turn_for_its_message_and_no_more() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert!(ready.is_empty());
        assert_eq!(
            wakes, 1,
            "a stream waits: the task wakes itself for the next turn"
        );
        // Its message comes in time: taken with it.
        body.send_data(message(b"message"), true).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready[0].0.parts(), (vec![&message(b"message")], false));

        // Another's does not: served after its turn of waiting, the rest for its task to read.
        let (_response, mut late) = client.send_request(post(), false).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert!(ready.is_empty());
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
        assert_eq!(ready[0].0.parts(), (vec![], true));
        late.send_data(message(b"late"), true).unwrap();

        // One still coming after its turn of waiting: what came is taken.
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert!(ready.is_empty());
        body.send_data(message(b"first"), false).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready[0].0.parts(), (vec![&message(b"first")], true));
    }

    #[tokio::test]
    async fn a_message_of_more_frames_is_served_at_once_with_two_of_them() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        for part in [&b"one"[..], b"two", b"three"] {
            body.send_data(message(part), false).unwrap();
        }
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
        let (one, two) = (message(b"one"), message(b"two"));
        assert_eq!(ready[0].0.parts(), (vec![&one, &two], true));
    }
}

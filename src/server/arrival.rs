//! Streams held by their connection's task until their request has come. A client writes a
//! call's headers and its message in separate frames (some end it with one more, empty),
//! which often reach the server in separate reads: a stream served from its headers alone
//! would have its task run, find no message, wait, and be woken again by the connection's
//! task once the message came. And h2 keeps every stream of a connection under one lock,
//! which that task holds as it reads, so a stream's task on another worker, reading its
//! message, waits on it there too. Held here instead, a stream's task starts with its message
//! in hand (its data frames, taken in the connection's task: one, or the first two of a
//! longer message) and, when its end came too, never touches the request's half of the
//! stream.
//!
//! A stream waits at most until its connection's task has stepped aside once: when the task
//! has read all there is and streams still wait, it wakes itself (to run again after the
//! tasks already waiting), and its next turn serves them with whatever has come. Their tasks
//! then read the rest as before, within `server.request_timeout` (reflection's streams,
//! which a client keeps open, within no time). So no stream waits for a read that may not
//! come, and a call that came whole waits for no one. A stream whose request keeps coming,
//! as reflection's does, starts after that one step aside.

use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::RecvStream;

/// The streams a connection holds, each with what the connection keeps with it (`T`).
pub(super) struct Arrivals<T> {
    held: Vec<Held<T>>,
    /// How many times the task has stepped aside with streams held.
    stepped: u64,
}

struct Held<T> {
    recv: RecvStream,
    /// Its data frames taken so far (empty ones skipped): a message of one frame, or the
    /// first two of a longer one.
    data: [Option<Bytes>; 2],
    /// How many times the task had stepped aside when it came.
    since: u64,
    with: T,
}

impl<T> Held<T> {
    /// Whether to serve it now: its request came whole (its data and its end), or more of it
    /// came than is held here, or the task stepped aside since it came (`stepped` times in
    /// all). `cx` wakes no one.
    fn ready(&mut self, cx: &mut Context<'_>, stepped: u64) -> bool {
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
                Poll::Pending => return self.since < stepped,
            }
        }
    }
}

impl<T> Default for Arrivals<T> {
    fn default() -> Self {
        Self {
            held: Vec::new(),
            stepped: 0,
        }
    }
}

impl<T> Arrivals<T> {
    /// Holds a stream just accepted, with its request's body `recv`.
    pub(super) fn hold(&mut self, recv: RecvStream, with: T) {
        self.held.push(Held {
            recv,
            data: [None, None],
            since: self.stepped,
            with,
        });
    }

    /// Once the task has read all there is: moves the streams to serve into `ready`, in the
    /// order they came, and says whether there are any (the task then serves them and reads
    /// again). With none, and some still waiting, the task steps aside: it is woken (`cx`)
    /// for its next turn, which serves those.
    pub(super) fn end_turn(&mut self, ready: &mut Vec<(Arrived, T)>, cx: &Context<'_>) -> bool {
        let mut noop = Context::from_waker(Waker::noop());
        let stepped = self.stepped;
        ready.extend(
            self.held
                .extract_if(.., |held| held.ready(&mut noop, stepped))
                .map(|held| (Arrived::new(held.data, held.recv), held.with)),
        );
        if !ready.is_empty() {
            return true;
        }
        if !self.held.is_empty() {
            self.stepped += 1;
            cx.waker().wake_by_ref();
        }
        false
    }
}

/// A request's body as its connection's task found it: the data frames taken there, and the
/// stream to read the rest from unless it had ended.
pub(super) struct Arrived {
    data: [Option<Bytes>; 2],
    rest: Option<RecvStream>,
}

impl Arrived {
    /// `data` taken from `recv`, which is let go here when nothing more is to come.
    fn new(data: [Option<Bytes>; 2], recv: RecvStream) -> Self {
        Self {
            data,
            rest: (!recv.is_end_stream()).then_some(recv),
        }
    }

    /// The data frames taken, in order, and the stream to read the rest from, if any.
    pub(super) fn into_parts(self) -> ([Option<Bytes>; 2], Option<RecvStream>) {
        (self.data, self.rest)
    }

    /// The data frames taken, and whether there is more to read.
    #[cfg(test)]
    fn parts(&self) -> (Vec<&Bytes>, bool) {
        (self.data.iter().flatten().collect(), self.rest.is_some())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use h2::SendStream;
    use h2::client::{ResponseFuture, SendRequest};
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

    /// One poll of the connection's task, as `Http2::turn` and its loop have it: what has
    /// come read and new streams held, the turn's end, and again while it serves some; the
    /// streams served, and the task's wakes.
    async fn turn(
        server: &mut Server,
        arrivals: &mut Arrivals<SendResponse<Bytes>>,
    ) -> (Vec<(Arrived, SendResponse<Bytes>)>, usize) {
        // The client's connection writes what it was given first.
        tokio::task::yield_now().await;
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut served = Vec::new();
        loop {
            while let Poll::Ready(Some(accepted)) = server.poll_accept(&mut cx) {
                let (request, respond) = accepted.unwrap();
                arrivals.hold(request.into_body(), respond);
            }
            let mut ready = Vec::new();
            if !arrivals.end_turn(&mut ready, &cx) {
                break;
            }
            served.append(&mut ready);
        }
        (served, count.0.load(Ordering::SeqCst))
    }

    /// A request whose message has not come, sent by `client`: held at the connection's next
    /// turn. Its response, and its body to send the message on.
    async fn held(
        client: &mut SendRequest<Bytes>,
        server: &mut Server,
        arrivals: &mut Arrivals<SendResponse<Bytes>>,
    ) -> (ResponseFuture, SendStream<Bytes>) {
        let sent = client.send_request(post(), false).unwrap();
        let (ready, _) = turn(server, arrivals).await;
        assert!(ready.is_empty(), "it waits for its message");
        sent
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
        assert_eq!((ready.len(), wakes), (1, 0), "nothing waits: no wake");
        assert_eq!(ready[0].0.parts(), (vec![&message(b"message")], false));
        // Nor does one whose headers ended it.
        let _ = client.send_request(post(), true).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
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
    async fn a_stream_waits_for_its_message_until_the_task_steps_aside_once() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        let (_response, mut body) = client.send_request(post(), false).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert!(ready.is_empty());
        assert_eq!(
            wakes, 1,
            "a stream waits: the task wakes itself for its next turn"
        );
        // Its message comes in time: taken with it.
        body.send_data(message(b"message"), true).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready[0].0.parts(), (vec![&message(b"message")], false));

        // Another's does not: served at the next turn, the rest for its task to read.
        let (_response, mut late) = held(&mut client, &mut server, &mut arrivals).await;
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
        assert_eq!(ready[0].0.parts(), (vec![], true));
        late.send_data(message(b"late"), true).unwrap();

        // One still coming by then: what came is taken.
        let (_response, mut body) = held(&mut client, &mut server, &mut arrivals).await;
        body.send_data(message(b"first"), false).unwrap();
        let (ready, _) = turn(&mut server, &mut arrivals).await;
        assert_eq!(ready[0].0.parts(), (vec![&message(b"first")], true));
    }

    #[tokio::test]
    async fn a_waiting_stream_is_served_at_the_next_turn_though_others_keep_coming_whole() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        // One waits, another comes whole in the same read: the whole one is served, the task
        // steps aside once for the other.
        let (_response, _waits) = client.send_request(post(), false).unwrap();
        let (_response, mut whole) = client.send_request(post(), false).unwrap();
        whole.send_data(message(b"whole"), true).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 1));
        assert_eq!(ready[0].0.parts(), (vec![&message(b"whole")], false));
        // The next turn serves it, with another that came whole.
        let (_response, mut whole) = client.send_request(post(), false).unwrap();
        whole.send_data(message(b"whole"), true).unwrap();
        let (ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (2, 0));
        assert_eq!(ready[0].0.parts(), (vec![], true));
    }

    #[tokio::test]
    async fn a_stream_reset_while_it_waits_is_served_for_its_task_to_see_the_reset() {
        let (mut client, mut server) = pair().await;
        let mut arrivals = Arrivals::default();
        let (_response, mut body) = held(&mut client, &mut server, &mut arrivals).await;
        body.send_reset(h2::Reason::CANCEL);
        let (mut ready, wakes) = turn(&mut server, &mut arrivals).await;
        assert_eq!((ready.len(), wakes), (1, 0));
        let (data, rest) = ready.remove(0).0.into_parts();
        assert!(data.iter().all(Option::is_none));
        let mut rest = rest.expect("its task reads the reset");
        let read = std::future::poll_fn(|cx| rest.poll_data(cx)).await;
        assert!(matches!(read, Some(Err(_))), "{read:?}");
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

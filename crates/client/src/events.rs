//! [`Events`]: an execution's events as one stream that outlives the calls it reads them
//! through. When a call breaks it opens another (after a wait, within [`Retry`]'s bounds):
//! `Watch` after the last sequence delivered once the execution's id is known, else the same
//! `Execute` again, whose idempotency key attaches it to the execution the first call
//! started. Events at or before the last sequence delivered are dropped, so each is seen
//! once; the stream ends after the terminal event.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Request, Status, Streaming};
use tonic_prost::ProstCodec;

use crate::event::Event;
use crate::pb::{self, ExecutionEvent};
use crate::retry::{Retry, resumable};

const EXECUTE: &str = "/model_runtime.v1.ModelRuntime/Execute";
const WATCH: &str = "/model_runtime.v1.ModelRuntime/Watch";

/// An execution's events, resumed across broken calls, each once, ending after the terminal
/// event. An `Err` item is final: a failure that resuming cannot mend, or one still there
/// when [`Retry::patience`] ran out.
pub struct Events<E = ExecutionEvent> {
    inner: Pin<Box<dyn Stream<Item = Result<E, Status>> + Send>>,
}

/// Told of each resume: the last sequence delivered, and what broke the call.
pub(crate) type OnResume = std::sync::Arc<dyn Fn(u64, &Status) + Send + Sync>;

impl<E> std::fmt::Debug for Events<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl<E> Stream for Events<E> {
    type Item = Result<E, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Where the stream stands.
struct Reader<E> {
    grpc: Grpc<Channel>,
    retry: Retry,
    /// The `Execute` to send again while no event has come.
    request: Option<pb::ExecuteRequest>,
    /// Whether `request` may be sent again (it has an idempotency key).
    resend: bool,
    id: Option<String>,
    /// The last sequence delivered.
    last: u64,
    call: Option<Streaming<E>>,
    /// Tries since the last event delivered, and when the first of them failed.
    tries: u32,
    failing_since: Option<tokio::time::Instant>,
    on_resume: Option<OnResume>,
    done: bool,
}

impl<E: Event> Events<E> {
    pub(crate) async fn execute(
        channel: Channel,
        retry: Retry,
        request: pb::ExecuteRequest,
        on_resume: Option<OnResume>,
    ) -> Result<Self, Status> {
        // Without a key a request is never sent twice: a call that breaks before its first
        // event is not tried again.
        let resend = !request.idempotency_key.is_empty();
        let mut reader = Reader::new(channel, retry, Some(request), None, 0, on_resume);
        reader.resend = resend;
        Self::start(reader).await
    }

    pub(crate) async fn watch(
        channel: Channel,
        retry: Retry,
        id: String,
        after: u64,
        on_resume: Option<OnResume>,
    ) -> Result<Self, Status> {
        Self::start(Reader::new(
            channel,
            retry,
            None,
            Some(id),
            after,
            on_resume,
        ))
        .await
    }

    /// Opens the first call (a request the server refuses is the caller's error now), then
    /// reads on.
    async fn start(mut reader: Reader<E>) -> Result<Self, Status> {
        reader.call = Some(reader.open_with_retries().await?);
        // Boxed: the stream's state moves into each step's future and back, and the reader
        // (with its call) is hundreds of bytes to copy per event; a box is one word.
        let reader = Box::new(reader);
        let inner = futures_util::stream::unfold(reader, |mut reader| async move {
            let item = reader.next().await?;
            Some((item, reader))
        });
        Ok(Self {
            inner: Box::pin(inner),
        })
    }
}

impl<E: Event> Reader<E> {
    fn new(
        channel: Channel,
        retry: Retry,
        request: Option<pb::ExecuteRequest>,
        id: Option<String>,
        last: u64,
        on_resume: Option<OnResume>,
    ) -> Self {
        Self {
            grpc: Grpc::new(channel),
            retry,
            request,
            id,
            last,
            call: None,
            tries: 0,
            failing_since: None,
            on_resume,
            resend: true,
            done: false,
        }
    }

    /// One call: `Watch` after the last event when the execution is known, else `Execute`
    /// (the request kept for sending again only when it may be: it has a key).
    async fn open(&mut self) -> Result<Streaming<E>, Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let call = match &self.id {
            Some(id) => {
                let watch = pb::WatchRequest {
                    execution_id: id.clone(),
                    after_sequence: self.last,
                };
                let codec = ProstCodec::<pb::WatchRequest, E>::default();
                let path = PathAndQuery::from_static(WATCH);
                self.grpc
                    .server_streaming(Request::new(watch), path, codec)
                    .await?
            }
            None => {
                let request = match (&mut self.request, self.resend) {
                    (Some(request), true) => request.clone(),
                    (request, false) => request.take().ok_or_else(|| {
                        Status::unavailable("the request was sent once and has no key to resend it")
                    })?,
                    (None, true) => return Err(Status::internal("nothing to read")),
                };
                let codec = ProstCodec::<pb::ExecuteRequest, E>::default();
                let path = PathAndQuery::from_static(EXECUTE);
                self.grpc
                    .server_streaming(Request::new(request), path, codec)
                    .await?
            }
        };
        Ok(call.into_inner())
    }

    async fn open_with_retries(&mut self) -> Result<Streaming<E>, Status> {
        loop {
            match self.open().await {
                Ok(call) => return Ok(call),
                // Refused before anything was accepted: safe to send again only with a key.
                Err(status) if self.id.is_none() && !self.resend => return Err(status),
                Err(status) => self.pause(status).await?,
            }
        }
    }

    /// Waits before the next try after `status`, or gives `status` back when it is final:
    /// not resumable, or patience would run out during the wait.
    async fn pause(&mut self, status: Status) -> Result<(), Status> {
        let since = *self
            .failing_since
            .get_or_insert_with(tokio::time::Instant::now);
        let wait = self.retry.wait(self.tries, &status);
        if !resumable(&status) || since.elapsed() + wait > self.retry.patience {
            return Err(status);
        }
        if let Some(told) = &self.on_resume {
            told(self.last, &status);
        }
        tokio::time::sleep(wait).await;
        self.tries += 1;
        Ok(())
    }

    /// The next event to deliver, a final error, or `None` after the terminal event.
    async fn next(&mut self) -> Option<Result<E, Status>> {
        loop {
            if self.done {
                return None;
            }
            let call = match self.call.as_mut() {
                Some(call) => call,
                None => match self.open_with_retries().await {
                    Ok(call) => self.call.insert(call),
                    Err(status) => {
                        self.done = true;
                        return Some(Err(status));
                    }
                },
            };
            let broke = match call.message().await {
                Ok(Some(event)) if event.sequence() <= self.last => continue,
                Ok(Some(event)) => {
                    self.last = event.sequence();
                    if self.id.is_none() {
                        self.id = Some(event.execution_id());
                    }
                    self.tries = 0;
                    self.failing_since = None;
                    self.done = event.is_terminal();
                    if self.done {
                        // The call's end (its trailers) follows at once: read it, so the
                        // call ends cleanly instead of being reset when this stream is
                        // dropped (a server counts a peer's resets).
                        while let Ok(Some(_)) = call.message().await {}
                        self.call = None;
                    }
                    return Some(Ok(event));
                }
                // Ended before its execution did: a server going away closed it.
                Ok(None) => Status::unavailable("the call ended before its execution did"),
                Err(status) => status,
            };
            self.call = None;
            // Broken before the first event without a key: the execution is unknown and the
            // request may not be sent again.
            if self.id.is_none() && !self.resend {
                self.done = true;
                return Some(Err(broke));
            }
            if let Err(status) = self.pause(broke).await {
                self.done = true;
                return Some(Err(status));
            }
        }
    }
}

//! Replicas on one PostgreSQL store (issue 25), with real `serve` processes, real gRPC over
//! loopback, and an OpenAI upstream that records every request:
//! - `follow`: a watch on one replica follows an execution another runs, from its cursor; a
//!   cancel on a replica that does not own an execution reaches the owner; an idempotency key
//!   raced on two replicas makes one execution;
//! - `takeover`: a replica killed, or paused past its lease, has its executions ended
//!   `outcome_unknown` by a survivor, with nothing sent to the provider again, and the paused
//!   one appends nothing when it comes back and serves new work;
//! - `database`: a replica is NOT_SERVING while its database is away (and before it first
//!   answered) and serves again when it is back, without a restart.
//!
//! Each test of `follow` and `takeover` has a schema of its own on
//! `MODEL_RUNTIME_TEST_POSTGRES_URL` (without it they skip, with CI=true they fail), dropped
//! when it ends; `database` runs a PostgreSQL server of its own, to stop it. Time bounds are
//! derived from the lease and generous: the machine may be shared and busy.

mod database;
mod faults;
mod follow;
mod takeover;

use crate::common;

use std::time::Duration;

use common::postgres::URL_ENV;
use common::replica::Replica;
use common::upstream::{Behaviour, Step, sse_steps};
use common::{deadline_in, failed_payload, request, script, within};
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, Chunk, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

/// The bound on anything that runs to its end here (a stream, a wait for a state): far beyond
/// what a working server takes, still short enough to end a test that hangs.
const LONG: Duration = Duration::from_secs(60);

/// The replicas' poll: a notification lost delays a follower by at most this.
const POLL: Duration = Duration::from_millis(200);

/// What the slow scripted model streams, a word every [`WORD_INTERVAL_MS`].
const WORDS: &str = "one two three four five six seven eight nine ten eleven twelve thirteen \
                     fourteen fifteen sixteen seventeen eighteen nineteen twenty ";
const WORD_INTERVAL_MS: u64 = 100;

/// `chat` on the `slow` scripted model; `echo` on a scripted echo.
fn scripted() -> ConfigBuilder {
    let slow = script(|s| {
        s.reply = Some(WORDS.into());
        s.chunk = Chunk::Word;
        s.delta_interval_ms = WORD_INTERVAL_MS;
    });
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted()
                .scripted_model("slow", &["text"], slow)
                .model("echo", &["text"]),
        )
        .policy("slow", PolicySpec::new(&["scripted/slow"]))
        .policy("echo", PolicySpec::new(&["scripted/echo"]))
        .ability("chat", AbilitySpec::new("slow"))
        .ability("echo", AbilitySpec::new("echo"))
}

/// `chat` on the upstream at `base_url`, one attempt (so a failed attempt is never sent
/// again, and each request upstream is one execution's); `echo` on a scripted echo.
fn remote(base_url: &str) -> ConfigBuilder {
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "remote",
            ProviderSpec::openai(base_url)
                .max_concurrency(64)
                .model("m", &["text"])
                .timeouts(Duration::from_secs(5), LONG, LONG),
        )
        .provider(
            "scripted",
            ProviderSpec::scripted().model("echo", &["text"]),
        )
        .policy("remote", PolicySpec::new(&["remote/m"]).max_attempts(1))
        .policy("echo", PolicySpec::new(&["scripted/echo"]))
        .ability("chat", AbilitySpec::new("remote"))
        .ability("echo", AbilitySpec::new("echo"))
}

/// An OpenAI chunk carrying `content`.
fn chunk(content: &str) -> Vec<u8> {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
    )
    .into_bytes()
}

/// The end of an OpenAI stream.
fn finish() -> Vec<Step> {
    vec![
        Step::Send(
            b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".to_vec(),
        ),
        Step::Send(b"data: [DONE]\n\n".to_vec()),
    ]
}

/// A reply that ends at once.
fn quick() -> Behaviour {
    let mut steps = vec![Step::Send(chunk("quick ")), Step::Send(chunk("reply"))];
    steps.extend(finish());
    sse_steps(steps)
}

/// A delta, then nothing until the client hangs up.
fn stalled() -> Behaviour {
    sse_steps(vec![Step::Send(chunk("held ")), Step::Stall])
}

/// `n` deltas, `interval` apart, then the end.
fn deltas_every(n: usize, interval: Duration) -> Behaviour {
    let mut steps = Vec::new();
    for i in 0..n {
        steps.push(Step::Send(chunk(&format!("w{i} "))));
        steps.push(Step::Sleep(interval));
    }
    steps.extend(finish());
    sse_steps(steps)
}

/// A delta every 250 ms for a minute: the provider keeps streaming while a replica is
/// stopped, so one that comes back has deltas waiting to be appended.
fn trickle() -> Behaviour {
    deltas_every(240, Duration::from_millis(250))
}

/// `prompt` on `ability` with a deadline the tests never reach.
fn ask(ability: &str, prompt: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        deadline: Some(deadline_in(Duration::from_secs(300))),
        ..request(ability, prompt)
    }
}

/// `n` replicas named A, B, C... on the configuration `toml`, its store at `url`.
async fn replicas(n: usize, toml: &str, url: &str) -> Vec<Replica> {
    let mut started = Vec::new();
    for name in ["A", "B", "C"].into_iter().take(n) {
        started.push(Replica::start(name, toml, &[(URL_ENV, url)]).await);
    }
    started
}

/// How a stream read for a while ended.
#[derive(Debug)]
enum End {
    /// After its last event, as a stream does after the terminal one.
    Done,
    /// With an error status.
    Error(Status),
    /// It had not ended when the time was up.
    Open,
}

/// Reads `stream` until it ends or `limit` passes: the events, and how it ended.
async fn drain_for(
    mut stream: Streaming<pb::ExecutionEvent>,
    limit: Duration,
) -> (Vec<pb::ExecutionEvent>, End) {
    let mut events = Vec::new();
    let read = tokio::time::timeout(limit, async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(status) => return End::Error(status),
            }
        }
        End::Done
    })
    .await;
    (events, read.unwrap_or(End::Open))
}

/// Reads `stream` to its end within [`LONG`]: the events, and the error that ended it, if one
/// did.
async fn drain(stream: Streaming<pb::ExecutionEvent>) -> (Vec<pb::ExecutionEvent>, Option<Status>) {
    match drain_for(stream, LONG).await {
        (events, End::Done) => (events, None),
        (events, End::Error(status)) => (events, Some(status)),
        (events, End::Open) => panic!("the stream did not end within {LONG:?}: {events:?}"),
    }
}

/// `Watch` from `after` to its end; every event of it must arrive.
async fn watch_all(
    mut client: ModelRuntimeClient<Channel>,
    id: &str,
    after: u64,
) -> Vec<pb::ExecutionEvent> {
    let stream = within(client.watch(pb::WatchRequest {
        execution_id: id.to_owned(),
        after_sequence: after,
    }))
    .await
    .unwrap_or_else(|s| panic!("watch {id} after {after}: {s:?}"))
    .into_inner();
    let (events, error) = drain(stream).await;
    assert!(
        error.is_none(),
        "watch {id} after {after} ended with {error:?} after {events:?}"
    );
    events
}

/// Reads `stream` until `enough` holds for what was read, within [`LONG`].
async fn read_until(
    stream: &mut Streaming<pb::ExecutionEvent>,
    enough: impl Fn(&[pb::ExecutionEvent]) -> bool,
) -> Vec<pb::ExecutionEvent> {
    let mut events = Vec::new();
    tokio::time::timeout(LONG, async {
        while !enough(&events) {
            let event = stream.next().await.expect("more events").expect("an event");
            events.push(event);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not enough events within {LONG:?}: {events:?}"));
    events
}

fn deltas(events: &[pb::ExecutionEvent]) -> usize {
    events
        .iter()
        .filter(|e| e.r#type == "output.text.delta")
        .count()
}

/// The `execution.failed` error of the last event.
fn error_of(events: &[pb::ExecutionEvent]) -> pb::ExecutionError {
    failed_payload(events).error.expect("the failure's error")
}

/// Compares what readers on different replicas were told. Everything but the times is
/// asserted at once; times that differ are collected and asserted by [`Same::finish`] at the
/// end of the test, so a difference in time alone does not hide what the rest of the test
/// checks (and the failure lists every such difference).
#[derive(Default)]
struct Same {
    times: Vec<String>,
}

impl Same {
    /// `got` is `want`, event by event.
    fn events(&mut self, got: &[pb::ExecutionEvent], want: &[pb::ExecutionEvent], what: &str) {
        let timeless = |events: &[pb::ExecutionEvent]| -> Vec<pb::ExecutionEvent> {
            let untimed = |e: &pb::ExecutionEvent| pb::ExecutionEvent {
                time: None,
                ..e.clone()
            };
            events.iter().map(untimed).collect()
        };
        assert_eq!(timeless(got), timeless(want), "{what}");
        for (g, w) in got.iter().zip(want) {
            self.time(what, &format!("event {}", g.sequence), g.time, w.time);
        }
    }

    /// `got` is `want`, as `GetExecution` answers.
    fn views(&mut self, got: &pb::Execution, want: &pb::Execution, what: &str) {
        let timeless = |view: &pb::Execution| pb::Execution {
            created_at: None,
            updated_at: None,
            ..view.clone()
        };
        assert_eq!(timeless(got), timeless(want), "{what}");
        self.time(what, "created_at", got.created_at, want.created_at);
        self.time(what, "updated_at", got.updated_at, want.updated_at);
    }

    fn time(
        &mut self,
        what: &str,
        field: &str,
        got: Option<prost_types::Timestamp>,
        want: Option<prost_types::Timestamp>,
    ) {
        if got != want {
            let show = |t: Option<prost_types::Timestamp>| {
                t.map_or("none".to_owned(), |t| {
                    format!("{}.{:09}", t.seconds, t.nanos)
                })
            };
            self.times.push(format!(
                "{what}: {field} at {} vs {}",
                show(got),
                show(want)
            ));
        }
    }

    /// Every time compared was the same.
    fn finish(self) {
        assert!(
            self.times.is_empty(),
            "one event (or view), two times, as readers on different replicas were told \
             ({} differences):\n{}",
            self.times.len(),
            self.times.join("\n")
        );
    }
}

//! model-runtime: a gRPC data plane that executes model calls behind an AI gateway.
//!
//! A gateway submits an *ability* (stable intent such as `chat`), required capabilities, input,
//! a deadline and optionally a routing policy. The runtime picks a capable provider and model,
//! runs the call with bounded retry and fallback, and records every step as an append-only,
//! resumable event sequence, with usage facts (never prices).
//!
//! This library is the runtime; the `model-runtime` binary (`src/main.rs`, with its `cli/`
//! and `bench/` modules) uses only its public API.
//!
//! # The embedding contract
//! What is `pub` here is what an embedder, a store or a provider outside this crate builds
//! against; everything else is `pub(crate)`, and `unreachable_pub` keeps it so.
//! - [`Runtime`] and [`RuntimeBuilder`] (with a store and providers of one's own), its
//!   errors and streams ([`runtime`]); [`Config`] and [`ConfigBuilder`] ([`config`]).
//! - The SPIs: [`store::EventStore`] with the memory and file stores and, with the
//!   `conformance` feature, the suite every store runs; [`provider::Provider`].
//! - The domain they speak ([`execution`]): requests, events, views, usage facts.
//! - Serving: [`server::serve`] and [`server::serve_metrics`], [`telemetry::init`], the
//!   HTTP ingress ([`ingress::Ingress`]), the generated messages and client ([`pb`]), and
//!   [`to_status`] for an embedder's own service.
//! - Features: `conformance` (the store suite), `fuzzing` (the fuzz targets' entry points in
//!   `fuzz`), `bench` (`routing`, for its bench): none of them is the API.
//!
//! # Layout
//! Every module, with its parts (`tests/it/layers/map.rs` holds this list to the tree).
//! - [`execution`]: the domain, and the leaf: ids and the maps keyed by ids or configured
//!   names (`id`), the request (`request`), events (`event`), the state machine, one
//!   transition function (`state`), the materialized view (`view`), outcomes and their codes
//!   (`outcome`, `code`), plans and usage facts as events record them (`plan`, `usage`), the
//!   commit rule (`commit`), idempotency (`idempotency`), the trace context a request came
//!   with (`trace`), how an execution no driver ends is ended (`interrupted`), and payloads
//!   for tests (`fixtures`).
//! - [`config`]: the TOML file as written (`raw`) -> validated types (`validate`), one field's
//!   check (`field`) and the bounds of every duration and count (`bounds`); one file per
//!   provider adapter, listed in one table (`adapter`); health (`health`), secrets from the
//!   environment (`secret`), a service account's key file (`service_account`), a scripted
//!   model's script (`script`); the store as validated (`store`); the HTTP ingress
//!   (`ingress`); the configuration in effect written back (`effective`); the embedded
//!   default (`default.toml`); a typed builder (`builder`).
//! - [`store`]: the EventStore SPI, its errors (`error`) and change signal (`changes`); a
//!   reader's hold on one execution (`follower`); the bounded memory store (`memory`), the
//!   encrypted, fsync'd journal (`file`), PostgreSQL for replicas (`postgres`, feature
//!   `postgres`), and the one place that picks among them (`open`); retention and capacity
//!   (`retention`), the usage order (`usage`), the conformance suite (`conformance`), a store
//!   that injects faults (`faulty`).
//! - [`provider`]: the Provider SPI and its adapters, one folder each (`scripted`, `openai`,
//!   `responses`, `azure`, `anthropic`, `gemini`, `vertex`, `bedrock`), built per provider by
//!   the registry (`registry`); what the HTTP adapters share: the client and TLS (`http`), one
//!   streaming exchange (`exchange`), the reply's framing (`framing`) as server-sent events
//!   (`sse`) or AWS's event stream (`eventstream`), the usual events' JSON read by hand
//!   (`scan`), request pieces (`wire`), usage as it becomes known (`tally`); credentials: from
//!   files (`token_file`), minted with a service account (`service_account`), fetched
//!   (`fetch`) and refreshed before they expire (`refresh`), and a call that waits for them
//!   (`deferred`); the fuzzers' entry points (`fuzz`).
//! - `routing`: the candidate plan, capability filter and deterministic order (`plan`); the
//!   attempt budget with its retry and fallback decisions (`budget`); per-provider admission
//!   (`admission`); provider health, which ejects a failing target for a while (`health`); the
//!   limit shared by every replica, in Redis (`limiter`, feature `redis`).
//! - [`runtime`]: the embedded core facade ([`Runtime`]): a submission (`submit`) checked
//!   against the configuration (`validate`) and the fixed caps (`limits`), the per-execution
//!   driver (`driver`), following (`watch`), cancellation (`cancel`) and cancels recorded by
//!   other replicas (`remote_cancel`), the self-description (`metadata`), the usage export
//!   (`usage`), retention on time (`expiry`); the providers as driven, each beside its gate
//!   (`targets`); its errors (`error`), metrics (`metrics`) and spans (`trace`). It knows no
//!   gRPC type.
//! - [`pb`]: the generated wire types, and any of them in protobuf's canonical JSON (`json`).
//! - `service`: tonic glue: wire -> core (`decode`, with the codec that counts a request's bytes:
//!   `codec`, and `compression`) -> wire (`encode`, the streamed events: `wire_event`); the one
//!   error -> `Status` mapper (`status`); the access log (`access`); the fuzzers' entry points
//!   (`fuzz`).
//! - [`ingress`]: the OpenAI- and Anthropic-compatible HTTP ingress (HTTP/1.1 and h2c), off
//!   unless configured: which endpoint answers (`route`), a request's shared parts
//!   (`request`), OpenAI's chat completions (`chat`) and Responses (`responses`) and
//!   Anthropic's Messages (`messages`), answered alike (`answer`), the abilities as models (`models`), the execution as a
//!   resource (`executions`); an execution's events as an API writes them
//!   (`stream`) in an answer's body (`body`), the tokens an answer reports (`tokens`), errors
//!   in each API's shape (`error`), a caller that goes away (`detach`), and gRPC-Web onto
//!   the gRPC server's services (`grpc_web`).
//! - [`server`]: the gRPC server with health and reflection, over HTTP/2 served by h2
//!   directly so one stalled stream can be reset: where it listens (`listener`), accepted
//!   connections (`incoming`) and their places (`places`), one connection (`connection`) and
//!   its idle watchdog (`idle`), streams held until their requests come (`arrival`), one
//!   stream (`stream`) and its span (`rpc_span`), the service that answers it (`services`),
//!   writes shared by streams (`coalesce`), what a connection has not sent (`unsent`), any
//!   `:authority` on a Unix socket (`authority`), the open-file limit (`descriptors`); `GET
//!   /metrics` (`metrics`) on the one HTTP/1.1 request reader (`http1`, public for the
//!   binary's mock upstream and the tests' fake provider).
//! - [`telemetry`]: logs, and trace export over OTLP (`traces`).
//! - `fuzz` (feature `fuzzing`): the fuzz targets' entry points, gathered for `fuzz/`;
//!   `fuzz_regressions` (tests only): every input under `fuzz/regressions/` replayed through
//!   them.
//!
//! Beside it, crates that import nothing of the domain: `crates/h1` (the provider HTTP/1.1
//! client: [`h1`]), `crates/pricing` (prices for exported usage facts, used by the `price`
//! command only, never by the execution path), `crates/client` (the wire types [`pb`]
//! re-exports, and the client that resumes, which the command line and the load tool use)
//! and `crates/conformance` (the conformance kit, which knows the API only by `proto/`).
//!
//! # Layers
//! Bottom to top. A module imports only from layers below its own, never from its own layer
//! or above; `tests/it/layers.rs` reads this list and every `crate::` path in `src/` to hold the
//! code to it.
//!
//! 1. `execution`
//! 2. `config`
//! 3. `store`, `provider`, `routing`
//! 4. `runtime`
//! 5. `pb`
//! 6. `service`
//! 7. `ingress`
//! 8. `server`, `telemetry`
//! 9. `fuzz`
//! 10. `fuzz_regressions`
//!
//! # Rules and their homes
//! Each rule of the protocol is written once; the ids are `docs/protocol.md`'s:
//!
//! | rule | file |
//! |---|---|
//! | state machine: every transition (STATE-1..3, EXEC-4) | `execution/state.rs` |
//! | commit: what commits output, what follows a failure after it (COMMIT-1..4) | `execution/commit.rs` |
//! | idempotency: canonical request, fingerprint, comparison (IDEM-1, IDEM-2) | `execution/idempotency.rs` |
//! | error codes and their wire names (ERR-4) | `execution/code.rs` |
//! | request validation (every field violation: ERR-1) | `runtime/validate.rs` |
//! | capability filter and deterministic order (ROUTE-3, ROUTE-4) | `routing/plan.rs` |
//! | attempt budget: retry, fallback, stop, time limits (ROUTE-5..10, DEADLINE-1) | `routing/budget.rs` |
//! | admission: permits and the bounded FIFO queue (ADMIT-1..4) | `routing/admission.rs` |
//! | evidence: attempt records, outcome, failure messages (ROUTE-11) | `runtime/driver/evidence.rs` |
//! | append before every wait | `runtime/driver/pending.rs` |
//! | retention and capacity of terminal executions (STORE-2, IDEM-3) | `store/retention.rs` |
//! | resumable cursors (`Watch`: CURSOR-1..4) | `runtime/watch.rs` |
//! | cancellation, with or without a driver (CANCEL-1, CANCEL-2) | `runtime/cancel.rs` |
//! | errors -> gRPC statuses (ERR-1..3, DRAIN-1) | `service/status.rs` |
//! | errors -> HTTP statuses and each API's error shape; the error event after output (HTTP-3) | `ingress/error.rs` |
//! | the HTTP ingress: `model` -> ability and policy, `stream: false` -> buffered delivery (HTTP-1, HTTP-2, HTTP-4) | `ingress/request.rs`, `ingress/chat.rs` |
//! | a caller that goes away cancels, at once or after the grace an `Idempotency-Key` buys (HTTP-5) | `ingress/detach.rs` |
//! | shutdown order (DRAIN-2, DRAIN-3) | `runtime.rs` (`Runtime::shutdown`), `server.rs` |
//! | connection and stream limits, stalled streams | `server/connection.rs`, `server/stream.rs` |
//! | connection places: idle ones give way at the limit | `server/places.rs` |
//! | unsent response data per connection | `server/unsent.rs` |
//! | any `:authority` on a Unix socket (HPACK literals rewritten in place) | `server/authority.rs`, `server/authority/hpack.rs` |
//! | open-file limit against the connection limits | `server/descriptors.rs` |
//! | HTTP/1.1 requests read whole within bounds (`/metrics`, `mock-upstream`, the tests' provider) | `server/http1.rs` |
//! | provider HTTP/1.1 responses: framing and persistence (`docs/h1.md`) | `crates/h1/src/head.rs`, `crates/h1/src/framing.rs` |
//! | provider connection reuse: which connection goes back, and for how long | `crates/h1/src/call.rs` (`release`), `crates/h1/src/pool.rs` |
//! | provider error classification: status, body and transport -> class | `provider/http/classify.rs` |
//! | usage facts: their shape; reported, else estimated and labelled so; the export's order (USAGE-1..5) | `execution/usage.rs`, `provider/tally.rs`, `store/usage.rs` |
//! | journal framing, sealing and the fsync policy | `store/file/codec.rs`, `store/file/seal.rs`, `store/file/writer.rs` |
//! | journal recovery, in reading order (`store/file/open.rs`): the lock, the files and their tallies, the records, the usage mark, what was running, the compaction | `store/file/lock.rs`, `store/file/segment.rs`, `store/file/replay.rs`, `store/file/reader.rs`, `store/file/mark.rs`, `execution/interrupted.rs`, `store/file/compact.rs` |
//! | why the file store did not open (the file, the offset, what is wrong), and why a store operation failed | `store/file/error.rs`, `store/error.rs` |
//! | replicas: ownership and fencing (an append or create only under the owner's current lease: STORE-3) | `store/postgres/writer.rs`, `store/postgres/insert.rs` |
//! | replicas: the lease, renewed apart from all other work; what loses it | `store/postgres/lease.rs` |
//! | replicas: takeover, and ending what no driver will end (STORE-1, STORE-3) | `store/postgres/takeover.rs` |
//! | replicas: a statement's lost answer resolved before the caller is answered (STORE-4) | `store/postgres/writer.rs` (`written`), `store/postgres/create.rs` (`landed`) |
//! | the global limit's permits, and a set that lost writes settling first | `routing/limiter.rs`, `routing/limiter/scripts.rs` |
//! | the global limit: permits renewed within the lease, released ones given back | `routing/limiter/keeper.rs` |
//! | the global limit while Redis does not answer (`on_unavailable`) | `routing/limiter/gate.rs` |
//! | health: what an attempt says of its target, ejection, probes, recovery (ROUTE-12) | `routing/health/signal.rs`, `routing/health.rs` |
//! | health in the plan: ejected targets skipped, `on_all_unhealthy` | `routing/health/plan.rs` |
//! | replicas: a cancel on any replica carried out by the owner (CANCEL-3) | `store/postgres/cancel.rs`, `runtime/remote_cancel.rs` |
//! | fetched credentials refreshed before they expire; a failed fetch shared | `provider/refresh.rs` |
//! | buffered delivery: output held until the attempt succeeds; a failed attempt's dropped, kept as evidence (COMMIT-5) | `runtime/driver/batch.rs`, `runtime/driver/held.rs` |
//!
//! # Words coined here
//! - *admission*: a permit from a provider's gate (`routing/admission.rs`), and nothing else;
//!   a request is *validated* and *accepted*, a connection *takes a place*.
//! - *Job* (`runtime/driver.rs`): what one execution needs, resolved at submission.
//! - *Race* (`runtime/driver/stop.rs`): work run against cancellation and a stop time.
//! - *Tally*: the driver's running count of attempts (`runtime/driver/evidence.rs`); a journal
//!   file's account of the records it vouches for (`store/file/seal.rs`); `UsageTally`, an
//!   attempt's usage reported or estimated so far (`provider/tally.rs`).
//! - *Slot*: one execution in the memory store (`store/memory/record.rs`); `ProviderSlot`, a
//!   provider with its admission gate (`runtime/targets.rs`).
//! - *Follower* (`store/follower.rs`): one reader's hold on one execution's events.
//! - *Kept* and *Reveal* (`store/memory/journal.rs`): an execution's identity as a journal
//!   records it, and the showing of its events once they are durable.
//! - *Place* and *Activity* (`server/places.rs`): a connection's room under
//!   `max_connections`, and whether it has a call open.
//! - *Unsent* and *Counted* (`server/unsent.rs`): a connection's response bytes its socket
//!   has not taken, and the I/O that counts them off.
//! - *Coalesced* (`server/coalesce.rs`): a connection's writes gathered and sent once a turn.
//! - *Arrivals* (`server/arrival.rs`): a connection's new streams, each held until its request
//!   has come or its connection's task has stepped aside once, so its task starts with its
//!   message in hand.
//! # One execution
//! `Execute` -> `service` (decode) -> [`Runtime::submit`] (validate, store
//! `execution.accepted`, start the driver) -> driver (plan, attempts, provider stream, commit
//! rule, append events) -> the store wakes every watcher -> `Execute`/`Watch` streams read the
//! store from their cursor. `Execute` is `Submit` + `Watch` from 0.

// A `pub` item is part of this library's contract; anything else says `pub(crate)`, so the
// surface is read from the code and does not grow by accident.
#![warn(unreachable_pub)]
// Tests spawn their fake servers and clients freely; the library's own build holds the rule.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod config;
pub mod execution;
pub mod ingress;
pub mod pb;
pub mod provider;
// Public only to the routing bench (`benches/routing.rs`, feature `bench`).
#[cfg(feature = "bench")]
pub mod routing;
#[cfg(not(feature = "bench"))]
mod routing;
pub mod runtime;
pub mod server;
mod service;
pub mod store;
pub mod telemetry;

#[cfg(test)]
mod fuzz_regressions;

pub use config::{Config, ConfigBuilder};
pub use runtime::{InitError, Runtime, RuntimeBuilder, RuntimeError};
pub use service::{ERROR_DOMAIN, to_status};

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;

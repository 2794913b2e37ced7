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
//!   generated messages and client ([`pb`]), and [`to_status`] for an embedder's own service.
//! - Features: `conformance` (the store suite), `fuzzing` (the fuzz targets' entry points in
//!   `fuzz`), `bench` (`routing`, for its bench): none of them is the API.
//!
//! # Layout
//! - [`execution`]: the domain, and the leaf: ids, the request, events, the state machine
//!   (one transition function), the materialized view, outcomes and their codes, plans and
//!   usage facts as events record them, the commit rule and idempotency.
//! - [`config`]: the TOML file, raw shapes -> validated types; the embedded default; a typed
//!   builder.
//! - [`store`]: the EventStore SPI, the bounded memory store, retention, the conformance suite.
//! - [`provider`]: the Provider SPI and its adapters (`openai`, `anthropic` over streaming
//!   HTTP, `scripted`), with the shared HTTP client, SSE parser and error classification.
//! - `routing`: the candidate plan (capability filter, deterministic order), the attempt
//!   budget with its retry and fallback decisions, and per-provider admission.
//! - [`runtime`]: the embedded core facade ([`Runtime`]): submit, execute, watch, get,
//!   cancel, metadata; the per-execution driver; request validation. It knows no gRPC type.
//! - [`pb`]: the generated wire types.
//! - `service`: tonic glue: wire -> core -> wire, and the one error -> `Status` mapper.
//! - [`server`]: the gRPC server with health and reflection, over HTTP/2 served by h2
//!   directly so one stalled stream can be reset; `GET /metrics` on the one HTTP/1.1 request
//!   reader (`server::http1`, public for the binary's mock upstream and the tests' fake
//!   provider); [`telemetry`]: logs and traces.
//! - `fuzz` (feature `fuzzing`): the fuzz targets' entry points, gathered for `fuzz/`;
//!   `fuzz_regressions` (tests only): every input under `fuzz/regressions/` replayed through
//!   them.
//!
//! Beside it, crates that import nothing of the domain: `crates/h1` (the provider HTTP/1.1
//! client: [`h1`]) and `crates/pricing` (prices for exported usage facts, used by the
//! `price` command only, never by the execution path).
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
//! 7. `server`, `telemetry`
//! 8. `fuzz`
//! 9. `fuzz_regressions`
//!
//! # Rules and their homes
//! Each rule of the protocol is written once:
//!
//! | rule | file |
//! |---|---|
//! | state machine: every transition | `execution/state.rs` |
//! | commit: what commits output, what follows a failure after it | `execution/commit.rs` |
//! | idempotency: canonical request, fingerprint, comparison | `execution/idempotency.rs` |
//! | error codes and their wire names | `execution/code.rs` |
//! | request validation (every field violation) | `runtime/validate.rs` |
//! | capability filter and deterministic order | `routing/plan.rs` |
//! | attempt budget: retry, fallback, stop, time limits | `routing/budget.rs` |
//! | admission: permits and the bounded FIFO queue | `routing/admission.rs` |
//! | evidence: attempt records, outcome, failure messages | `runtime/driver/evidence.rs` |
//! | append before every wait | `runtime/driver/pending.rs` |
//! | retention and capacity of terminal executions | `store/retention.rs` |
//! | resumable cursors (`Watch`) | `runtime/watch.rs` |
//! | cancellation, with or without a driver | `runtime/cancel.rs` |
//! | errors -> gRPC statuses | `service/status.rs` |
//! | shutdown order | `runtime.rs` (`Runtime::shutdown`), `server.rs` |
//! | connection and stream limits, stalled streams | `server/connection.rs`, `server/stream.rs` |
//! | connection places: idle ones give way at the limit | `server/places.rs` |
//! | unsent response data per connection | `server/unsent.rs` |
//! | any `:authority` on a Unix socket (HPACK literals rewritten in place) | `server/authority.rs`, `server/authority/hpack.rs` |
//! | open-file limit against the connection limits | `server/descriptors.rs` |
//! | HTTP/1.1 requests read whole within bounds (`/metrics`, `mock-upstream`, the tests' provider) | `server/http1.rs` |
//! | provider HTTP/1.1 responses: framing and persistence (`docs/h1.md`) | `crates/h1/src/head.rs`, `crates/h1/src/framing.rs` |
//! | provider connection reuse: which connection goes back, and for how long | `crates/h1/src/call.rs` (`release`), `crates/h1/src/pool.rs` |
//! | provider error classification: status, body and transport -> class | `provider/http/classify.rs` |
//! | usage facts: their shape; reported, else estimated and labelled so; the export's order | `execution/usage.rs`, `provider/tally.rs`, `store/usage.rs` |
//! | journal framing, sealing and the fsync policy | `store/file/codec.rs`, `store/file/seal.rs`, `store/file/writer.rs` |
//! | journal recovery, in reading order (`store/file/open.rs`): the lock, the files and their tallies, the records, the usage mark, what was running, the compaction | `store/file/lock.rs`, `store/file/segment.rs`, `store/file/replay.rs`, `store/file/reader.rs`, `store/file/mark.rs`, `execution/interrupted.rs`, `store/file/compact.rs` |
//! | why the file store did not open (the file, the offset, what is wrong), and why a store operation failed | `store/file/error.rs`, `store/error.rs` |
//! | replicas: ownership and fencing (an append or create only under the owner's current lease) | `store/postgres/writer.rs`, `store/postgres/insert.rs` |
//! | replicas: the lease, renewed apart from all other work; what loses it | `store/postgres/lease.rs` |
//! | replicas: takeover, and ending what no driver will end | `store/postgres/takeover.rs` |
//! | replicas: a statement's lost answer resolved before the caller is answered | `store/postgres/writer.rs` (`written`), `store/postgres/create.rs` (`landed`) |
//! | the global limit's permits, and a set that lost writes settling first | `routing/limiter.rs`, `routing/limiter/scripts.rs` |
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
//! - *Coalesced* (`server/coalesce.rs`): writes that step aside a turn so streams share one.
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

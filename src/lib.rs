//! model-runtime: a gRPC data plane that executes model calls behind an AI gateway.
//!
//! A gateway submits an *ability* (stable intent such as `chat`), required capabilities, input,
//! a deadline and optionally a routing policy. The runtime picks a capable provider and model,
//! runs the call with bounded retry and fallback, and records every step as an append-only,
//! resumable event sequence, with usage facts (never prices).
//!
//! # Layout
//! - [`runtime`]: the embedded core facade ([`Runtime`]): submit, execute, watch, get,
//!   cancel, metadata. It knows no gRPC type.
//! - [`config`]: the TOML file, raw shapes -> validated types; the embedded default.
//! - [`execution`]: ids, the request, the state machine (one transition function), events,
//!   the materialized view, the commit tracker and the per-execution driver.
//! - [`routing`]: the candidate plan (capability filter, deterministic order), the attempt
//!   budget with its retry and fallback decisions, and per-provider admission.
//! - [`provider`]: the Provider SPI and its adapters (`openai`, `anthropic` over streaming
//!   HTTP, `scripted`), with the shared HTTP client, SSE parser and error classification.
//! - [`usage`]: usage facts: unit, quantity, source; no prices.
//! - [`store`]: the EventStore SPI, the bounded memory store and the conformance suite.
//! - [`service`]: tonic glue: wire -> core -> wire, and the one error -> `Status` mapper.
//! - [`server`]: the gRPC server with health and reflection; [`telemetry`]: logging.
//! - [`cli`]: the `exec` client of the command-line tool.
//! - [`bench`]: the `bench` load tool, with its bare-tonic and embedded baselines.
//! - [`pb`]: the generated wire types.
//!
//! One execution flows: `Execute` -> `service` (decode) -> [`Runtime::submit`] (validate,
//! store `execution.accepted`, spawn the driver) -> driver (plan, attempts, provider stream,
//! commit rule, append each event) -> store wakes every watcher -> `Execute`/`Watch` streams
//! read the store from their cursor. `Execute` is `Submit` + `Watch` from 0.

pub mod bench;
pub mod cli;
pub mod config;
pub mod error;
pub mod execution;
pub mod pb;
pub mod provider;
pub mod routing;
pub mod runtime;
pub mod server;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod usage;

pub use config::Config;
pub use error::{FieldViolation, RuntimeError};
pub use runtime::Runtime;

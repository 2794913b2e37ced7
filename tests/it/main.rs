//! The integration tests: one binary, a module per behaviour, so the helpers in `common/` and
//! the ~300 packages of the tree are compiled and linked once, not once per file. Each module
//! starts its servers on 127.0.0.1 port 0 (or a Unix socket in a temporary directory) and
//! stops them itself.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "all of this crate is test code, its helpers too (clippy exempts only #[test] fns)"
)]
#![allow(
    clippy::too_many_lines,
    reason = "an end-to-end scenario reads as one story, its steps in the order they happen"
)]

mod common;

mod abuse;
mod admission_load;
mod anthropic_adapter;
mod azure_adapter;
mod bad_input;
mod bedrock_adapter;
mod bedrock_credentials;
mod bedrock_leaks;
mod bench_tool;
mod buffered_delivery;
mod cancel;
mod check_config;
mod cli_api;
mod cli_exec;
mod cli_health;
mod client_resume;
mod compression;
mod conformance_kit;
mod connection_age;
mod connection_limits;
mod crash;
mod cut_attempt_usage;
mod deploy;
mod disk_full;
mod docs;
mod examples;
mod execute_http_fallback;
mod execute_stream;
mod fallback_rules;
mod gemini_adapter;
mod get_execution;
mod global_limit;
mod health_reflection;
mod http_adapter_failures;
mod http_end_of_body;
mod http_proxy;
mod idempotency;
mod ingress;
mod layers;
mod log_format;
mod metrics;
mod metrics_format;
mod mock_upstream;
mod msrv;
mod openai_adapter;
mod price_cli;
mod priority;
mod protocol;
mod provider_health;
mod reasoning;
mod replicas;
mod responses_adapter;
mod second_signal;
mod shutdown;
mod sidecar;
mod startup_logs;
mod store_capacity;
mod stream_fixtures;
mod stream_idle;
mod time_limits;
mod traces;
mod usage_export;
mod vertex_adapter;
mod vertex_service_account;
mod vertex_service_account_leaks;
mod watch_resume;

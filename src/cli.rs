//! The command's subcommands, on the library's public API: `serve` runs the runtime; the
//! whole API as a client: `exec` runs one execution and follows its events, `submit` starts
//! one, `watch` follows one (`events.rs` for both), `get`, `cancel` and `metadata`
//! (`unary.rs`); `health` asks a server whether it is serving; `usage` and `price` read the
//! usage export, as it is or priced; `check-config` validates a config. With them, the one
//! address grammar (`address.rs`), what every client shares (`client.rs`: `--addr`, errors,
//! exit codes), the request `exec` and `submit` build (`request.rs`), how answers are shown
//! (`render/`) and the named exit codes (`exit.rs`).

pub mod address;
pub mod check;
pub mod client;
pub mod events;
pub mod exec;
pub mod exit;
pub mod health;
pub mod render;
pub mod request;
pub mod serve;
pub mod unary;
pub mod usage;
pub mod watch;

use std::process::ExitCode;

/// Runs `work` on a multi-threaded async runtime: exit 1 if none can be started.
pub fn run(work: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(work),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            exit::failed()
        }
    }
}

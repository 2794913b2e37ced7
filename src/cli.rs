//! The command's subcommands, one module each, on the library's public API: `serve` runs the
//! runtime; `exec` runs one execution against a server and streams its events; `health`
//! asks a server whether it is serving; `usage` and `price` read the usage export, as it is
//! or priced; `check-config` validates a config. With them, the one address grammar
//! (`address.rs`) and the named exit codes (`exit.rs`).

pub mod address;
pub mod check;
pub mod exec;
pub mod exit;
pub mod health;
pub mod render;
pub mod serve;
pub mod usage;

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

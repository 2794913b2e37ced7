//! The client side of the command-line tool: `exec` runs one execution against a server and
//! streams its events to the terminal.

mod exec;
pub mod render;

pub use exec::{ExecArgs, endpoint, exec};

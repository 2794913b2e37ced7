//! The client side of the command-line tool: `exec` runs one execution against a server and
//! streams its events to the terminal; `health` asks a server whether it is serving.

mod connect;
mod exec;
mod health;
pub mod render;

pub use connect::{connect, endpoint};
pub use exec::{ExecArgs, exec};
pub use health::{HealthArgs, health};

//! The client side of the command-line tool: `exec` runs one execution against a server and
//! streams its events to the terminal; `health` asks a server whether it is serving;
//! `usage` and `price` read the usage export, as it is or priced.

mod connect;
mod exec;
mod health;
pub mod render;
mod usage;

pub use connect::{connect, endpoint};
pub use exec::{ExecArgs, exec};
pub use health::{HealthArgs, health};
pub use usage::{Source, price, usage};

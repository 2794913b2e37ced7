//! The client side of the command-line tool: `exec` runs one execution against a server and
//! streams its events to the terminal; `health` asks a server whether it is serving.

mod exec;
mod health;
pub mod render;

pub use exec::{ExecArgs, endpoint, exec};
pub use health::{HealthArgs, health};

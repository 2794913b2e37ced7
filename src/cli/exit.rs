//! The command's exit codes, named once: what a script or a probe that runs it may rely on.

use std::process::ExitCode;

/// It could not do what it was asked: a server refused, failed or did not answer, answered
/// other than `SERVING` (`health`), or an address could not be listened on.
pub const FAILED: u8 = 1;

/// What it was given is wrong: a config file, an address, an argument, a price table.
pub const INVALID: u8 = 2;

/// Ctrl-C (SIGINT) ended it: a client command that stopped (`exec`, having cancelled its
/// execution unless told to leave it), or a second SIGTERM or SIGINT that ended `serve`
/// during its drain. 128 + SIGINT, as a shell reports an interrupted command.
pub const INTERRUPTED: u8 = 130;

/// [`FAILED`].
pub fn failed() -> ExitCode {
    ExitCode::from(FAILED)
}

/// [`INVALID`].
pub fn invalid() -> ExitCode {
    ExitCode::from(INVALID)
}

/// [`INTERRUPTED`].
pub fn interrupted() -> ExitCode {
    ExitCode::from(INTERRUPTED)
}

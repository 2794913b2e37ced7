//! What every command that calls a server shares: where the server is (`--addr`, or
//! `MODEL_RUNTIME_ADDR`), a connection with errors that say what to do, and one mapping of
//! what went wrong to the exit codes (`exit.rs`).

use std::process::ExitCode;

use tonic::transport::Channel;
use tonic_types::StatusExt;

use super::address::Address;
use super::exit;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;

/// The server a command calls.
#[derive(Debug, Clone, clap::Args)]
pub struct Server {
    /// Server address: host:port, http://host:port or unix:/path/to.sock (a sidecar's
    /// socket).
    #[arg(long, env = "MODEL_RUNTIME_ADDR", default_value = "127.0.0.1:50051")]
    pub addr: Address,
}

impl Server {
    /// A new connection to it.
    pub async fn connect(&self) -> Result<Channel, CallError> {
        self.addr
            .connect()
            .await
            .map_err(|source| CallError::Connect {
                addr: self.addr.clone(),
                reason: cause(&source),
            })
    }

    /// A `ModelRuntime` client on a new connection.
    pub async fn client(&self) -> Result<ModelRuntimeClient<Channel>, CallError> {
        Ok(ModelRuntimeClient::new(self.connect().await?))
    }
}

/// Why a call did not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// What it was given is wrong before anything was sent.
    #[error("{0}")]
    Invalid(String),
    /// No connection.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// The address.
        addr: Address,
        /// Why, in words that say what to do.
        reason: String,
    },
    /// The server answered with an error.
    #[error("{}", describe(.0))]
    Status(#[from] tonic::Status),
    /// Writing to the terminal failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

impl CallError {
    /// The exit code it ends the command with: [`exit::INVALID`] for what the caller gave (an
    /// argument, a request the server refused as invalid, an execution it does not have),
    /// [`exit::FAILED`] for everything else (no server, a server that failed or is
    /// unavailable). A reader that went away (`... | head`) ends it quietly, with 0.
    pub fn exit(&self) -> ExitCode {
        use tonic::Code;
        match self {
            Self::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Self::Invalid(_) => exit::invalid(),
            Self::Status(status)
                if matches!(
                    status.code(),
                    Code::InvalidArgument
                        | Code::NotFound
                        | Code::AlreadyExists
                        | Code::FailedPrecondition
                        | Code::OutOfRange
                ) =>
            {
                exit::invalid()
            }
            _ => exit::failed(),
        }
    }

    /// Says what went wrong on stderr (nothing for a reader that went away), and the code.
    pub fn report(&self) -> ExitCode {
        let code = self.exit();
        if !matches!(self, Self::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            eprintln!("error: {self}");
        }
        code
    }
}

/// A status as a person reads it: the code, and each field a refusal names.
fn describe(status: &tonic::Status) -> String {
    let details = status.get_error_details();
    match details.bad_request() {
        Some(bad) if !bad.field_violations.is_empty() => {
            let mut text = format!("{:?}: invalid request", status.code());
            for v in &bad.field_violations {
                text.push_str(&format!("\n  {}: {}", v.field, v.description));
            }
            text
        }
        _ => format!("{:?}: {}", status.code(), status.message()),
    }
}

/// Why connecting failed, from the innermost cause: what the system said, and what to do.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost: &(dyn std::error::Error + 'static) = error;
    let mut io = None;
    while let Some(source) = innermost.source() {
        innermost = source;
        if let Some(e) = source.downcast_ref::<std::io::Error>() {
            io = Some(e);
        }
    }
    let Some(io) = io else {
        return innermost.to_string();
    };
    use std::io::ErrorKind;
    match io.kind() {
        ErrorKind::ConnectionRefused => {
            "connection refused: is `model-runtime serve` running there?".to_owned()
        }
        ErrorKind::NotFound => {
            "no socket at that path: is `model-runtime serve --listen unix:PATH` running?"
                .to_owned()
        }
        ErrorKind::PermissionDenied => {
            "permission denied: this user may not connect to that socket (it is mode 0660: \
             its owner and group may)"
                .to_owned()
        }
        ErrorKind::TimedOut => "timed out: nothing answered at that address".to_owned(),
        _ => io.to_string(),
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[tokio::test]
    async fn a_server_that_is_not_there_is_named_with_what_to_do() {
        // A port nothing listens on: bound, then let go.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let server = Server {
            addr: addr.parse().unwrap(),
        };
        let error = server.connect().await.unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains(&format!("cannot connect to {addr}")),
            "{text}"
        );
        assert!(
            text.contains("is `model-runtime serve` running there?"),
            "{text}"
        );
        assert_eq!(error.exit(), exit::failed());

        let dir = tempfile::tempdir().unwrap();
        let socket = format!("unix:{}", dir.path().join("none.sock").display());
        let server = Server {
            addr: socket.parse().unwrap(),
        };
        let text = server.connect().await.unwrap_err().to_string();
        assert!(text.contains("no socket at that path"), "{text}");
    }

    #[test]
    fn what_the_caller_gave_exits_2_and_what_failed_exits_1() {
        for (code, expected) in [
            (tonic::Code::InvalidArgument, exit::invalid()),
            (tonic::Code::NotFound, exit::invalid()),
            (tonic::Code::AlreadyExists, exit::invalid()),
            (tonic::Code::Unavailable, exit::failed()),
            (tonic::Code::Internal, exit::failed()),
            (tonic::Code::DeadlineExceeded, exit::failed()),
        ] {
            let error = CallError::Status(tonic::Status::new(code, "x"));
            assert_eq!(error.exit(), expected, "{code:?}");
        }
    }
}

//! `health`: the gRPC health protocol's `Check`, for probes that run a command (a Docker
//! `HEALTHCHECK`): exit 0 only when the server answers `SERVING`.

use std::process::ExitCode;
use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::{connect, endpoint};

/// What `health` checks.
#[derive(Debug, Clone)]
pub struct HealthArgs {
    /// Server address: `host:port`, `http://host:port` or `unix:/path`.
    pub addr: String,
    /// The service to ask about; empty for the server as a whole.
    pub service: String,
    /// How long connecting and the answer may take together.
    pub timeout: Duration,
}

/// Prints the status and exits 0 for `SERVING`, 1 for any other status or no answer, 2 for
/// an address that is not one.
pub async fn health(args: HealthArgs) -> ExitCode {
    let Some(uri) = endpoint(&args.addr) else {
        eprintln!(
            "invalid address `{}`: expected host:port, http://host:port or unix:/path",
            args.addr
        );
        return ExitCode::from(2);
    };
    let check = async {
        let channel = connect(&uri)
            .await
            .map_err(|e| format!("cannot connect to {uri}: {e}"))?;
        HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: args.service.clone(),
            })
            .await
            .map(|reply| reply.into_inner().status())
            .map_err(|status| format!("{}: {}", status.code(), status.message()))
    };
    match tokio::time::timeout(args.timeout, check).await {
        Ok(Ok(ServingStatus::Serving)) => {
            println!("SERVING");
            ExitCode::SUCCESS
        }
        Ok(Ok(status)) => {
            println!("{}", status.as_str_name());
            ExitCode::from(1)
        }
        Ok(Err(e)) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!("no answer within {:?}", args.timeout);
            ExitCode::from(1)
        }
    }
}

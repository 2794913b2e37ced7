//! `health`: the gRPC health protocol's `Check`, for probes that run a command (a Docker
//! `HEALTHCHECK`): exit 0 only when the server answers `SERVING`.

use std::process::ExitCode;
use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::address::Address;
use super::exit;

/// What `health` checks.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    /// Server address: host:port, http://host:port or unix:/path/to.sock (a sidecar's
    /// socket).
    #[arg(long, default_value = "127.0.0.1:50051")]
    addr: Address,
    /// The service to ask about (default: the server as a whole).
    #[arg(long, default_value = "")]
    service: String,
    /// How long connecting and the answer may take.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// Prints the status and exits 0 for `SERVING`, 1 for any other status or no answer (an
/// address that is not one is refused with 2 when the arguments are read).
pub async fn health(args: HealthArgs) -> ExitCode {
    let check = async {
        let channel = args
            .addr
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", args.addr))?;
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
            exit::failed()
        }
        Ok(Err(e)) => {
            eprintln!("{e}");
            exit::failed()
        }
        Err(_) => {
            eprintln!("no answer within {:?}", args.timeout);
            exit::failed()
        }
    }
}

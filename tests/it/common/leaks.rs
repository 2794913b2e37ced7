//! The credential leak check both fetched-credential providers go through (Vertex AI's
//! service-account tokens, Bedrock's container keys): the real binary over real gRPC, with
//! credentials that live three seconds and a provider that echoes them in its first error.

use std::time::Duration;

use model_runtime::pb::ExecutionEvent;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;

use super::process::{Guard, Log, run_env, start_serve_logged};

const LIMIT: Duration = Duration::from_secs(20);

/// A `serve` that ran the three calls, and what each call saw.
pub struct Run {
    /// The first call's events: the provider refused it, quoting the credentials.
    pub first: Vec<ExecutionEvent>,
    /// The second's: served with the held credentials while their refresh was refused.
    pub second: Vec<ExecutionEvent>,
    /// The third's: the credentials expired and none could be had.
    pub third: Vec<ExecutionEvent>,
    pub log: Log,
    _server: Guard,
}

/// Starts `serve` on the config file `path` with `env`, whose provider is asked for
/// credentials that live three seconds (refreshed after one and a half) and refused after
/// that, and that first refuses the call quoting them: the first call fails
/// `invalid_request` with the credentials blanked out, the second (1.8 s later) is served
/// with the held ones, the third (1.5 s after that) fails `unauthorized`.
pub async fn refresh_refused(path: &str, env: &[(&str, &str)]) -> Run {
    let args = ["serve", "--listen", "127.0.0.1:0", "--config", path];
    let (server, addr, log) = start_serve_logged(&args, env, LIMIT);
    let mut client = ModelRuntimeClient::new(super::connect(&addr).await);
    let mut call = async || super::execute(&mut client, super::request("chat", "hi")).await;

    let first = call().await;
    let failed = super::failed_payload(&first).error.unwrap();
    let attempt = failed.last_attempt_error.as_ref().unwrap();
    assert_eq!(attempt.code, "invalid_request", "{failed:?}");
    assert!(failed.message.contains("<redacted>"), "{failed:?}");
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let second = call().await;
    assert_eq!(super::text_of(&second), "Hi");
    // Expired, and none to be had (the refresh failed under five seconds ago, so it is not
    // asked again): the attempt fails before the provider.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let third = call().await;
    let failed = super::failed_payload(&third).error.unwrap();
    let attempt = failed.last_attempt_error.as_ref().unwrap();
    assert_eq!(attempt.code, "unauthorized", "{failed:?}");
    Run {
        first,
        second,
        third,
        log,
        _server: server,
    }
}

impl Run {
    /// No event of the three calls, no line of the log and nothing `check-config` writes
    /// on `path` with `env` holds any of `secrets`.
    pub fn assert_none_holds(&self, path: &str, env: &[(&str, &str)], secrets: &[String]) {
        let checked = run_env(&["check-config", path], env, LIMIT);
        assert!(checked.status.success(), "{checked:?}");
        let calls = [
            ("first", &self.first),
            ("second", &self.second),
            ("third", &self.third),
        ];
        for (what, events) in calls {
            assert_no_secret(what, &format!("{events:?}"), secrets);
        }
        for output in [&checked.stdout, &checked.stderr] {
            assert_no_secret("check-config", &String::from_utf8_lossy(output), secrets);
        }
        assert_no_secret("the log", &self.log.lines().join("\n"), secrets);
    }
}

#[track_caller]
pub fn assert_no_secret(what: &str, text: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{what} holds {secret}: {text}"
        );
    }
}

//! A second SIGTERM ends the process at once, with a non-zero code, while the first one's
//! drain is still waiting on running work; SIGHUP drains as SIGTERM does.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{start_server_with, wait_for};
use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;

fn term(pid: u32) {
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[tokio::test]
async fn a_second_signal_exits_at_once_with_a_non_zero_code() {
    // A model that never answers and a minute of drain: the first signal alone would wait.
    let file = tempfile::NamedTempFile::new().unwrap();
    let config = hanging().drain_timeout(Duration::from_secs(60));
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap();
    let (mut server, addr) = start_server_with(&["--config", path], WAIT);
    let mut client = within(ModelRuntimeClient::connect(format!("http://{addr}")))
        .await
        .unwrap();
    submit(&mut client, request("chat", "never answered")).await;

    let pid = server.0.id();
    term(pid);
    // Still draining: the execution holds it open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        matches!(server.0.try_wait(), Ok(None)),
        "exited on the first signal"
    );
    let second = Instant::now();
    term(pid);
    let status = wait_for(&mut server.0, WAIT).expect("exits after the second signal");
    assert_eq!(status.code(), Some(130));
    assert!(
        second.elapsed() < Duration::from_secs(5),
        "{:?}",
        second.elapsed()
    );
}

/// SIGHUP drains as SIGTERM does, and says so: running work finishes, then the process exits
/// 0 (the default action would have killed it at once).
#[tokio::test]
async fn sighup_drains_and_says_so() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let config = Config::builder()
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "slow",
                &["text"],
                script(|s| s.delta_interval_ms = 100),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/slow"]))
        .ability("chat", AbilitySpec::new("default"));
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap();
    let (mut server, addr, log) = common::process::start_serve_logged(
        &["serve", "--listen", "127.0.0.1:0", "--config", path],
        &[],
        WAIT,
    );
    let mut client = within(ModelRuntimeClient::connect(format!("http://{addr}")))
        .await
        .unwrap();
    let events = within(client.execute(request("chat", "one two three four five")))
        .await
        .unwrap()
        .into_inner();
    let sent = Command::new("kill")
        .args(["-HUP", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let events = collect(events).await;
    assert_complete_sequence(&events);
    assert_eq!(text_of(&events), "one two three four five");
    let status = wait_for(&mut server.0, WAIT).expect("exits once drained");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        log.matching("shutdown signal received").len(),
        1,
        "{}",
        log.tail(10)
    );
    assert!(log.matching("SIGHUP").len() == 1, "{}", log.tail(10));
}

//! A second SIGTERM ends the process at once, with a non-zero code, while the first one's
//! drain is still waiting on running work.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{start_server_with, wait_for};
use common::*;
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

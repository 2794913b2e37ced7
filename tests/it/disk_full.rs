//! The file store when the disk fills: the real binary under a file-size limit (SIGXFSZ
//! ignored, so a write past it fails with EFBIG as on a full disk). The failed write poisons
//! the store: the runtime turns UNAVAILABLE (new work refused with that code, metadata and
//! health say so), a running execution's watcher gets UNAVAILABLE after the last durable
//! event and nothing else, and nothing acknowledged before is lost: a restart without the
//! limit finds every execution that had ended, and ends the one that was running after the
//! events its watcher saw, at the next sequence.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{BIN, Guard, start_server_env};
use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";
const KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
/// The file-size limit, in the shell's `ulimit -f` blocks (512 or 1024 bytes).
const LIMIT_BLOCKS: u32 = 96;

fn config(store: &str) -> ConfigBuilder {
    Config::builder()
        .file_store(store, KEY_ENV)
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "m",
                &["text"],
                script(|s| s.reply = Some("a reply of a few words to fill the journal".into())),
            ),
        )
        .policy("main", PolicySpec::new(&["scripted/m"]))
        .ability("chat", AbilitySpec::new("main"))
}

/// `serve` with every file it writes limited to `LIMIT_BLOCKS` blocks, and SIGXFSZ ignored.
fn serve_limited(config_path: &str) -> (Guard, String) {
    let script = format!("trap '' XFSZ; ulimit -f {LIMIT_BLOCKS}; exec \"$0\" \"$@\"");
    let child = Command::new("sh")
        .args(["-c", &script, BIN, "serve", "--listen", "127.0.0.1:0"])
        .args(["--config", config_path])
        .env(KEY_ENV, KEY)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server under a file-size limit");
    common::process::address_of(Guard(child), WAIT)
}

async fn client(addr: &str) -> (ModelRuntimeClient<Channel>, Channel) {
    let channel = connect(addr).await;
    (ModelRuntimeClient::new(channel.clone()), channel)
}

async fn health(channel: Channel, service: &str) -> ServingStatus {
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    reply.status()
}

#[tokio::test]
async fn a_full_disk_poisons_the_store_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let config = config(store.to_str().unwrap());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let config_path = file.path().to_str().unwrap();
    let (server, addr) = serve_limited(config_path);
    let (mut c, channel) = client(&addr).await;

    // Executions one after another until the journal cannot grow. Whichever write fails,
    // the caller hears UNAVAILABLE: a create refused, or a stream that ends with it after
    // the events that reached the disk (never a terminal event kept only in memory).
    let mut completed = Vec::new();
    let mut cut = None;
    for i in 0..5000 {
        let mut stream = match c.execute(request("chat", &format!("request {i}"))).await {
            Ok(stream) => stream.into_inner(),
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                cut = Some(Vec::new());
                break;
            }
        };
        let mut events = Vec::new();
        let ended = within(async {
            loop {
                match stream.message().await {
                    Ok(Some(event)) => events.push(event),
                    Ok(None) => return None,
                    Err(status) => return Some(status),
                }
            }
        })
        .await;
        match ended {
            None => {
                let last = events.last().expect("events");
                assert_eq!(last.r#type, "execution.completed", "{events:?}");
                completed.push(last.execution_id.clone());
            }
            Some(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert!(!events.iter().any(is_terminal), "{events:?}");
                cut = Some(events);
                break;
            }
        }
    }
    let cut = cut.expect("the journal reached its limit");
    assert!(completed.len() > 5, "{} executions before", completed.len());

    // The store has failed: new work is UNAVAILABLE, metadata and health say so.
    let refused = c.submit(request("chat", "more")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert_eq!(
        metadata(&mut c).await.state(),
        pb::RuntimeState::Unavailable
    );
    within(async {
        while health(channel.clone(), "").await != ServingStatus::NotServing
            || health(channel.clone(), "model_runtime.v1.ModelRuntime").await
                != ServingStatus::NotServing
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    drop(server);

    // Without the limit, every execution that ended before the failure is there as it was.
    let (_server, addr) = start_server_env(&["--config", config_path], &[(KEY_ENV, KEY)], WAIT);
    let (mut c, _) = client(&addr).await;
    for id in &completed {
        let stored = watch(&mut c, id, 0).await;
        assert_eq!(stored.last().unwrap().r#type, "execution.completed", "{id}");
    }
    // What the cut stream showed is what the journal holds; the restart ended it after that.
    if let Some(first) = cut.first() {
        let stored = watch(&mut c, &first.execution_id, 0).await;
        assert_eq!(stored[..cut.len()], cut[..]);
        let error = failed_payload(&stored).error.unwrap();
        assert_eq!(error.code, "outcome_unknown", "{stored:?}");
    }
}

//! The file store through crashes, with the real binary and real signals: `serve` on a file
//! store runs 200 concurrent executions (quick and slow scripted ones, and some through an
//! OpenAI upstream that counts its requests), is killed with SIGKILL mid-way, and is started
//! again on the same directory. Every event a client received is there, with the same
//! sequence and content; every execution that had not ended ends with `outcome_unknown`;
//! the upstream sees no request again; idempotency keys name the same executions.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::process::{Guard, start_server_env};
use common::upstream::{Step, Upstream, sse_steps};
use common::*;
use futures_util::StreamExt;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tonic::transport::Channel;

const KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";
const KEY: &str = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

/// An OpenAI chunk carrying `content`.
fn chunk(content: &str) -> Vec<u8> {
    format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
    )
    .into_bytes()
}

/// `quick` ends in milliseconds; `slow` streams a delta every 200 ms for 20 s; `remote`
/// goes to an upstream that streams a few deltas and then stays silent.
fn config(store: &str, upstream: &str) -> ConfigBuilder {
    let quick = script(|s| s.reply = Some("quick and done".into()));
    let slow = script(|s| {
        s.reply = Some("one two three four five six seven eight nine ten ".repeat(10));
        s.delta_interval_ms = 200;
    });
    Config::builder()
        .file_store(store, KEY_ENV)
        .drain_timeout(Duration::from_secs(1))
        .provider(
            "scripted",
            ProviderSpec::scripted()
                .max_concurrency(500)
                .scripted_model("quick", &["text"], quick)
                .scripted_model("slow", &["text"], slow),
        )
        .provider(
            "remote",
            ProviderSpec::openai(upstream)
                .max_concurrency(500)
                .model("m", &["text"])
                .timeouts(
                    Duration::from_secs(5),
                    Duration::from_secs(60),
                    Duration::from_secs(60),
                ),
        )
        .policy("quick", PolicySpec::new(&["scripted/quick"]))
        .policy("slow", PolicySpec::new(&["scripted/slow"]))
        .policy("remote", PolicySpec::new(&["remote/m"]).max_attempts(1))
        .ability("quick", AbilitySpec::new("quick"))
        .ability("slow", AbilitySpec::new("slow"))
        .ability("remote", AbilitySpec::new("remote"))
}

/// What one client saw: the events of its execution, in the order received.
type Seen = Arc<Mutex<BTreeMap<usize, Vec<pb::ExecutionEvent>>>>;

fn keyed(ability: &str, i: usize) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        idempotency_key: format!("crash-{i}"),
        ..request(ability, &format!("request {i}"))
    }
}

fn ability_of(i: usize) -> &'static str {
    match i % 5 {
        0 | 1 => "quick",
        2 | 3 => "slow",
        _ => "remote",
    }
}

async fn client(addr: &str) -> ModelRuntimeClient<Channel> {
    ModelRuntimeClient::new(connect(addr).await)
}

fn serve(config: &ConfigBuilder, file: &tempfile::NamedTempFile) -> (Guard, String) {
    std::fs::write(file.path(), config.to_toml()).unwrap();
    let path = file.path().to_str().unwrap();
    start_server_env(&["--config", path], &[(KEY_ENV, KEY)], WAIT)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_comes_back_with_everything_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let upstream = Upstream::always(sse_steps(
        [chunk("far "), chunk("away "), chunk("and ")]
            .into_iter()
            .map(Step::Send)
            .chain([Step::Sleep(Duration::from_millis(50)), Step::Stall])
            .collect(),
    ))
    .await;
    let config = config(store, &upstream.base_url());
    let file = tempfile::NamedTempFile::new().unwrap();
    let (mut server, addr) = serve(&config, &file);

    // 200 executions at once, each on a stream of its own, recording what it receives.
    let seen: Seen = Arc::default();
    let mut callers = Vec::new();
    for i in 0..200 {
        let (seen, mut client) = (seen.clone(), client(&addr).await);
        callers.push(tokio::spawn(async move {
            let Ok(stream) = client.execute(keyed(ability_of(i), i)).await else {
                return;
            };
            let mut stream = stream.into_inner();
            while let Some(Ok(event)) = stream.next().await {
                seen.lock().unwrap().entry(i).or_default().push(event);
            }
        }));
    }
    // Mid-way: the quick ones have ended, the slow ones are streaming, the remote ones wait.
    within(async {
        loop {
            let ended = seen
                .lock()
                .unwrap()
                .values()
                .filter(|events| events.last().is_some_and(is_terminal))
                .count();
            let remote = upstream.requests().len();
            if ended >= 80 && remote >= 40 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    for caller in callers {
        let _ = within(caller).await;
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let requests_before = upstream.requests().len();
    assert_eq!(
        requests_before, 40,
        "each remote execution called the upstream once"
    );
    let unfinished = seen
        .values()
        .filter(|events| !events.last().is_some_and(is_terminal))
        .count();
    assert!(
        unfinished >= 100,
        "the kill came mid-way: {unfinished} unfinished"
    );

    let (mut server, addr) = serve(&config, &file);
    let mut c = client(&addr).await;
    let mut stored_first = BTreeMap::new();
    for (i, received) in &seen {
        let id = received[0].execution_id.clone();
        let stored = watch(&mut c, &id, 0).await;
        assert_eq!(
            stored[..received.len()],
            received[..],
            "execution {i} ({id}): every event received is stored as it was received"
        );
        assert_complete_sequence(&stored);
        let last = stored.last().unwrap();
        if !received.last().is_some_and(is_terminal) {
            let failed = failed_payload(&stored);
            let error = failed.error.unwrap();
            if last.r#type == "execution.failed" {
                assert_eq!(error.code, "outcome_unknown", "execution {i}");
                assert_eq!(error.outcome(), pb::Outcome::Unknown, "execution {i}");
            }
        }
        // The idempotency key names the same execution after the restart.
        let again = submit(&mut c, keyed(ability_of(*i), *i)).await;
        assert_eq!(again.execution_id, id, "execution {i}");
        stored_first.insert(*i, stored);
    }

    // Killed again and started a third time: the journal is now two segments, the second
    // following the first, and this start compacts them into a base. Everything reads back
    // as the second start had it.
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let (_server, addr) = serve(&config, &file);
    let mut c = client(&addr).await;
    for (i, stored) in &stored_first {
        let id = &stored[0].execution_id;
        assert_eq!(
            &watch(&mut c, id, 0).await,
            stored,
            "execution {i} after a compaction"
        );
    }
    let files: Vec<String> = std::fs::read_dir(store)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().any(|f| f.ends_with(".base")), "{files:?}");
    // A moment for anything the restart might have sent: nothing is.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        upstream.requests().len(),
        requests_before,
        "nothing was sent to the upstream again"
    );
}

#[tokio::test]
async fn a_second_server_on_the_same_directory_fails_to_start_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let config = config(store.to_str().unwrap(), "http://127.0.0.1:9");
    let file = tempfile::NamedTempFile::new().unwrap();
    let (first, _) = serve(&config, &file);
    let output = common::process::run_env(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            file.path().to_str().unwrap(),
        ],
        &[(KEY_ENV, KEY)],
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("in use by another process (pid {})", first.0.id())),
        "{stderr}"
    );
}

/// Each submission's request number and what it was told: its execution, or the code.
type Answers = Arc<Mutex<Vec<(usize, Result<String, tonic::Status>)>>>;

/// A wave of keyed submissions meets SIGTERM. Each is either accepted (and then drained to
/// its end) or refused with UNAVAILABLE having stored nothing: after the restart, the key of
/// a refused one starts a new execution that runs, never an old one that was stored as
/// cancelled by the shutdown and never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_refused_by_shutdown_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let config = config(store.to_str().unwrap(), "http://127.0.0.1:9");
    let file = tempfile::NamedTempFile::new().unwrap();
    let (mut server, addr) = serve(&config, &file);
    let answers: Answers = Arc::default();
    let mut callers = Vec::new();
    for task in 0..32 {
        let (answers, mut client) = (answers.clone(), client(&addr).await);
        callers.push(tokio::spawn(async move {
            for k in 0.. {
                let i = 1000 * task + k;
                let answer = client.submit(keyed("quick", i)).await;
                let answer = answer.map(|r| r.into_inner().execution_id);
                let refused = answer.is_err();
                answers.lock().unwrap().push((i, answer));
                if refused {
                    return;
                }
            }
        }));
    }
    within(async {
        while answers.lock().unwrap().len() < 200 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let pid = server.0.id().to_string();
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(signalled.success());
    let status = common::process::wait_for(&mut server.0, WAIT).expect("the server stops");
    assert!(status.success(), "{status:?}");
    for caller in callers {
        within(caller).await.unwrap();
    }
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let (mut accepted, mut refused) = (0, 0);
    let (_server, addr) = serve(&config, &file);
    let mut c = client(&addr).await;
    for (i, answer) in answers {
        let again = submit(&mut c, keyed("quick", i)).await;
        let events = watch(&mut c, &again.execution_id, 0).await;
        match answer {
            Ok(id) => {
                accepted += 1;
                assert_eq!(again.execution_id, id, "request {i}: the same execution");
            }
            // Refused by the runtime; or the call was cut by the transport as the server
            // closed its connections (the client cannot tell whether it got in: the key
            // tells below), never an error of the runtime's own.
            Err(status) if status.code() == tonic::Code::Unavailable => refused += 1,
            Err(status) => assert!(
                status.details().is_empty() && status.message() != "internal_error",
                "request {i}: {status:?}"
            ),
        }
        assert_eq!(
            events.last().unwrap().r#type,
            "execution.completed",
            "request {i} ran to its end: {events:?}"
        );
    }
    assert!(
        accepted >= 200 && refused > 0,
        "{accepted} accepted, {refused} refused"
    );
}

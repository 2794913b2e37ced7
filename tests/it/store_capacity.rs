//! The memory store is bounded: running executions are never evicted, so a store full of them
//! refuses new work with RESOURCE_EXHAUSTED; a terminal execution makes room and leaves with
//! its id.

use crate::common;

use std::time::Duration;

use common::*;
use model_runtime::config::ConfigBuilder;
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;
use tonic::Code;

fn config() -> ConfigBuilder {
    hanging()
        .drain_timeout(Duration::from_millis(200))
        .max_executions(3)
}

#[tokio::test]
async fn a_store_full_of_running_work_refuses_until_one_ends() {
    let mut server = start(config()).await;
    let c = &mut server.client;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            submit(c, request("chat", &format!("job {i}")))
                .await
                .execution_id,
        );
    }
    until_provider(c, "scripted", |p| p.in_flight == 3).await;
    for id in &ids {
        until_state(c, id, S::Running).await;
    }

    let status = within(c.submit(request("chat", "one too many")))
        .await
        .expect_err("a full store refuses");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let meta = metadata(c).await.store.unwrap();
    assert_eq!((meta.executions, meta.max_executions), (3, 3));
    for id in &ids {
        assert_eq!(get(c, id).await.state(), S::Running, "{id} is kept");
    }

    let cancelled = cancel(c, &ids[0], "make room").await;
    assert_eq!(cancelled.state(), S::Cancelled);
    let fresh = submit(c, request("chat", "fits now")).await;

    let status = try_get(c, &ids[0])
        .await
        .expect_err("the ended execution was evicted");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    for id in &ids[1..] {
        assert_eq!(get(c, id).await.state(), S::Running, "{id} is kept");
    }
    assert_ne!(
        get(c, &fresh.execution_id).await.state(),
        pb::ExecutionState::Unspecified
    );
    assert_eq!(stored_executions(c).await, 3);
    server.stop().await;
}

/// A store over its bytes because of running work lets each execution go as soon as it ends;
/// its own caller, following from the start, still reads it to the end, and cancelling one
/// still answers with its cancelled view.
#[tokio::test]
async fn an_execution_that_leaves_as_it_ends_still_reaches_its_caller() {
    let config = echo()
        .max_bytes(1 << 20)
        .provider(
            "slow",
            model_runtime::config::ProviderSpec::scripted().scripted_model(
                "stuck",
                &["text"],
                script(|s| s.hang = true),
            ),
        )
        .policy(
            "slow",
            model_runtime::config::PolicySpec::new(&["slow/stuck"]),
        )
        .ability("wait", model_runtime::config::AbilitySpec::new("slow"));
    let mut server = start(config).await;
    let c = &mut server.client;
    // Running, and holding most of the store's megabyte with its input.
    let heavy = submit(c, request("wait", &"x".repeat(700 * 1024))).await;
    let quick = submit(c, request("wait", "tiny")).await;
    // Each reply's 40 000 events take the store past its bytes while it runs; as it ends it
    // is the only terminal execution, and leaves at once.
    let prompt = "a ".repeat(40_000);
    for _ in 0..3 {
        let events = execute(c, request("chat", &prompt)).await;
        assert_complete_sequence(&events);
        let text = text_of(&events);
        assert!(text == prompt, "{} bytes of {}", text.len(), prompt.len());
        let gone = try_get(c, &events[0].execution_id).await.unwrap_err();
        assert_eq!(gone.code(), Code::NotFound, "it left as it ended: {gone:?}");
    }
    let view = cancel(c, &quick.execution_id, "enough").await;
    assert_eq!(view.state(), S::Cancelled);
    cancel(c, &heavy.execution_id, "done").await;
    server.stop().await;
}

/// Retention runs on time, not only at the next create: on an idle runtime an ended
/// execution leaves once its retention has passed, and on the file store its bytes leave the
/// disk too.
#[tokio::test]
async fn an_ended_execution_expires_on_an_idle_runtime() {
    const KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("store");
    let file = echo()
        .file_store(journal.to_str().unwrap(), "TEST_STORE_KEY")
        .max_disk_bytes(1 << 30);
    for (config, durable) in [(echo(), false), (file, true)] {
        let config = config
            .retention(Duration::from_secs(2))
            .build_with_env(&|_| Some(KEY.to_owned()))
            .unwrap();
        let mut server = start_with(config).await;
        let c = &mut server.client;
        let mut ids = Vec::new();
        for i in 0..20 {
            let events = execute(c, request("chat", &format!("once {i}"))).await;
            ids.push(events[0].execution_id.clone());
        }
        let held = || std::fs::read_dir(&journal).unwrap().flatten();
        let disk = |files: &mut dyn Iterator<Item = std::fs::DirEntry>| -> u64 {
            files
                .filter(|f| f.file_name().to_string_lossy().starts_with("journal-"))
                .map(|f| f.metadata().unwrap().len())
                .sum()
        };
        let before = if durable { disk(&mut held()) } else { 0 };
        // Nothing new arrives; every one of them leaves within a few seconds of its retention.
        tokio::time::timeout(Duration::from_secs(20), async {
            for id in &ids {
                while try_get(c, id).await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .await
        .expect("every ended execution expired");
        assert_eq!(stored_executions(c).await, 0);
        if durable {
            // The journal is compacted down to what is left: nothing.
            tokio::time::timeout(Duration::from_secs(20), async {
                while disk(&mut held()) * 4 > before {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("the disk came back: {} of {before}", disk(&mut held())));
        }
        server.stop().await;
    }
}

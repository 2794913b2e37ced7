//! 500 concurrent executions against a provider with `max_concurrency = 4` and
//! `queue_capacity = 16`: in-flight never exceeds 4, queue rejections are recorded as attempts
//! and routed to the fallback, and no permit leaks.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
use model_runtime::pb;

fn config() -> ConfigBuilder {
    Config::builder()
        .max_executions(2000)
        .provider(
            "limited",
            ProviderSpec::scripted()
                .max_concurrency(4)
                .queue_capacity(16)
                .scripted_model("slow", &["text"], script(|s| s.first_delta_ms = 5)),
        )
        .provider(
            "spare",
            ProviderSpec::scripted()
                .max_concurrency(1000)
                .queue_capacity(1000)
                .model("echo", &["text"]),
        )
        .policy("main", PolicySpec::new(&["limited/slow", "spare/echo"]))
        .ability("chat", AbilitySpec::new("main"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_concurrent_executions_respect_admission() {
    let mut server = start(config()).await;
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU32::new(0));
    let sampler = {
        let mut client = server.client.clone();
        let (done, peak) = (done.clone(), peak.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Acquire) {
                let meta = client
                    .get_runtime_metadata(pb::GetRuntimeMetadataRequest {})
                    .await
                    .unwrap()
                    .into_inner();
                let limited = meta.providers.iter().find(|p| p.name == "limited").unwrap();
                assert!(
                    limited.queued <= 16,
                    "queue over capacity: {}",
                    limited.queued
                );
                peak.fetch_max(limited.in_flight, Ordering::AcqRel);
            }
        })
    };
    let calls: Vec<_> = (0..500)
        .map(|i| {
            let mut client = server.client.clone();
            tokio::spawn(async move {
                let stream = client
                    .execute(request("chat", &format!("request {i}")))
                    .await
                    .unwrap()
                    .into_inner();
                collect(stream).await
            })
        })
        .collect();
    let mut ids = Vec::new();
    for call in calls {
        let events = call.await.unwrap();
        assert_complete_sequence(&events);
        assert_eq!(events.last().unwrap().r#type, "execution.completed");
        ids.push(events[0].execution_id.clone());
    }
    done.store(true, Ordering::Release);
    sampler.await.unwrap();
    assert!(
        peak.load(Ordering::Acquire) <= 4,
        "in flight peaked at {}",
        peak.load(Ordering::Acquire)
    );

    let c = &mut server.client;
    let mut rejected = 0;
    for id in &ids {
        let execution = get(c, id).await;
        let first = &execution.attempts[0];
        if !first.admitted {
            let error = first.error.as_ref().unwrap();
            assert_eq!(error.code, "admission_rejected");
            assert_eq!(error.class(), pb::ErrorClass::Retryable);
            assert_eq!(first.next_action(), pb::NextAction::Fallback);
            assert_eq!(execution.attempts[1].provider, "spare");
            assert_eq!(execution.provider, "spare");
            rejected += 1;
        }
    }
    assert!(
        rejected > 0,
        "500 arrivals at 4 permits + 16 queue slots must overflow"
    );
    let meta = c
        .get_runtime_metadata(pb::GetRuntimeMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    for p in &meta.providers {
        assert_eq!((p.in_flight, p.queued), (0, 0), "{} leaked", p.name);
    }
    server.stop().await;
}

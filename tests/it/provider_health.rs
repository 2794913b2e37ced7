//! Provider health end to end over gRPC, every target a real HTTP server on loopback: a
//! primary that goes silent or keeps refusing is ejected after a few attempts, later plans
//! skip it at no cost (and say so, with the reason and until when), a probe restores it once
//! it answers again, and a policy decides what happens when every capable target is ejected.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use common::adapters::{anthropic_at, env, openai_at};
use common::anthropic::{block_start, block_stop, message_delta, message_start, message_stop};
use common::upstream::{Behaviour, Upstream, sse, status};
use common::{completed_result, execute, failed_payload, request, start_with};
use model_runtime::config::{
    AbilitySpec, HealthSpec, OnAllUnhealthy, OnUnknownOutcome, PolicySpec,
};
use model_runtime::pb::execution_event::Payload;
use model_runtime::{Config, pb};

/// An answer in the Anthropic messages format: `Hello!`.
fn anthropic_reply() -> Behaviour {
    sse(&[
        message_start(r#"{"input_tokens":25,"output_tokens":1}"#),
        block_start(0, r#"{"type":"text","text":""}"#),
        common::anthropic::text_delta(0, "Hello!"),
        block_stop(0),
        message_delta("end_turn", 15),
        message_stop(),
    ])
}

/// An answer in the OpenAI chat completions format: `Hi.`.
fn openai_reply() -> Behaviour {
    let chunk = |delta: &str, finish: &str| {
        common::adapters::data(&format!(
            r#"{{"id":"c","object":"chat.completion.chunk","model":"small","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        ))
    };
    sse(&[
        chunk(r#"{"role":"assistant","content":"Hi."}"#, "null"),
        chunk("{}", r#""stop""#),
        "data: [DONE]\n\n".to_owned(),
    ])
}

/// `oa/small` at `openai` (first byte within 300 ms, an unknown outcome falls back, health as
/// `health` says), then `an/large` at `anthropic`, under a policy as `policy` makes it.
fn config(
    openai: &Upstream,
    anthropic: &Upstream,
    health: HealthSpec,
    policy: impl FnOnce(PolicySpec) -> PolicySpec,
) -> Config {
    let primary = openai_at(&openai.base_url(), "small")
        .timeouts(
            Duration::from_millis(200),
            Duration::from_millis(300),
            Duration::from_millis(300),
        )
        .on_unknown_outcome(OnUnknownOutcome::Fallback)
        .health(health);
    Config::builder()
        .provider("oa", primary)
        .provider("an", anthropic_at(&anthropic.base_url(), "large"))
        .policy(
            "default",
            policy(PolicySpec::new(&["oa/small", "an/large"])),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap()
}

/// The plan of `events`.
fn plan(events: &[pb::ExecutionEvent]) -> pb::RoutingPlan {
    events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Routing(r)) => r.plan.clone(),
            _ => None,
        })
        .expect("a routing event")
}

/// The health of model `model` of provider `provider`, from `GetRuntimeMetadata`.
async fn health_of(
    client: &mut pb::model_runtime_client::ModelRuntimeClient<tonic::transport::Channel>,
    provider: &str,
    model: &str,
) -> pb::TargetHealth {
    let info = common::provider(client, provider).await;
    let model = info.models.into_iter().find(|m| m.name == model).unwrap();
    model.health.unwrap()
}

#[tokio::test]
async fn a_silent_primary_is_ejected_skipped_then_probed_and_restored() {
    // Silent until `answering` is set; then it answers.
    let answering = Arc::new(AtomicBool::new(false));
    let flag = answering.clone();
    let openai = Upstream::start(move |_| {
        if flag.load(Ordering::Acquire) {
            openai_reply()
        } else {
            Behaviour::Hang
        }
    })
    .await;
    let anthropic = Upstream::always(anthropic_reply()).await;
    let health = HealthSpec::new()
        .consecutive_failures(3)
        .ejection(Duration::from_secs(2), Duration::from_secs(10));
    let mut server = start_with(config(&openai, &anthropic, health, |p| p)).await;

    // Three executions wait out the first-byte timeout, then fall back.
    for _ in 0..3 {
        let events = execute(&mut server.client, request("chat", "hi")).await;
        assert_eq!(completed_result(&events).provider, "an");
        assert!(plan(&events).targets[0].ejected.is_none());
    }
    assert_eq!(openai.requests().len(), 3);
    let ejected = health_of(&mut server.client, "oa", "small").await;
    assert_eq!(ejected.state(), pb::HealthState::Open);
    assert_eq!(ejected.reason, "3 consecutive failures (last: timeout)");
    assert_eq!(ejected.ejections, 1);

    // The next ones skip it: one attempt each, on the fallback, and the plan says why.
    for _ in 0..5 {
        let events = execute(&mut server.client, request("chat", "hi")).await;
        let result = completed_result(&events);
        assert_eq!((result.provider.as_str(), result.attempt), ("an", 1));
        let skipped = plan(&events).targets[0].clone();
        assert!(skipped.kept, "it is still capable");
        let why = skipped.ejected.expect("marked ejected");
        assert_eq!(why.reason, "3 consecutive failures (last: timeout)");
        let until = SystemTime::try_from(why.until.unwrap()).unwrap();
        assert!(until > SystemTime::now());
    }
    assert_eq!(
        openai.requests().len(),
        3,
        "no request reached the silent primary"
    );

    // It recovers; once the ejection ends, an execution probes it and it is routed to again.
    answering.store(true, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let events = execute(&mut server.client, request("chat", "hi")).await;
    assert_eq!(
        completed_result(&events).provider,
        "oa",
        "the probe succeeded"
    );
    let restored = health_of(&mut server.client, "oa", "small").await;
    assert_eq!(restored.state(), pb::HealthState::Closed);
    let events = execute(&mut server.client, request("chat", "hi")).await;
    assert_eq!(completed_result(&events).provider, "oa");
    server.stop().await;
}

#[tokio::test]
async fn a_429_with_retry_after_ejects_for_as_long_as_it_asks() {
    let openai = Upstream::always(status(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        &[("retry-after", "30")],
    ))
    .await;
    let anthropic = Upstream::always(anthropic_reply()).await;
    let health = HealthSpec::new().ejection(Duration::from_secs(5), Duration::from_secs(60));
    let mut server = start_with(config(&openai, &anthropic, health, |p| p)).await;

    let asked = SystemTime::now();
    let events = execute(&mut server.client, request("chat", "hi")).await;
    assert_eq!(completed_result(&events).provider, "an");
    let ejected = health_of(&mut server.client, "oa", "small").await;
    assert_eq!(ejected.state(), pb::HealthState::Open);
    let until = SystemTime::try_from(ejected.until.unwrap()).unwrap();
    let lasts = until.duration_since(asked).unwrap();
    assert!(
        lasts > Duration::from_secs(25) && lasts <= Duration::from_secs(31),
        "ejected for {lasts:?}, not the default 5 s"
    );
    assert!(ejected.reason.contains("30s"), "{}", ejected.reason);

    let events = execute(&mut server.client, request("chat", "hi")).await;
    assert!(plan(&events).targets[0].ejected.is_some());
    assert_eq!(openai.requests().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn with_every_target_ejected_try_anyway_serves_and_fail_fails() {
    for (mode, code) in [
        (OnAllUnhealthy::TryAnyway, None),
        (OnAllUnhealthy::Fail, Some("no_healthy_target")),
    ] {
        // The one target asks for a minute's rest once, then answers.
        let openai = Upstream::start(|n| {
            if n == 0 {
                status(
                    503,
                    r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
                    &[("retry-after", "60")],
                )
            } else {
                openai_reply()
            }
        })
        .await;
        let config = Config::builder()
            .provider(
                "oa",
                openai_at(&openai.base_url(), "small").health(HealthSpec::new()),
            )
            .policy(
                "default",
                PolicySpec::new(&["oa/small"]).on_all_unhealthy(mode),
            )
            .ability("chat", AbilitySpec::new("default"))
            .build_with_env(&env)
            .unwrap();
        let mut server = start_with(config).await;
        let first = execute(&mut server.client, request("chat", "hi")).await;
        assert!(matches!(
            first.last().unwrap().payload,
            Some(Payload::Failed(_))
        ));

        let events = execute(&mut server.client, request("chat", "hi")).await;
        let planned = plan(&events);
        assert!(planned.targets[0].ejected.is_some());
        match code {
            None => {
                assert!(planned.tried_anyway);
                assert_eq!(completed_result(&events).output.unwrap().text, "Hi.");
                assert_eq!(openai.requests().len(), 2);
            }
            Some(code) => {
                assert!(!planned.tried_anyway);
                let error = failed_payload(&events).error.unwrap();
                assert_eq!(error.code, code);
                assert!(error.message.contains("oa/small"), "{}", error.message);
                assert_eq!(openai.requests().len(), 1, "nothing was sent");
            }
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn a_policy_with_health_off_routes_as_before() {
    let openai = Upstream::always(Behaviour::Hang).await;
    let anthropic = Upstream::always(anthropic_reply()).await;
    let health = HealthSpec::new().consecutive_failures(1);
    let config = config(&openai, &anthropic, health, |p| {
        p.health(model_runtime::config::HealthMode::Off)
    });
    let mut server = start_with(config).await;
    for _ in 0..3 {
        let events = execute(&mut server.client, request("chat", "hi")).await;
        assert!(plan(&events).targets[0].ejected.is_none());
    }
    assert_eq!(
        openai.requests().len(),
        3,
        "every execution asked the primary"
    );
    let metadata = common::metadata(&mut server.client).await;
    assert!(!metadata.policies[0].health);
    server.stop().await;
}

/// `oa/small` at `openai` and `an/large` at `anthropic`, every setting of health, routing and
/// the policy at its default but what `policy` sets.
fn at_defaults(
    openai: &Upstream,
    anthropic: &Upstream,
    policy: impl FnOnce(PolicySpec) -> PolicySpec,
) -> Config {
    Config::builder()
        .provider("oa", openai_at(&openai.base_url(), "small"))
        .provider("an", anthropic_at(&anthropic.base_url(), "large"))
        .policy(
            "default",
            policy(PolicySpec::new(&["oa/small", "an/large"])),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap()
}

/// A 503 outage's answer.
fn unavailable() -> Behaviour {
    status(
        503,
        r#"{"error":{"message":"down","type":"server_error"}}"#,
        &[],
    )
}

/// failoverbench's flapping primary: down (503) for a minute, then healthy. At the defaults
/// health ejects it, probes it every 10 s at most while requests come (one a second here),
/// and it is back in use within 10 s of recovering (README, "Health"); meanwhile the
/// fallback serves every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_down_for_a_minute_is_back_in_use_within_ten_seconds_of_recovering() {
    const DOWN: Duration = Duration::from_secs(60);
    let down = Arc::new(AtomicBool::new(true));
    let flag = down.clone();
    let openai = Upstream::start(move |_| {
        if flag.load(Ordering::SeqCst) {
            unavailable()
        } else {
            openai_reply()
        }
    })
    .await;
    let anthropic = Upstream::always(anthropic_reply()).await;
    let mut server = start_with(at_defaults(&openai, &anthropic, |p| p)).await;
    let began = tokio::time::Instant::now();
    let mut recovered = None;
    let back = loop {
        if recovered.is_none() && began.elapsed() >= DOWN {
            down.store(false, Ordering::SeqCst);
            recovered = Some(tokio::time::Instant::now());
        }
        let events = execute(&mut server.client, request("chat", "hi")).await;
        let result = completed_result(&events);
        if let Some(at) = recovered
            && result.provider == "oa"
        {
            break at.elapsed();
        }
        if let Some(at) = recovered {
            assert!(
                at.elapsed() < Duration::from_secs(20),
                "the primary is still not used 20 s after it recovered"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "back in use {back:?} after recovering; {} requests reached it in all",
        openai.requests().len()
    );
    assert!(
        back <= Duration::from_secs(12),
        "back in use {back:?} after it recovered"
    );
    // The outage cost a probe per ejection, not a request per execution.
    assert!(
        openai.requests().len() <= 20,
        "{} requests reached the primary",
        openai.requests().len()
    );
    server.stop().await;
}

/// A refusal by health is not the provider's answer: a retry onto a target its health just
/// ejected moves on to the next target, also under `on_rejected = "stop"`, and an outage of
/// plain 503s with nothing left ends `attempts_exhausted` (the last real failure), never
/// `rejected`.
#[tokio::test]
async fn a_health_refusal_never_stops_routing_and_never_says_rejected() {
    let openai = Upstream::always(unavailable()).await;
    let anthropic = Upstream::always(anthropic_reply()).await;
    let stops = |p: PolicySpec| {
        p.on_rejected(model_runtime::config::OnRejected::Stop)
            .retries_per_target(3)
            .max_attempts(6)
    };
    let mut server = start_with(at_defaults(&openai, &anthropic, stops)).await;
    for _ in 0..3 {
        let events = execute(&mut server.client, request("chat", "hi")).await;
        assert_eq!(completed_result(&events).provider, "an", "{events:?}");
    }
    server.stop().await;

    // Only the primary: the 503s eject it, the retry that follows is refused by health, and
    // the execution ends with the 503s' own code.
    let only = Config::builder()
        .provider("oa", openai_at(&openai.base_url(), "small"))
        .policy(
            "default",
            PolicySpec::new(&["oa/small"])
                .on_rejected(model_runtime::config::OnRejected::Stop)
                .retries_per_target(3)
                .max_attempts(6),
        )
        .ability("chat", AbilitySpec::new("default"))
        .build_with_env(&env)
        .unwrap();
    let mut server = start_with(only).await;
    let events = execute(&mut server.client, request("chat", "hi")).await;
    let error = failed_payload(&events).error.unwrap();
    assert_eq!(error.code, "attempts_exhausted", "{error:?}");
    assert_eq!(
        error.last_attempt_error.unwrap().code,
        "unavailable",
        "the last real failure, not the refusal"
    );
    server.stop().await;
}

//! `Execute` streams one execution's whole event sequence, in order, ending with its one
//! terminal event.

use crate::common;

use std::time::Duration;

use std::collections::HashMap;

use common::*;
use model_runtime::Config;
use model_runtime::config::{
    AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec, ScriptedToolCall,
};
use model_runtime::pb;
use model_runtime::pb::ExecutionState as S;
use model_runtime::pb::execution_event::Payload;

#[tokio::test]
async fn execute_streams_the_lifecycle_word_by_word() {
    let mut server = start(echo()).await;
    let prompt = "the quick brown fox";
    let mut req = request("chat", prompt);
    req.labels = HashMap::from([("tenant".to_owned(), "t-1".to_owned())]);

    let events = execute(&mut server.client, req).await;

    assert_complete_sequence(&events);
    assert_eq!(
        types(&events),
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "output.text.delta",
            "output.text.delta",
            "output.text.delta",
            "output.text.delta",
            "usage.reported",
            "usage.reported",
            "execution.completed",
        ]
    );
    let states: Vec<S> = events.iter().map(|e| e.state()).collect();
    assert_eq!(
        states,
        [
            S::Accepted,
            S::Routing,
            S::Running,
            S::Running,
            S::Running,
            S::Running,
            S::Running,
            S::Running,
            S::Running,
            S::Succeeded,
        ]
    );

    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::TextDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["the ", "quick ", "brown ", "fox"]);

    match &events[0].payload {
        Some(Payload::Accepted(a)) => {
            assert_eq!((a.ability.as_str(), a.policy.as_str()), ("chat", "default"));
            let limits = a.limits.expect("limits");
            assert!(limits.deadline.is_some());
            assert_eq!(limits.max_attempts, 3);
            assert!(limits.allow_fallback);
        }
        other => panic!("first payload {other:?}"),
    }
    match &events[2].payload {
        Some(Payload::AttemptStarted(a)) => {
            assert_eq!(
                (a.attempt, a.provider.as_str(), a.model.as_str()),
                (1, "scripted", "echo")
            );
        }
        other => panic!("third payload {other:?}"),
    }

    let facts: Vec<pb::UsageFact> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::UsageReported(u)) => u.fact.clone(),
            _ => None,
        })
        .collect();
    let units: Vec<(&str, u64)> = facts
        .iter()
        .map(|f| (f.unit.as_str(), f.quantity))
        .collect();
    assert_eq!(units, [("input_tokens", 4), ("output_tokens", 4)]);
    for fact in &facts {
        assert_eq!(fact.source(), pb::UsageSource::ProviderReported);
        assert_eq!(
            (fact.attempt, fact.provider.as_str(), fact.model.as_str()),
            (1, "scripted", "echo")
        );
        assert_eq!(fact.labels.get("tenant").map(String::as_str), Some("t-1"));
    }

    let result = completed_result(&events);
    assert_eq!(result.output.clone().unwrap().text, prompt);
    assert_eq!(result.finish_reason(), pb::FinishReason::Stop);
    assert_eq!(
        (
            result.provider.as_str(),
            result.model.as_str(),
            result.attempt
        ),
        ("scripted", "echo", 1)
    );
    server.stop().await;
}

fn tools() -> ConfigBuilder {
    let call = ScriptedToolCall {
        name: "get_weather".into(),
        arguments: r#"{"city":"Paris","unit":"c"}"#.into(),
    };
    Config::builder()
        .drain_timeout(Duration::from_millis(200))
        .provider(
            "scripted",
            ProviderSpec::scripted().scripted_model(
                "caller",
                &["text", "tools"],
                script(|s| s.tool_call = Some(call)),
            ),
        )
        .policy("default", PolicySpec::new(&["scripted/caller"]))
        .ability("agent", AbilitySpec::new("default").requires(&["tools"]))
}

#[tokio::test]
async fn a_tool_call_streams_its_start_and_argument_deltas() {
    let server = start(tools()).await;
    let mut client = server.client.clone();

    let events = execute(&mut client, request("agent", "weather in Paris?")).await;

    assert_complete_sequence(&events);
    let ty = types(&events);
    assert_eq!(
        ty[..4],
        [
            "execution.accepted",
            "execution.routing",
            "route.attempt.started",
            "output.tool_call.started"
        ]
    );
    assert_eq!(ty.last(), Some(&"execution.completed"));
    assert_eq!(text_of(&events), "", "a tool call emits no text");

    let started = events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::ToolCallStarted(t)) => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        (started.index, started.name.as_str(), started.attempt),
        (0, "get_weather", 1)
    );
    assert!(!started.id.is_empty());

    let pieces: Vec<pb::OutputToolCallArgumentsDelta> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::ToolCallArgumentsDelta(d)) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert!(!pieces.is_empty(), "no argument deltas in {ty:?}");
    assert!(pieces.iter().all(|d| d.index == 0));
    let arguments: String = pieces.iter().map(|d| d.delta.as_str()).collect();
    assert_eq!(arguments, r#"{"city":"Paris","unit":"c"}"#);
    assert!(
        events
            .iter()
            .filter(|e| matches!(e.payload, Some(Payload::ToolCallArgumentsDelta(_))))
            .all(|e| e.state() == S::Running)
    );

    let result = completed_result(&events);
    assert_eq!(result.finish_reason(), pb::FinishReason::ToolCalls);
    let output = result.output.unwrap();
    assert_eq!(
        output.tool_calls,
        [pb::ToolCall {
            id: started.id.clone(),
            name: "get_weather".into(),
            arguments_json: arguments,
        }]
    );
    assert_eq!(events.last().unwrap().state(), S::Succeeded);
    drop(client);
    server.stop().await;
}

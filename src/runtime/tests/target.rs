//! A request that names one target (`ExecuteRequest.target`): routed to it alone, within the
//! policy in effect; anything else is refused naming the field.

use super::{finish, request, runtime};
use crate::execution::{ExecutionState, Idempotency};
use crate::runtime::RuntimeError;

#[tokio::test(start_paused = true)]
async fn a_named_target_is_the_only_one_tried_and_the_plan_says_why() {
    let rt = runtime();
    // The policy would try a/flaky first; the request names a/echo.
    let mut r = request("fallback", "straight there");
    r.target = Some("a/echo".into());
    let (view, _) = finish(&rt, r).await;
    assert_eq!(view.state, ExecutionState::Succeeded);
    assert_eq!(view.attempts.len(), 1);
    let plan = view.plan.unwrap();
    let flaky = &plan.targets[0];
    assert_eq!(&*flaky.model, "flaky");
    assert!(!flaky.kept);
    assert_eq!(flaky.reason.as_deref(), Some("not the requested target"));
    assert!(plan.targets[1].kept);

    // Only that target, retries and all: a/flaky named alone fails on it, never on a/echo.
    let mut r = request("fallback", "hi");
    r.target = Some("a/flaky".into());
    let (view, _) = finish(&rt, r).await;
    assert_eq!(view.state, ExecutionState::Failed);
    assert!(view.attempts.iter().all(|a| &*a.model == "flaky"));
}

#[tokio::test(start_paused = true)]
async fn a_target_outside_the_policy_or_without_the_capabilities_is_refused() {
    let rt = runtime();
    let refused = async |target: &str, policy: &str, capabilities: &[&str]| {
        let mut r = request(policy, "hi");
        r.target = Some(target.into());
        r.capabilities = capabilities.iter().map(|c| (*c).to_owned()).collect();
        match rt.submit(r).await {
            Err(RuntimeError::InvalidArgument(v)) => v.to_string(),
            other => panic!("{target}: {other:?}"),
        }
    };
    let text = refused("a/vision", "fallback", &[]).await;
    assert!(
        text.contains("target: `a/vision` is not a target of policy `fallback`"),
        "{text}"
    );
    assert!(text.contains("allows it with policy vision"), "{text}");
    let text = refused("echo", "fallback", &[]).await;
    assert!(text.contains("expected provider/model"), "{text}");
    let text = refused("a/echo", "vision", &["vision"]).await;
    assert!(
        text.contains("lacks capabilities the request requires: vision"),
        "{text}"
    );
}

#[test]
fn the_target_is_part_of_the_idempotent_identity() {
    use crate::execution::idempotency::Resolved;
    let resolved = Resolved {
        policy: "fallback",
        max_attempts: 3,
        allow_fallback: true,
        delivery: crate::execution::Delivery::Streamed,
    };
    let mut r = request("fallback", "hi");
    r.idempotency_key = Some("k".into());
    let unpinned = Idempotency::of(&r, resolved).unwrap();
    r.target = Some("a/echo".into());
    let pinned = Idempotency::of(&r, resolved).unwrap();
    assert_ne!(unpinned.fingerprint, pinned.fingerprint);
}

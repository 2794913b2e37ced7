use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::config::OnAllUnhealthy;
use crate::config::{HealthSpec, PolicySpec, ProviderSpec};
use crate::execution::{AttemptCode, ErrorClass, PlanTarget, RoutingPlan};

/// Provider `p` with models `a` and `b`, health as `spec` says.
fn health(spec: HealthSpec) -> Health {
    let config = crate::config::Config::builder()
        .provider(
            "p",
            ProviderSpec::scripted()
                .model("a", &["text"])
                .model("b", &["text"])
                .health(spec),
        )
        .policy("main", PolicySpec::new(&["p/a", "p/b"]))
        .ability("chat", crate::config::AbilitySpec::new("main"))
        .build()
        .unwrap();
    Health::new(&config.providers["p"])
}

fn error(code: AttemptCode, class: ErrorClass, retry_after: Option<Duration>) -> AttemptError {
    AttemptError {
        class,
        code,
        message: String::new(),
        retry_after,
    }
}

/// The execution whose attempt failed.
fn by() -> crate::execution::ExecutionId {
    crate::execution::ExecutionId::from_bytes([7; 16])
}

fn unavailable() -> AttemptError {
    error(AttemptCode::Unavailable, ErrorClass::Retryable, None)
}

fn is_healthy(verdict: &Verdict) -> bool {
    matches!(verdict, Verdict::Healthy)
}

fn ejection(verdict: Verdict) -> Ejection {
    match verdict {
        Verdict::Ejected(ejection) => ejection,
        other => panic!("not ejected: {other:?}"),
    }
}

const S: Duration = Duration::from_secs(1);

#[test]
fn consecutive_failures_eject_then_one_probe_decides() {
    let h = health(
        HealthSpec::new()
            .consecutive_failures(3)
            .ejection(5 * S, 60 * S),
    );
    let t0 = Instant::now();
    h.failed("a", &unavailable(), t0, by());
    h.failed("a", &unavailable(), t0, by());
    assert!(is_healthy(&h.check("a", t0)), "two failures are not three");
    h.failed("a", &unavailable(), t0, by());
    let ejected = ejection(h.check("a", t0 + S));
    assert_eq!(ejected.reason, "3 consecutive failures (last: unavailable)");
    assert!(ejected.until.is_some());
    assert!(
        is_healthy(&h.check("b", t0)),
        "another model is not ejected"
    );
    assert_eq!(h.status("a", t0).state, HealthState::Open);

    // The ejection ends: plans keep it again, the first attempt to reach it probes it, and
    // until the probe decides a second attempt is refused and plans skip it.
    assert!(is_healthy(&h.check("a", t0 + 5 * S)));
    let probe = h.admit("a", t0 + 5 * S).unwrap();
    assert!(probe.is_some(), "the first attempt probes");
    let waiting = h.admit("a", t0 + 5 * S).unwrap_err();
    assert!(waiting.until.is_none() && waiting.reason.ends_with("a probe is deciding"));
    assert!(!is_healthy(&h.check("a", t0 + 5 * S)));
    h.succeeded("a", t0 + 6 * S);
    drop(probe);
    assert!(
        h.admit("a", t0 + 6 * S).unwrap().is_none(),
        "closed: no probe needed"
    );
    assert!(is_healthy(&h.check("a", t0 + 6 * S)));
    let status = h.status("a", t0 + 6 * S);
    assert_eq!((status.state, status.ejections), (HealthState::Closed, 1));
}

#[test]
fn a_failed_probe_doubles_the_ejection_up_to_its_bound() {
    let h = health(
        HealthSpec::new()
            .consecutive_failures(1)
            .ejection(5 * S, 12 * S),
    );
    let t0 = Instant::now();
    h.failed("a", &unavailable(), t0, by());
    let mut at = t0;
    for length in [5 * S, 10 * S, 12 * S, 12 * S] {
        assert!(!is_healthy(&h.check("a", at + length - S / 2)));
        at += length;
        let probe = h.admit("a", at).unwrap();
        assert!(probe.is_some(), "probed after {length:?}");
        h.failed("a", &unavailable(), at, by());
        drop(probe);
    }
}

#[test]
fn a_probe_that_never_ran_gives_its_place_back() {
    let h = health(HealthSpec::new().consecutive_failures(1).ejection(S, S));
    let t0 = Instant::now();
    h.failed("a", &unavailable(), t0, by());
    let probe = h.admit("a", t0 + S).unwrap();
    assert!(probe.is_some());
    drop(probe);
    assert!(h.admit("a", t0 + S).unwrap().is_some());
}

#[test]
fn retry_after_ejects_for_as_long_as_the_provider_asked_within_the_bound() {
    let h = health(HealthSpec::new().ejection(5 * S, 60 * S));
    let t0 = Instant::now();
    let limited = error(
        AttemptCode::RateLimited,
        ErrorClass::Retryable,
        Some(30 * S),
    );
    h.failed("a", &limited, t0, by());
    assert!(
        !is_healthy(&h.check("a", t0 + 29 * S)),
        "30 s, not the default 5 s"
    );
    assert!(h.admit("a", t0 + 30 * S).unwrap().is_some());

    let asks_too_much = error(
        AttemptCode::Unavailable,
        ErrorClass::Retryable,
        Some(3600 * S),
    );
    h.failed("b", &asks_too_much, t0, by());
    assert!(!is_healthy(&h.check("b", t0 + 59 * S)));
    assert!(h.admit("b", t0 + 60 * S).unwrap().is_some());
}

#[test]
fn failures_in_flight_together_are_one_ejection_and_a_success_during_it_lifts_nothing() {
    let h = health(HealthSpec::new().ejection(5 * S, 60 * S));
    let t0 = Instant::now();
    let limited = error(
        AttemptCode::RateLimited,
        ErrorClass::Retryable,
        Some(10 * S),
    );
    for late in 0..3 {
        h.failed("a", &limited, t0 + late * S, by());
    }
    // An attempt sent before the ejection succeeds during it.
    h.succeeded("a", t0 + 3 * S);
    assert_eq!(h.status("a", t0).ejections, 1, "one ejection, lengthened");
    assert!(!is_healthy(&h.check("a", t0 + 11 * S)));
    // The probe fails: the second ejection is twice the first, not reset by that success.
    let probe = h.admit("a", t0 + 12 * S).unwrap();
    assert!(probe.is_some());
    h.failed("a", &unavailable(), t0 + 12 * S, by());
    drop(probe);
    assert!(!is_healthy(&h.check("a", t0 + 21 * S)));
    assert!(h.admit("a", t0 + 22 * S).unwrap().is_some());
    assert_eq!(h.status("a", t0 + 22 * S).ejections, 2);
}

#[test]
fn a_403_ejects_that_model_alone() {
    let h = health(HealthSpec::new());
    let t0 = Instant::now();
    h.failed(
        "a",
        &error(AttemptCode::Forbidden, ErrorClass::Rejected, None),
        t0,
        by(),
    );
    assert!(!is_healthy(&h.check("a", t0)));
    assert!(is_healthy(&h.check("b", t0)));
}

#[test]
fn a_refused_key_ejects_every_model_of_the_provider() {
    let h = health(HealthSpec::new());
    let t0 = Instant::now();
    h.failed(
        "a",
        &error(AttemptCode::Unauthorized, ErrorClass::Rejected, None),
        t0,
        by(),
    );
    for model in ["a", "b"] {
        let ejected = ejection(h.check(model, t0));
        assert!(
            ejected.reason.contains("refused the key"),
            "{}",
            ejected.reason
        );
    }
}

#[test]
fn rejections_of_the_request_and_local_refusals_count_for_nothing() {
    let h = health(HealthSpec::new().consecutive_failures(1));
    let t0 = Instant::now();
    for (code, class) in [
        (AttemptCode::InvalidRequest, ErrorClass::Rejected),
        (AttemptCode::ContentFiltered, ErrorClass::Rejected),
        (AttemptCode::NotFound, ErrorClass::Rejected),
        (AttemptCode::InvalidRequest, ErrorClass::Invalid),
        (AttemptCode::AdmissionRejected, ErrorClass::Retryable),
        (AttemptCode::DeadlineExceeded, ErrorClass::OutcomeUnknown),
        (AttemptCode::Cancelled, ErrorClass::OutcomeUnknown),
    ] {
        h.failed("a", &error(code, class, None), t0, by());
    }
    assert!(is_healthy(&h.check("a", t0)));
    let timeout = error(AttemptCode::Timeout, ErrorClass::OutcomeUnknown, None);
    h.failed("a", &timeout, t0, by());
    assert!(!is_healthy(&h.check("a", t0)), "a silent target counts");
}

#[test]
fn a_failure_rate_over_the_window_ejects_once_it_has_enough_attempts() {
    let h = health(
        HealthSpec::new()
            .consecutive_failures(100)
            .failure_rate(0.5, 10, 10 * S),
    );
    let t0 = Instant::now();
    for _ in 0..4 {
        h.failed("a", &unavailable(), t0, by());
        h.succeeded("a", t0);
    }
    assert!(
        is_healthy(&h.check("a", t0)),
        "8 attempts are too few to judge"
    );
    h.succeeded("a", t0);
    h.failed("a", &unavailable(), t0, by());
    let ejected = ejection(h.check("a", t0));
    assert_eq!(
        ejected.reason,
        "5 of 10 attempts failed within 10s (last: unavailable)"
    );

    // A new window forgets the old one: the tenth attempt, a failure, comes in it.
    for _ in 0..4 {
        h.failed("b", &unavailable(), t0, by());
        h.succeeded("b", t0);
    }
    h.succeeded("b", t0);
    h.failed("b", &unavailable(), t0 + 10 * S, by());
    assert!(is_healthy(&h.check("b", t0 + 10 * S)));
}

#[test]
fn with_health_off_nothing_is_kept_or_ejected() {
    let config = crate::config::Config::builder()
        .provider(
            "p",
            ProviderSpec::scripted().model("a", &["text"]).health_off(),
        )
        .policy("main", PolicySpec::new(&["p/a"]))
        .ability("chat", crate::config::AbilitySpec::new("main"))
        .build()
        .unwrap();
    let h = Health::new(&config.providers["p"]);
    let t0 = Instant::now();
    for _ in 0..10 {
        h.failed("a", &unavailable(), t0, by());
    }
    assert!(is_healthy(&h.check("a", t0)));
    assert_eq!(h.status("a", t0).state, HealthState::Off);
}

fn plan_of(kept: &[bool]) -> RoutingPlan {
    RoutingPlan {
        policy: "main".into(),
        required_capabilities: Vec::new(),
        targets: kept
            .iter()
            .enumerate()
            .map(|(i, kept)| PlanTarget {
                provider: "p".into(),
                model: format!("m{i}").into(),
                kept: *kept,
                reason: (!kept).then(|| "missing capabilities: vision".to_owned()),
                missing_capabilities: Vec::new(),
                ejected: None,
            })
            .collect(),
        ended_before_routing: None,
        tried_anyway: false,
    }
}

proptest! {
    /// The plan is a pure function of the plan without health, the policy's
    /// `on_all_unhealthy` and what each breaker says: the same inputs give the same plan, the
    /// order never changes, exactly the ejected kept targets are skipped (with their
    /// evidence), and they are tried anyway exactly when every kept target is ejected and the
    /// policy says so.
    #[test]
    fn the_plan_is_a_pure_function_of_its_inputs(
        kept in prop::collection::vec(any::<bool>(), 1..8),
        ejected in prop::collection::vec(any::<bool>(), 8),
        try_anyway in any::<bool>(),
    ) {
        let base = Arc::new(plan_of(&kept));
        let mode = if try_anyway { OnAllUnhealthy::TryAnyway } else { OnAllUnhealthy::Fail };
        let snapshot: BTreeMap<String, bool> =
            (0..kept.len()).map(|i| (format!("m{i}"), ejected[i])).collect();
        let verdict = |_: &str, model: &str| {
            if snapshot[model] {
                Verdict::Ejected(Ejection { reason: format!("{model} is down"), until: None })
            } else {
                Verdict::Healthy
            }
        };
        let first = with_health(base.clone(), mode, verdict);
        let again = with_health(base.clone(), mode, verdict);
        prop_assert_eq!(&first, &again);

        let names = |p: &RoutingPlan| p.targets.iter().map(|t| t.model.to_string()).collect::<Vec<_>>();
        prop_assert_eq!(names(&first), names(&base));
        let mut any_skipped = false;
        for (i, target) in first.targets.iter().enumerate() {
            let skipped = kept[i] && ejected[i];
            any_skipped |= skipped;
            prop_assert_eq!(target.ejected.is_some(), skipped);
            prop_assert_eq!(target.kept, kept[i]);
        }
        if !any_skipped {
            prop_assert!(Arc::ptr_eq(&first, &base), "an untouched plan is not copied");
        }
        let all_ejected = (0..kept.len()).filter(|i| kept[*i]).all(|i| ejected[i])
            && kept.iter().any(|k| *k);
        prop_assert_eq!(first.tried_anyway, try_anyway && all_ejected);
        let attempted: Vec<usize> = (0..kept.len())
            .filter(|i| kept[*i] && (!ejected[*i] || first.tried_anyway))
            .collect();
        prop_assert_eq!(first.to_attempt().count(), attempted.len());
    }
}

/// At the defaults, a target down for a minute (failoverbench's flapping primary) and then
/// healthy is back in use within `max_ejection` (10 s) of recovering, and the outage costs a
/// probe per 10 s of it: one request a second, each sent to it while health says so.
#[test]
fn at_the_defaults_a_target_that_recovers_is_back_within_ten_seconds() {
    let h = health(HealthSpec::new());
    let t0 = Instant::now();
    let recovered = t0 + 60 * S;
    let (mut during, mut back) = (0, None);
    for second in 0..120 {
        let now = t0 + second * S;
        if !is_healthy(&h.check("a", now)) {
            continue;
        }
        let Ok(probe) = h.admit("a", now) else {
            continue;
        };
        if now < recovered {
            during += 1;
            h.failed("a", &unavailable(), now, by());
        } else {
            back.get_or_insert(now - recovered);
            h.succeeded("a", now);
        }
        drop(probe);
    }
    let back = back.expect("used again after it recovered");
    assert!(back <= 10 * S, "back in use {back:?} after it recovered");
    // Three to eject it, then one probe per ejection: 5 s, then every 10 s.
    assert!(
        during <= 3 + 7,
        "{during} requests reached it while it was down"
    );
}

/// One ejection names one instant, whichever plan asks and when.
#[test]
fn one_ejection_names_one_instant_in_every_plan() {
    let h = health(HealthSpec::new().consecutive_failures(1));
    let t0 = Instant::now();
    h.failed("a", &unavailable(), t0, by());
    let first = ejection(h.check("a", t0 + S / 10)).until;
    std::thread::sleep(Duration::from_millis(2));
    let second = ejection(h.check("a", t0 + S)).until;
    let refused = h.admit("a", t0 + 2 * S).unwrap_err().until;
    assert!(first.is_some());
    assert_eq!(first, second);
    assert_eq!(first, refused);
    assert_eq!(h.status("a", t0 + 3 * S).until, first);
}

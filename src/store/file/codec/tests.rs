use super::*;
use crate::execution::{
    Acceptance, AttemptStart, Delivery, EffectiveLimits, Ejection, PlanTarget, Priority,
    RoutingPlan, UsageFact, UsageSource, UsageUnit, fixtures,
};

#[test]
fn every_record_reads_back_as_written() {
    let id = ExecutionId::new();
    let at = SystemTime::UNIX_EPOCH + Duration::new(1_780_000_000, 123_456_789);
    let accepted = fixtures::accepted();
    let labels: Labels = [("tenant".to_owned(), "acme".to_owned())].into();
    let idempotency = Idempotency {
        key: "order-7".into(),
        fingerprint: Fingerprint(u128::MAX - 5),
    };
    let mut body = Vec::new();
    create(id, at, Some(&idempotency), &labels, &accepted, &mut body);
    assert_eq!(
        decode(&body).unwrap(),
        Record::Create {
            id,
            at,
            idempotency: Some(idempotency),
            labels: Arc::new(labels),
            accepted,
        }
    );
    let payloads = fixtures::every_kind_but_accepted();
    body.clear();
    append(id, 3, at, u32::try_from(payloads.len()).unwrap(), &mut body);
    for payload in &payloads {
        event(payload, &mut body);
    }
    assert_eq!(
        decode(&body).unwrap(),
        Record::Append {
            id,
            first: 3,
            at,
            payloads,
        }
    );
    body.clear();
    expire(id, &mut body);
    assert_eq!(decode(&body).unwrap(), Record::Expire { id });
}

#[test]
fn any_cut_of_a_record_is_an_error_not_a_panic() {
    let mut body = Vec::new();
    let payloads = fixtures::every_kind_but_accepted();
    append(
        ExecutionId::new(),
        1,
        SystemTime::now(),
        u32::try_from(payloads.len()).unwrap(),
        &mut body,
    );
    for payload in &payloads {
        event(payload, &mut body);
    }
    for cut in 0..body.len() {
        assert!(decode(&body[..cut]).is_err(), "cut at {cut}");
    }
    assert!(decode(&[APPEND]).is_err());
    assert_eq!(decode(&[9, 9, 9]).unwrap_err(), Malformed::RecordKind(9));
}

/// One of each event written compact, with every option set and unset.
fn every_compact_kind() -> Vec<EventPayload> {
    let started = SystemTime::UNIX_EPOCH + Duration::new(1_780_000_000, 123_456_789);
    let mut payloads = vec![
        fixtures::accepted(),
        EventPayload::Accepted(Arc::new(Acceptance {
            ability: "summarize".into(),
            policy: "cheap-first".into(),
            limits: EffectiveLimits {
                deadline: started,
                max_attempts: 7,
                allow_fallback: false,
                retry_budget: Duration::new(u64::MAX, 999_999_999),
                delivery: Delivery::Buffered,
                priority: Priority::Batch,
            },
        })),
        EventPayload::AttemptStarted(Arc::new(AttemptStart {
            attempt: 3,
            provider: "anthropic-eu".into(),
            model: "claude".into(),
            started_at: started,
        })),
    ];
    for (source, unit) in [
        (UsageSource::ProviderReported, UsageUnit::OUTPUT_TOKENS),
        (UsageSource::RuntimeMeasured, UsageUnit::REQUESTS),
        (
            UsageSource::RuntimeEstimated,
            UsageUnit::new("audio_seconds"),
        ),
    ] {
        payloads.push(EventPayload::Usage(Arc::new(UsageFact {
            unit,
            quantity: u64::MAX - 1,
            source,
            attempt: 2,
            provider: "p".into(),
            model: "m".into(),
            labels: Arc::default(),
            position: (7 << 20) | 3,
        })));
    }
    payloads.extend(
        (fixtures::every_kind_but_accepted().into_iter())
            .filter(|p| matches!(p, EventPayload::Completed(_))),
    );
    payloads.push(fixtures::completed(1, "a reply"));
    payloads.push(fixtures::routing());
    payloads.push(routing(started));
    assert_eq!(payloads.len(), 10);
    payloads
}

/// A routing plan with targets kept, filtered and ejected (until a time, and open).
fn routing(until: SystemTime) -> EventPayload {
    let target = |provider: &str, kept: bool, ejected: Option<Ejection>| PlanTarget {
        provider: provider.into(),
        model: "m".into(),
        kept,
        reason: (!kept).then(|| "lacks vision".to_owned()),
        missing_capabilities: if kept { vec![] } else { vec!["vision".into()] },
        ejected,
    };
    EventPayload::Routing(Arc::new(RoutingPlan {
        policy: "default".into(),
        required_capabilities: vec!["text".into(), "vision".into()],
        targets: vec![
            target("a", true, None),
            target("b", false, None),
            target(
                "c",
                true,
                Some(Ejection {
                    reason: "5 failures".into(),
                    until: Some(until),
                }),
            ),
            target(
                "d",
                true,
                Some(Ejection {
                    reason: "open".into(),
                    until: None,
                }),
            ),
        ],
        ended_before_routing: Some("cancelled".into()),
        tried_anyway: true,
    }))
}

#[test]
fn the_events_every_execution_writes_read_back_exactly_and_compact() {
    let payloads = every_compact_kind();
    for payload in &payloads {
        let mut compact = Vec::new();
        event(payload, &mut compact);
        let json = as_json(payload);
        assert!(compact.len() * 3 < json.len() * 2, "{payload:?}");
        assert_eq!(decode_event(&compact).unwrap(), *payload);
        // As earlier releases wrote them: still read.
        assert_eq!(decode_event(&json).unwrap(), *payload);
        for cut in 0..compact.len() {
            assert!(decode_event(&compact[..cut]).is_err(), "cut at {cut}");
        }
    }
}

#[test]
fn times_and_durations_read_back_exactly_however_far_ahead_and_out_of_range_is_an_error() {
    // Past what nanoseconds in 64 bits reach (2554).
    let far = SystemTime::UNIX_EPOCH + Duration::new(40_000_000_000, 999_999_999);
    let started = EventPayload::AttemptStarted(Arc::new(AttemptStart {
        attempt: 1,
        provider: "p".into(),
        model: "m".into(),
        started_at: far,
    }));
    let mut bytes = Vec::new();
    event(&started, &mut bytes);
    assert_eq!(decode_event(&bytes).unwrap(), started);
    // Nanoseconds of a second or more, and a time no clock holds.
    let at = 1 + 4;
    let mut nanos = bytes.clone();
    nanos[at + 8..at + 12].copy_from_slice(&1_000_000_000u32.to_le_bytes());
    assert_eq!(
        decode_event(&nanos).unwrap_err(),
        Malformed::OutOfRange("a duration's nanoseconds")
    );
    let mut never = bytes;
    never[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(
        decode_event(&never).unwrap_err(),
        Malformed::OutOfRange("a time")
    );
}

#[test]
fn a_compact_event_out_of_place_or_out_of_range_is_an_error() {
    let mut accepted = Vec::new();
    event(&fixtures::accepted(), &mut accepted);
    assert_eq!(
        Reader(&accepted).event().unwrap_err(),
        Malformed::AcceptedInAppend
    );
    let mut fact = Vec::new();
    event(&fixtures::usage(1), &mut fact);
    fact[1 + 4 + 8 + 8] = 9;
    assert_eq!(
        Reader(&fact).event().unwrap_err(),
        Malformed::Code("usage source", 9)
    );
    // A completion that counts more tool calls than its bytes could hold.
    let mut completed = Vec::new();
    event(&fixtures::completed(1, ""), &mut completed);
    let calls = completed.len() - 8;
    completed[calls..calls + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        Reader(&completed).event().unwrap_err(),
        Malformed::Count {
            count: u32::MAX,
            bytes: 4
        }
    );
}

/// The PostgreSQL store's usage order reads only what may hold a fact.
#[cfg(feature = "postgres")]
#[test]
fn only_facts_and_json_events_may_be_usage() {
    let mut fact = Vec::new();
    event(&fixtures::usage(1), &mut fact);
    assert!(may_be_usage(&fact));
    assert!(may_be_usage(&as_json(&fixtures::usage(1))));
    for other in [fixtures::attempt_started(1), fixtures::text(1, "hi")] {
        let mut bytes = Vec::new();
        event(&other, &mut bytes);
        assert!(!may_be_usage(&bytes), "{other:?}");
    }
}

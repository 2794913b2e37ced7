//! Idempotency, in one place: a submission with a key is identified by the key and a
//! fingerprint of the request as it resolved ([`Idempotency::of`]), and a later submission
//! with the same key is the same execution exactly when the fingerprints match
//! ([`Idempotency::same_request`]). A store only maps keys to executions and asks this module.
//!
//! The request is compared as it resolves: an unset `policy`, `max_attempts`,
//! `allow_fallback` or `delivery` equals its default spelled out. The deadline is not compared, so a retry
//! with a fresh deadline attaches to the first execution.

use std::io;

use serde::Serialize;

use crate::execution::{Delivery, ExecuteRequest, ExecutionInput, Labels};

/// A stable digest of a request: FNV-1a over its canonical JSON, so the value is the same
/// across processes and versions of the standard library (a durable store keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u128);

/// The identity of one keyed submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's key.
    pub key: String,
    /// The request's fingerprint, as it resolved.
    pub fingerprint: Fingerprint,
}

/// What a request resolved to where it may leave a field unset.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved<'a> {
    /// The policy in effect.
    pub policy: &'a str,
    /// The attempt limit in effect.
    pub max_attempts: u32,
    /// Whether fallback is allowed.
    pub allow_fallback: bool,
    /// How output reaches the caller.
    pub delivery: Delivery,
}

/// The request as it is compared: everything but the deadline and the key, with the
/// defaults spelled out.
#[derive(Serialize)]
struct Canonical<'a> {
    ability: &'a str,
    capabilities: &'a [String],
    input: &'a ExecutionInput,
    policy: &'a str,
    /// Left out when unset, so keys stored before it existed still match.
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    max_attempts: u32,
    allow_fallback: bool,
    /// Left out when streamed, so keys stored before delivery existed still match.
    #[serde(skip_serializing_if = "Delivery::is_streamed")]
    delivery: Delivery,
    labels: &'a Labels,
}

impl Idempotency {
    /// The identity of `request`, which resolved to `resolved`; `None` without a key.
    pub(crate) fn of(request: &ExecuteRequest, resolved: Resolved<'_>) -> Option<Self> {
        // Every field named, so a field added to the request is a decision made here.
        let ExecuteRequest {
            ability,
            capabilities,
            input,
            deadline: _,
            policy: _,
            target,
            max_attempts: _,
            allow_fallback: _,
            delivery: _,
            // How urgently it should be admitted says nothing of what it asks for.
            priority: _,
            idempotency_key,
            labels,
            // Where the caller was in its own trace says nothing of what it asked for.
            trace: _,
        } = request;
        let key = idempotency_key.as_ref()?;
        let canonical = Canonical {
            ability,
            capabilities,
            input,
            policy: resolved.policy,
            target: target.as_deref(),
            max_attempts: resolved.max_attempts,
            allow_fallback: resolved.allow_fallback,
            delivery: resolved.delivery,
            labels,
        };
        Some(Self {
            key: key.clone(),
            fingerprint: Fingerprint::of(&canonical),
        })
    }

    /// Whether `other`, submitted under the same key, is the same request.
    pub fn same_request(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Fingerprint {
    /// The digest of `value`'s JSON, hashed as it is written: no copy of the request is made.
    fn of(value: &impl Serialize) -> Self {
        let mut hasher = Fnv(Self::OFFSET);
        // Plain data always serializes; were it ever to fail, the digest of what was written
        // still separates requests.
        let _ = serde_json::to_writer(&mut hasher, value);
        Self(hasher.0)
    }

    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
}

/// FNV-1a, 128 bits, as an `io::Write` sink.
struct Fnv(u128);

impl io::Write for Fnv {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        for byte in bytes {
            self.0 = (self.0 ^ u128::from(*byte)).wrapping_mul(Fingerprint::PRIME);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::execution::Message;

    fn request(prompt: &str) -> ExecuteRequest {
        ExecuteRequest {
            ability: "chat".into(),
            input: ExecutionInput {
                messages: vec![Message::user(prompt)],
                ..Default::default()
            },
            idempotency_key: Some("k".into()),
            ..Default::default()
        }
    }

    const DEFAULTS: Resolved<'static> = Resolved {
        policy: "default",
        max_attempts: 3,
        allow_fallback: true,
        delivery: Delivery::Streamed,
    };

    fn of(request: &ExecuteRequest) -> Idempotency {
        Idempotency::of(request, DEFAULTS).unwrap_or_else(|| panic!("no key"))
    }

    #[test]
    fn the_deadline_is_not_compared_and_everything_else_is() {
        let a = request("hello");
        let mut b = a.clone();
        b.deadline = Some(SystemTime::now() + Duration::from_secs(5));
        assert!(of(&a).same_request(&of(&b)));
        let mut c = a.clone();
        c.labels.insert("tenant".into(), "t1".into());
        assert!(!of(&a).same_request(&of(&c)));
        assert!(!of(&a).same_request(&of(&request("hello!"))));
        let mut d = a.clone();
        d.capabilities.push("vision".into());
        assert!(!of(&a).same_request(&of(&d)));
    }

    #[test]
    fn defaults_spelled_out_are_the_same_request() {
        let unset = request("hello");
        let mut spelled = unset.clone();
        spelled.policy = Some("default".into());
        spelled.max_attempts = Some(3);
        spelled.allow_fallback = Some(true);
        // Both resolve alike, so both are compared in their resolved form.
        assert!(of(&unset).same_request(&of(&spelled)));
        let other_policy = Resolved {
            policy: "other",
            ..DEFAULTS
        };
        let moved = Idempotency::of(&unset, other_policy);
        assert!(moved.is_some_and(|m| !of(&unset).same_request(&m)));
    }

    #[test]
    fn buffered_delivery_is_another_request() {
        let streamed = request("hello");
        let buffered = Resolved {
            delivery: Delivery::Buffered,
            ..DEFAULTS
        };
        let other = Idempotency::of(&streamed, buffered);
        assert!(other.is_some_and(|b| !of(&streamed).same_request(&b)));
    }

    #[test]
    fn no_key_no_identity_and_a_stable_digest() {
        let mut keyless = request("x");
        keyless.idempotency_key = None;
        assert_eq!(Idempotency::of(&keyless, DEFAULTS), None);
        // The digest is part of what a durable store keeps: a change to the canonical form
        // or the hash must be deliberate, and shows here.
        assert_eq!(
            of(&request("x")).fingerprint,
            Fingerprint(90454222574624957789397699115472727528)
        );
    }
}

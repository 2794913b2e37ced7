//! The compact forms of the events every execution writes: its acceptance, its routing plan,
//! each attempt's start and usage facts (a reply has a few: its input and output tokens, often
//! more), and its result. Each names every field of its type, so a field added to one does not build until it
//! is written here.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{ACCEPTED, COMPLETED, ROUTING, Reader, STARTED, USAGE, put_count, put_str};
use crate::execution::{
    Acceptance, AttemptStart, Delivery, EffectiveLimits, Ejection, ExecutionResult, FinishReason,
    Output, PlanTarget, Priority, Reasoning, RoutingPlan, ToolCall, UsageFact, UsageSource,
    UsageUnit,
};
use crate::store::file::error::Malformed;

pub(super) fn accepted(acceptance: &Acceptance, out: &mut Vec<u8>) {
    let Acceptance {
        ability,
        policy,
        limits:
            EffectiveLimits {
                deadline,
                max_attempts,
                allow_fallback,
                retry_budget,
                delivery,
                priority,
            },
    } = acceptance;
    out.push(ACCEPTED);
    put_instant(out, *deadline);
    out.extend_from_slice(&max_attempts.to_le_bytes());
    out.push(u8::from(*allow_fallback));
    put_duration(out, *retry_budget);
    out.push(match delivery {
        Delivery::Streamed => 0,
        Delivery::Buffered => 1,
    });
    out.push(match priority {
        Priority::Interactive => 0,
        Priority::Standard => 1,
        Priority::Batch => 2,
    });
    put_str(out, ability.as_bytes());
    put_str(out, policy.as_bytes());
}

pub(super) fn routing(plan: &RoutingPlan, out: &mut Vec<u8>) {
    let RoutingPlan {
        policy,
        required_capabilities,
        targets,
        ended_before_routing,
        tried_anyway,
    } = plan;
    out.push(ROUTING);
    put_str(out, policy.as_bytes());
    out.push(u8::from(*tried_anyway));
    put_maybe(out, ended_before_routing.as_deref());
    put_names(out, required_capabilities);
    put_count(out, targets.len());
    for PlanTarget {
        provider,
        model,
        kept,
        reason,
        missing_capabilities,
        ejected,
    } in targets
    {
        put_str(out, provider.as_bytes());
        put_str(out, model.as_bytes());
        out.push(u8::from(*kept));
        put_maybe(out, reason.as_deref());
        put_names(out, missing_capabilities);
        match ejected {
            None => out.push(0),
            Some(Ejection { reason, until }) => {
                out.push(1);
                put_str(out, reason.as_bytes());
                match until {
                    None => out.push(0),
                    Some(until) => {
                        out.push(1);
                        put_instant(out, *until);
                    }
                }
            }
        }
    }
}

/// A string that may be absent: 0, or 1 and the string.
fn put_maybe(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        None => out.push(0),
        Some(text) => {
            out.push(1);
            put_str(out, text.as_bytes());
        }
    }
}

/// A list of names: its count, then each.
fn put_names(out: &mut Vec<u8>, names: &[String]) {
    put_count(out, names.len());
    for name in names {
        put_str(out, name.as_bytes());
    }
}

pub(super) fn completed(result: &ExecutionResult, out: &mut Vec<u8>) {
    let ExecutionResult {
        output: Output {
            text,
            tool_calls,
            reasoning,
        },
        finish_reason,
        provider,
        model,
        attempt,
    } = result;
    out.push(COMPLETED);
    out.extend_from_slice(&attempt.to_le_bytes());
    out.push(match finish_reason {
        FinishReason::Stop => 0,
        FinishReason::Length => 1,
        FinishReason::ToolCalls => 2,
        FinishReason::ContentFilter => 3,
        FinishReason::Refusal => 4,
        FinishReason::Other => 5,
    });
    put_str(out, provider.as_bytes());
    put_str(out, model.as_bytes());
    put_str(out, text.as_bytes());
    put_count(out, tool_calls.len());
    for ToolCall {
        id,
        name,
        arguments_json,
    } in tool_calls
    {
        put_strings(out, [id, name, arguments_json]);
    }
    put_count(out, reasoning.len());
    for Reasoning {
        text,
        signature,
        redacted,
    } in reasoning
    {
        put_strings(out, [text, signature, redacted]);
    }
}

fn put_duration(out: &mut Vec<u8>, duration: Duration) {
    out.extend_from_slice(&duration.as_secs().to_le_bytes());
    out.extend_from_slice(&duration.subsec_nanos().to_le_bytes());
}

/// A time as the duration since the Unix epoch: every time the JSON form could write, to the
/// nanosecond, however far ahead (the JSON form could not write one before the epoch).
fn put_instant(out: &mut Vec<u8>, time: SystemTime) {
    put_duration(
        out,
        time.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default(),
    );
}

/// An item of a completion's lists: three strings.
fn put_strings(out: &mut Vec<u8>, strings: [&String; 3]) {
    for string in strings {
        put_str(out, string.as_bytes());
    }
}

pub(super) fn started(start: &AttemptStart, out: &mut Vec<u8>) {
    let AttemptStart {
        attempt,
        provider,
        model,
        started_at,
    } = start;
    out.push(STARTED);
    out.extend_from_slice(&attempt.to_le_bytes());
    put_instant(out, *started_at);
    put_str(out, provider.as_bytes());
    put_str(out, model.as_bytes());
}

pub(super) fn usage(fact: &UsageFact, out: &mut Vec<u8>) {
    // The labels are the execution's, kept once with it (the JSON form skipped them too).
    let UsageFact {
        unit,
        quantity,
        source,
        attempt,
        provider,
        model,
        labels: _,
        position,
    } = fact;
    out.push(USAGE);
    out.extend_from_slice(&attempt.to_le_bytes());
    out.extend_from_slice(&quantity.to_le_bytes());
    out.extend_from_slice(&position.to_le_bytes());
    out.push(match source {
        UsageSource::ProviderReported => 0,
        UsageSource::RuntimeMeasured => 1,
        UsageSource::RuntimeEstimated => 2,
    });
    put_str(out, unit.as_str().as_bytes());
    put_str(out, provider.as_bytes());
    put_str(out, model.as_bytes());
}

impl Reader<'_> {
    /// Only the PostgreSQL store keeps an acceptance in this form (its first event row).
    #[cfg(any(test, feature = "postgres", feature = "fuzzing"))]
    pub(super) fn accepted(&mut self) -> Result<Acceptance, Malformed> {
        let deadline = self.instant()?;
        let max_attempts = self.u32()?;
        let allow_fallback = self.flag()?;
        let retry_budget = self.duration()?;
        let delivery = match self.u8()? {
            0 => Delivery::Streamed,
            1 => Delivery::Buffered,
            other => return Err(Malformed::Code("delivery", other)),
        };
        let priority = match self.u8()? {
            0 => Priority::Interactive,
            1 => Priority::Standard,
            2 => Priority::Batch,
            other => return Err(Malformed::Code("priority", other)),
        };
        Ok(Acceptance {
            ability: self.str()?.into(),
            policy: self.str()?.into(),
            limits: EffectiveLimits {
                deadline,
                max_attempts,
                allow_fallback,
                retry_budget,
                delivery,
                priority,
            },
        })
    }

    pub(super) fn routing(&mut self) -> Result<RoutingPlan, Malformed> {
        let policy = self.str()?.into();
        let tried_anyway = self.flag()?;
        let ended_before_routing = self.maybe()?.map(Arc::from);
        let required_capabilities = self.names()?;
        // A target takes at least 15 bytes: two strings, three flags and a count.
        let mut targets = Vec::with_capacity(self.count(15)?);
        for _ in 0..targets.capacity() {
            targets.push(PlanTarget {
                provider: self.str()?.into(),
                model: self.str()?.into(),
                kept: self.flag()?,
                reason: self.maybe()?.map(str::to_owned),
                missing_capabilities: self.names()?,
                ejected: if self.flag()? {
                    Some(Ejection {
                        reason: self.str()?.to_owned(),
                        until: if self.flag()? {
                            Some(self.instant()?)
                        } else {
                            None
                        },
                    })
                } else {
                    None
                },
            });
        }
        Ok(RoutingPlan {
            policy,
            required_capabilities,
            targets,
            ended_before_routing,
            tried_anyway,
        })
    }

    fn duration(&mut self) -> Result<Duration, Malformed> {
        let (secs, nanos) = (self.u64()?, self.u32()?);
        if nanos >= 1_000_000_000 {
            return Err(Malformed::OutOfRange("a duration's nanoseconds"));
        }
        Ok(Duration::new(secs, nanos))
    }

    fn instant(&mut self) -> Result<SystemTime, Malformed> {
        let since = self.duration()?;
        (SystemTime::UNIX_EPOCH.checked_add(since)).ok_or(Malformed::OutOfRange("a time"))
    }

    fn flag(&mut self) -> Result<bool, Malformed> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(Malformed::Code("flag", other)),
        }
    }

    fn maybe(&mut self) -> Result<Option<&str>, Malformed> {
        Ok(if self.flag()? {
            Some(self.str()?)
        } else {
            None
        })
    }

    fn names(&mut self) -> Result<Vec<String>, Malformed> {
        let mut names = Vec::with_capacity(self.count(4)?);
        for _ in 0..names.capacity() {
            names.push(self.str()?.to_owned());
        }
        Ok(names)
    }

    pub(super) fn completed(&mut self) -> Result<ExecutionResult, Malformed> {
        let attempt = self.u32()?;
        let finish_reason = match self.u8()? {
            0 => FinishReason::Stop,
            1 => FinishReason::Length,
            2 => FinishReason::ToolCalls,
            3 => FinishReason::ContentFilter,
            4 => FinishReason::Refusal,
            5 => FinishReason::Other,
            other => return Err(Malformed::Code("finish reason", other)),
        };
        let provider = self.str()?.into();
        let model = self.str()?.into();
        let text = self.str()?.to_owned();
        let mut tool_calls = Vec::with_capacity(self.count(12)?);
        for _ in 0..tool_calls.capacity() {
            let [id, name, arguments_json] = self.strings()?;
            tool_calls.push(ToolCall {
                id,
                name,
                arguments_json,
            });
        }
        let mut reasoning = Vec::with_capacity(self.count(12)?);
        for _ in 0..reasoning.capacity() {
            let [text, signature, redacted] = self.strings()?;
            reasoning.push(Reasoning {
                text,
                signature,
                redacted,
            });
        }
        Ok(ExecutionResult {
            output: Output {
                text,
                tool_calls,
                reasoning,
            },
            finish_reason,
            provider,
            model,
            attempt,
        })
    }

    fn strings(&mut self) -> Result<[String; 3], Malformed> {
        Ok([
            self.str()?.to_owned(),
            self.str()?.to_owned(),
            self.str()?.to_owned(),
        ])
    }

    /// A count of items of at least `least` bytes each: one the bytes left cannot hold is
    /// damage, not an allocation.
    fn count(&mut self, least: usize) -> Result<usize, Malformed> {
        let count = self.u32()?;
        let bytes = self.0.len();
        match usize::try_from(count) {
            Ok(count) if count <= bytes / least => Ok(count),
            _ => Err(Malformed::Count { count, bytes }),
        }
    }

    pub(super) fn started(&mut self) -> Result<AttemptStart, Malformed> {
        Ok(AttemptStart {
            attempt: self.u32()?,
            started_at: self.instant()?,
            provider: self.str()?.into(),
            model: self.str()?.into(),
        })
    }

    pub(super) fn usage(&mut self) -> Result<UsageFact, Malformed> {
        let attempt = self.u32()?;
        let quantity = self.u64()?;
        let position = self.u64()?;
        let source = match self.u8()? {
            0 => UsageSource::ProviderReported,
            1 => UsageSource::RuntimeMeasured,
            2 => UsageSource::RuntimeEstimated,
            other => return Err(Malformed::Code("usage source", other)),
        };
        let unit = self.str()?;
        // A known unit reads back as the known one, not as a copy.
        let unit = (UsageUnit::KNOWN.into_iter())
            .find(|known| known.as_str() == unit)
            .unwrap_or_else(|| UsageUnit::new(unit.to_owned()));
        Ok(UsageFact {
            unit,
            quantity,
            source,
            attempt,
            provider: self.str()?.into(),
            model: self.str()?.into(),
            labels: Arc::default(),
            position,
        })
    }
}

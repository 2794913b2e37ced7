//! The compact forms of the events every execution writes: its acceptance, each attempt's
//! start and usage facts (a reply has a few: its input and output tokens, often more), and its
//! result. Each names every field of its type, so a field added to one does not build until it
//! is written here.

use std::sync::Arc;
use std::time::Duration;

use super::{ACCEPTED, COMPLETED, Reader, STARTED, USAGE, nanos, put_str};
use crate::execution::{
    Acceptance, AttemptStart, Delivery, EffectiveLimits, ExecutionResult, FinishReason, Output,
    Priority, Reasoning, ToolCall, UsageFact, UsageSource, UsageUnit,
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
    out.extend_from_slice(&nanos(*deadline).to_le_bytes());
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

/// An item of a completion's lists: three strings.
fn put_strings(out: &mut Vec<u8>, strings: [&String; 3]) {
    for string in strings {
        put_str(out, string.as_bytes());
    }
}

fn put_count(out: &mut Vec<u8>, count: usize) {
    out.extend_from_slice(&u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
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
    out.extend_from_slice(&nanos(*started_at).to_le_bytes());
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
    #[cfg(any(test, feature = "postgres"))]
    pub(super) fn accepted(&mut self) -> Result<Acceptance, Malformed> {
        let deadline = self.time()?;
        let max_attempts = self.u32()?;
        let allow_fallback = self.u8()? != 0;
        let retry_budget = Duration::new(self.u64()?, self.u32()?);
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
        let mut tool_calls = Vec::with_capacity(self.count()?);
        for _ in 0..tool_calls.capacity() {
            let [id, name, arguments_json] = self.strings()?;
            tool_calls.push(ToolCall {
                id,
                name,
                arguments_json,
            });
        }
        let mut reasoning = Vec::with_capacity(self.count()?);
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

    /// A count of items of three strings each (at least 12 bytes): one the bytes left cannot
    /// hold is damage, not an allocation.
    fn count(&mut self) -> Result<usize, Malformed> {
        let count = self.u32()?;
        let bytes = self.0.len();
        match usize::try_from(count) {
            Ok(count) if count <= bytes / 12 => Ok(count),
            _ => Err(Malformed::Count { count, bytes }),
        }
    }

    pub(super) fn started(&mut self) -> Result<AttemptStart, Malformed> {
        Ok(AttemptStart {
            attempt: self.u32()?,
            started_at: self.time()?,
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

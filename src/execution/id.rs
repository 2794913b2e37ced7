//! Execution ids: a random UUID shown as `ex_` followed by 32 lowercase hex digits.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

const PREFIX: &str = "ex_";

/// The identity of one execution. Cheap to copy; unguessable.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId(Uuid);

impl ExecutionId {
    /// A fresh random id.
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }
}

impl Default for ExecutionId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", self.0.simple())
    }
}

impl fmt::Debug for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A string that is not an execution id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("is not an execution id: expected `ex_` followed by 32 lowercase hex digits")]
pub struct MalformedId;

impl FromStr for ExecutionId {
    type Err = MalformedId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix(PREFIX).ok_or(MalformedId)?;
        let well_formed = hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(MalformedId);
        }
        Uuid::parse_str(hex).map(Self).map_err(|_| MalformedId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_its_text_form() {
        let id = ExecutionId::new();
        let text = id.to_string();
        assert!(text.starts_with("ex_") && text.len() == 35, "{text}");
        assert_eq!(text.parse::<ExecutionId>(), Ok(id));
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "ex_",
            "ex_123",
            "EX_0123456789abcdef0123456789abcdef",
            "ex_0123456789ABCDEF0123456789ABCDEF",
            "ex_0123456789abcdef0123456789abcdeg",
            "0123456789abcdef0123456789abcdef",
            "ex_0123456789abcdef0123456789abcdef0",
        ] {
            assert_eq!(bad.parse::<ExecutionId>(), Err(MalformedId), "{bad:?}");
        }
    }
}

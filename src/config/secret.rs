//! A secret read from the environment at start-up. It redacts itself in `Debug` and has no
//! `Display`, so a key cannot reach a log line, an error or metadata by formatting; the one
//! way to the value is [`Secret::expose`], called where a request header is built.

use std::fmt;
use std::sync::Arc;

/// A secret value, e.g. a provider API key.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The value itself: for building the request header, never for formatting.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("sk-very-secret");
        let shown = format!("{secret:?} {:?}", Some(secret.clone()));
        assert!(!shown.contains("very-secret"), "{shown}");
        assert_eq!(secret.expose(), "sk-very-secret");
    }
}

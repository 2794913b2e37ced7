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

/// Why bytes are not a store key: how many they are (never what they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must hold a 32-byte key: 64 hex digits or 32 raw bytes (it holds {len} bytes)")]
pub struct NotAKey {
    /// How many bytes it holds.
    pub len: usize,
}

/// A 32-byte key of the file store. Its bytes are never formatted: `Debug` shows where it
/// came from (`env MODEL_RUNTIME_STORE_KEY`, `file /etc/...`), and the store names a key by an
/// id derived from it, never by its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreKey {
    bytes: [u8; 32],
    from: Arc<str>,
}

impl StoreKey {
    /// A key read from `from`: 64 hex digits (surrounding white space ignored) or exactly 32
    /// raw bytes. The error says what was wrong without quoting the value.
    pub fn parse(value: &[u8], from: impl Into<Arc<str>>) -> Result<Self, NotAKey> {
        let trimmed = value.trim_ascii();
        let bytes = if trimmed.len() == 64 && trimmed.iter().all(u8::is_ascii_hexdigit) {
            let mut bytes = [0; 32];
            for (byte, pair) in bytes.iter_mut().zip(trimmed.chunks_exact(2)) {
                *byte = hex(pair[0]) << 4 | hex(pair[1]);
            }
            bytes
        } else if let Ok(raw) = <[u8; 32]>::try_from(value) {
            raw
        } else {
            return Err(NotAKey { len: value.len() });
        };
        Ok(Self {
            bytes,
            from: from.into(),
        })
    }

    /// The key itself: for the cipher, never for formatting.
    pub fn expose(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// Where it came from.
    pub fn from(&self) -> &str {
        &self.from
    }
}

/// A proxy URL, which may carry the proxy's credentials (`http://user:password@host:port`).
/// `Debug` shows where it points with any credentials replaced, so a config, a provider or
/// an error formatted for a log never carries them; [`ProxyUrl::expose`] is for connecting.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl(Arc<str>);

impl ProxyUrl {
    /// Wraps a URL, already checked to be an http(s) URL.
    pub fn new(url: impl Into<Arc<str>>) -> Self {
        Self(url.into())
    }

    /// The URL itself, credentials included: for connecting, never for formatting.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with its user and password, if any, replaced by `REDACTED` (still a URL).
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
                // Setting credentials fails only for URLs that cannot have them (no host),
                // which an http(s) URL always has.
                let _ = url.set_username("REDACTED");
                let _ = url.set_password(None);
                url.to_string()
            }
            Ok(_) => self.0.to_string(),
            Err(_) => "<unparsable URL>".to_owned(),
        }
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({})", self.redacted())
    }
}

fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreKey(<redacted>, from {})", self.from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_key_is_64_hex_digits_or_32_raw_bytes() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n";
        let key = StoreKey::parse(hex.as_bytes(), "test").unwrap();
        assert_eq!(key.expose()[..4], [0x00, 0x11, 0x22, 0x33]);
        assert_eq!(key.expose()[31], 0xff);
        let raw = [7u8; 32];
        assert_eq!(StoreKey::parse(&raw, "test").unwrap().expose(), &raw);
        let short = StoreKey::parse(b"abcd", "test").unwrap_err();
        assert_eq!(short, NotAKey { len: 4 });
        assert!(short.to_string().contains("(it holds 4 bytes)"), "{short}");
        // 64 characters that are not all hex digits are not a key either.
        assert!(StoreKey::parse(&[b'g'; 64], "test").is_err());
        let debug = format!("{key:?}");
        assert!(
            !debug.contains("0011") && debug.contains("from test"),
            "{debug}"
        );
    }

    #[test]
    fn a_proxy_url_never_shows_its_credentials() {
        let proxy = ProxyUrl::new("http://user:p%40ss@proxy.internal:3128");
        let shown = format!("{proxy:?} {:?}", Some(proxy.clone()));
        assert!(
            !shown.contains("p%40ss") && !shown.contains("user"),
            "{shown}"
        );
        assert!(shown.contains("proxy.internal:3128"), "{shown}");
        assert_eq!(proxy.expose(), "http://user:p%40ss@proxy.internal:3128");
        assert_eq!(
            ProxyUrl::new("http://proxy.internal:3128").redacted(),
            "http://proxy.internal:3128"
        );
    }

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("sk-very-secret");
        let shown = format!("{secret:?} {:?}", Some(secret.clone()));
        assert!(!shown.contains("very-secret"), "{shown}");
        assert_eq!(secret.expose(), "sk-very-secret");
    }
}

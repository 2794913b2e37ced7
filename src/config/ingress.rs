//! `[ingress]`: the OpenAI- and Anthropic-compatible HTTP ingress, off unless the table is
//! there. Its keys as written, their check, and what they mean.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::bounds::duration;
use super::field::{Env, invalid, variable};
use super::{ConfigError, Secret};

/// The HTTP ingress, as configured.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// Where it listens (HTTP/1.1 and h2c on one port).
    pub listen: SocketAddr,
    /// The bearer secret a gateway must present (`Authorization: Bearer ...`, or Anthropic's
    /// `x-api-key`); `None` takes every caller, for a listener only the gateway can reach.
    pub secret: Option<Secret>,
    /// The variable `secret` was read from.
    pub secret_env: Option<Arc<str>>,
    /// How long an execution submitted with an `Idempotency-Key` runs on after its caller
    /// went away, so a retry can attach to it; then it is cancelled. One without a key is
    /// cancelled at once.
    pub detach_grace: Duration,
}

/// `[ingress]` as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIngress {
    pub listen: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    #[serde(default = "default_detach_grace", with = "humantime_serde")]
    pub detach_grace: Duration,
}

fn default_detach_grace() -> Duration {
    Duration::from_secs(30)
}

/// The longest `detach_grace`: a caller's retry comes within minutes or not at all.
const MAX_DETACH_GRACE: Duration = Duration::from_secs(3600);

/// `raw` checked.
pub(super) fn ingress(raw: RawIngress, env: Env<'_>) -> Result<IngressConfig, ConfigError> {
    let listen = raw.listen.parse().map_err(|_| {
        invalid(
            "ingress.listen",
            format!("`{}` is not an address like 127.0.0.1:8080", raw.listen),
        )
    })?;
    let (secret, secret_env) = match raw.secret_env {
        None => (None, None),
        Some(var) => {
            let value = variable("ingress.secret_env", &var, env)?;
            (Some(Secret::new(value)), Some(Arc::from(var)))
        }
    };
    Ok(IngressConfig {
        listen,
        secret,
        secret_env,
        detach_grace: duration("ingress.detach_grace", raw.detach_grace, MAX_DETACH_GRACE)?,
    })
}

//! `adapter = "scripted"`: the built-in deterministic provider. It takes no keys of its own
//! (each model's `script` says what it does), and no endpoint.

use serde::{Deserialize, Serialize};

use super::http::RawEndpoint;
use super::{Adapter, At};
use crate::config::{ConfigError, ProviderSpec};

/// The scripted adapter: nothing to configure.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedConfig;

/// No keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {}

impl Adapter for ScriptedConfig {
    type Raw = Raw;
    const HTTP: bool = false;

    fn validate(_: &At<'_>, _: Raw, _: RawEndpoint) -> Result<Self, ConfigError> {
        Ok(Self)
    }

    fn effective(&self, _: &mut Raw, _: &mut RawEndpoint) {}
}

impl ProviderSpec {
    /// A `scripted` provider.
    pub fn scripted() -> Self {
        Self::of("scripted")
    }
}

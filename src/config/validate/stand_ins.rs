//! Stand-ins for the secrets a file names, for checking it by names alone (`check-config
//! --names-only`, `Config::check_names`): for each variable, a value of the form its key
//! takes, so that everything but the secret itself is checked as `serve` would check it.

use crate::config::raw::RawConfig;

/// What stands in for a key, a token or a store's key: 64 hex digits, a form every key
/// (an API key, an AWS key, the file store's 32 bytes) takes.
pub(crate) const UNREAD: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The variables of a file that hold a connection URL; every other one holds a key.
pub(crate) struct StandIns {
    postgres: Option<String>,
    redis: Vec<String>,
}

impl StandIns {
    /// The URL variables `raw` names.
    pub(crate) fn of(raw: &RawConfig) -> Self {
        Self {
            postgres: raw.store.url_env.clone(),
            redis: raw
                .providers
                .values()
                .filter_map(|p| p.limiter.as_ref()?.url_env.clone())
                .collect(),
        }
    }

    /// What stands in for the variable `name`: a URL for a store's or a limiter's, a path on
    /// the container credentials endpoint for Bedrock's, a key for any other. Those a file
    /// never needs are unset.
    pub(crate) fn value(&self, name: &str) -> Option<String> {
        if self.postgres.as_deref() == Some(name) {
            return Some("postgres://stand-in@localhost/stand-in".to_owned());
        }
        if self.redis.iter().any(|r| r == name) {
            return Some("redis://localhost:6379".to_owned());
        }
        match name {
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" => Some("/stand-in".to_owned()),
            "AWS_CONTAINER_CREDENTIALS_FULL_URI" | "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" => None,
            _ => Some(UNREAD.to_owned()),
        }
    }
}

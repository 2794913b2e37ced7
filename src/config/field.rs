//! One field's check: the error that names it, and where a secret's value comes from (an
//! environment variable, or a file unless only names are checked). Every check of the
//! configuration (`validate/`, `adapter/`) is made of these and of `bounds.rs`.

use super::ConfigError;

/// Where secrets come from: environment variables (the process environment, or a test's
/// stand-in), and files, which are read unless only their names are checked
/// (`check-config --names-only`).
#[derive(Clone, Copy)]
pub(in crate::config) struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    files: bool,
}

impl<'a> Env<'a> {
    /// Variables from `lookup`; files are read.
    pub(in crate::config) fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            lookup,
            files: true,
        }
    }

    /// Variables from `lookup` (stand-ins, say); files named are not read.
    pub(in crate::config) fn names_only(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            lookup,
            files: false,
        }
    }

    /// The value of the variable `name`.
    pub(in crate::config) fn var(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
    }

    /// Whether a file a secret is kept in is read (and checked), or only named.
    pub(in crate::config) fn reads_files(&self) -> bool {
        self.files
    }
}

/// The value of the environment variable `var` that `key` names: a name of letters, digits
/// and `_`, set and not empty. Errors name the variable, never the value (a secret, often).
pub(in crate::config) fn variable(
    key: &str,
    var: &str,
    env: Env<'_>,
) -> Result<String, ConfigError> {
    if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(invalid(
            key,
            "must name an environment variable (letters, digits and `_`)",
        ));
    }
    match env.var(var) {
        None => Err(invalid(
            key,
            format!("environment variable `{var}` is not set (or is not valid UTF-8)"),
        )),
        Some(value) if value.is_empty() => Err(invalid(
            key,
            format!("environment variable `{var}` is empty"),
        )),
        Some(value) => Ok(value),
    }
}

pub(in crate::config) fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

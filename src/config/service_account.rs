//! A Google service account's key file (`service_account_file`), read and checked at
//! start-up: who the account is, where its access tokens come from, and its RSA key, parsed
//! once. The key never leaves its [`SigningKey`], which signs and redacts itself in `Debug`;
//! a complaint about the file says what is wrong with it without quoting it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::{Map, Value};

/// A key file larger than this is not one (Google's are about 2.3 KB).
const MAX_KEY_FILE: usize = 64 * 1024;

/// A service account, from its key file.
#[derive(Debug, Clone)]
pub struct ServiceAccount {
    /// The key file, as the configuration names it.
    pub file: PathBuf,
    /// `client_email`: who the account is, the assertion's issuer.
    pub client_email: String,
    /// `private_key_id`: the assertion's `kid`, when the file has one.
    pub key_id: Option<String>,
    /// `token_uri`: the assertion's audience, wherever the request goes.
    pub token_uri: String,
    /// Where token requests go: `token_endpoint`, else `token_uri`.
    pub token_endpoint: String,
    /// `private_key`, parsed.
    pub key: SigningKey,
}

impl ServiceAccount {
    /// The account of the key file at `file`, whose token requests go to `token_endpoint`
    /// or, without one, to the file's `token_uri`. The error names the file; it never quotes
    /// what the file holds.
    pub(super) fn read(file: PathBuf, token_endpoint: Option<&str>) -> Result<Self, KeyFileError> {
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            Err(source) => return Err(KeyFileError::Read { file, source }),
        };
        if bytes.len() > MAX_KEY_FILE {
            return Err(KeyFileError::TooLarge { file });
        }
        let shown = file.clone();
        Self::parse(file, &bytes, token_endpoint)
            .map_err(|fault| KeyFileError::Invalid { file: shown, fault })
    }

    /// [`ServiceAccount::read`] of the file's bytes.
    fn parse(file: PathBuf, json: &[u8], token_endpoint: Option<&str>) -> Result<Self, KeyFault> {
        // Parsed as a value first: a typed parse's errors quote the values they did not
        // expect, and the key is one of them.
        let value: Value = serde_json::from_slice(json).map_err(|e| KeyFault::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
        let Some(fields) = value.as_object() else {
            return Err(KeyFault::NotAnObject);
        };
        match string(fields, "type")? {
            "service_account" => {}
            kind if kind.len() <= 32
                && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
            {
                return Err(KeyFault::Credential(kind.to_owned()));
            }
            _ => return Err(KeyFault::NotServiceAccount),
        }
        let token_uri = string(fields, "token_uri")?.to_owned();
        let key_id = match fields.get("private_key_id") {
            None => None,
            Some(_) => Some(string(fields, "private_key_id")?.to_owned()),
        };
        Ok(Self {
            file,
            client_email: string(fields, "client_email")?.to_owned(),
            key_id,
            token_endpoint: token_endpoint.map_or_else(|| token_uri.clone(), str::to_owned),
            token_uri,
            key: SigningKey::from_pem(string(fields, "private_key")?)?,
        })
    }
}

/// Why a service account's key file cannot be used. It names the file and what is wrong,
/// never what the file holds (the key is in it).
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// It cannot be read.
    #[error("`{}` cannot be read: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is too large to be one.
    #[error("`{}` is larger than {} KiB: not a service account key file", file.display(), MAX_KEY_FILE / 1024)]
    TooLarge {
        /// The file.
        file: PathBuf,
    },
    /// What it holds is not a service account's key.
    #[error("`{}` {fault}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        fault: KeyFault,
    },
}

/// What is wrong with what a key file holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFault {
    /// Not JSON, from where the decoder stopped.
    #[error("is not JSON (line {line}, column {column})")]
    NotJson {
        /// Its line.
        line: usize,
        /// Its column.
        column: usize,
    },
    /// JSON, but not an object.
    #[error("is not a JSON object: not a service account key file")]
    NotAnObject,
    /// Another kind of Google credential (`authorized_user`, say).
    #[error("holds a `{0}` credential, not a `service_account` key")]
    Credential(String),
    /// A `type` that names no kind of credential.
    #[error("has a `type` other than `service_account`")]
    NotServiceAccount,
    /// A field it needs is missing.
    #[error("has no `{0}`")]
    Missing(&'static str),
    /// A field it needs is not a non-empty string.
    #[error("has a `{0}` that is not a non-empty string")]
    NotText(&'static str),
    /// Its `private_key` is PKCS#1, which the signer does not take.
    #[error(
        "has a PKCS#1 `private_key` (`BEGIN RSA PRIVATE KEY`); convert it to PKCS#8 with \
         `openssl pkcs8 -topk8 -nocrypt`"
    )]
    Pkcs1,
    /// Its `private_key` is not a PEM `PRIVATE KEY` block.
    #[error("has a `private_key` that is not a PEM `PRIVATE KEY` (PKCS#8) block")]
    NotPem,
    /// Its `private_key`'s PEM body is not base64.
    #[error("has a `private_key` whose PEM body is not base64")]
    NotBase64,
    /// Its `private_key` is not an RSA key the signer takes: ring's reason.
    #[error("has a `private_key` that is not an RSA key of 2048 bits or more in PKCS#8 ({0})")]
    NotRsa(String),
}

/// The non-empty string `name` of `fields`.
fn string<'a>(fields: &'a Map<String, Value>, name: &'static str) -> Result<&'a str, KeyFault> {
    match fields.get(name) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text),
        Some(_) => Err(KeyFault::NotText(name)),
        None => Err(KeyFault::Missing(name)),
    }
}

/// A service account's RSA key: it signs, and nothing formats it.
#[derive(Clone)]
pub struct SigningKey(Arc<RsaKeyPair>);

impl SigningKey {
    /// The key of a PEM `PRIVATE KEY` (PKCS#8) block, as Google's key files hold it.
    fn from_pem(pem: &str) -> Result<Self, KeyFault> {
        const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
        const END: &str = "-----END PRIVATE KEY-----";
        let pem = pem.trim();
        if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
            return Err(KeyFault::Pkcs1);
        }
        let body = pem
            .strip_prefix(BEGIN)
            .and_then(|rest| rest.strip_suffix(END))
            .ok_or(KeyFault::NotPem)?;
        let base64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(base64)
            .map_err(|_| KeyFault::NotBase64)?;
        let pair = RsaKeyPair::from_pkcs8(&der).map_err(|e| KeyFault::NotRsa(e.to_string()))?;
        Ok(Self(Arc::new(pair)))
    }

    /// The RS256 signature (RSASSA-PKCS1-v1_5 with SHA-256) of `message`; `None` only if
    /// the system's random source failed (the blinding needs it).
    pub fn sign_rs256(&self, message: &[u8]) -> Option<Vec<u8>> {
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                message,
                &mut signature,
            )
            .ok()?;
        Some(signature)
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests;

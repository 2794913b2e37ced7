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
    /// or, without one, to the file's `token_uri`. The error is a reason to show after the
    /// key's name; it never quotes the file.
    pub(super) fn read(file: PathBuf, token_endpoint: Option<&str>) -> Result<Self, String> {
        let shown = file.display().to_string();
        let bytes = std::fs::read(&file).map_err(|e| format!("`{shown}` cannot be read: {e}"))?;
        if bytes.len() > MAX_KEY_FILE {
            return Err(format!(
                "`{shown}` is larger than {} KiB: not a service account key file",
                MAX_KEY_FILE / 1024
            ));
        }
        Self::parse(file, &bytes, token_endpoint).map_err(|reason| format!("`{shown}` {reason}"))
    }

    /// [`ServiceAccount::read`] of the file's bytes.
    fn parse(file: PathBuf, json: &[u8], token_endpoint: Option<&str>) -> Result<Self, String> {
        // Parsed as a value first: a typed parse's errors quote the values they did not
        // expect, and the key is one of them.
        let value: Value = serde_json::from_slice(json)
            .map_err(|e| format!("is not JSON (line {}, column {})", e.line(), e.column()))?;
        let Some(fields) = value.as_object() else {
            return Err("is not a JSON object: not a service account key file".to_owned());
        };
        match string(fields, "type")? {
            "service_account" => {}
            kind if kind.len() <= 32
                && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
            {
                return Err(format!(
                    "holds a `{kind}` credential, not a `service_account` key"
                ));
            }
            _ => return Err("has a `type` other than `service_account`".to_owned()),
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

/// The non-empty string `name` of `fields`.
fn string<'a>(fields: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match fields.get(name) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text),
        Some(_) => Err(format!("has a `{name}` that is not a non-empty string")),
        None => Err(format!("has no `{name}`")),
    }
}

/// A service account's RSA key: it signs, and nothing formats it.
#[derive(Clone)]
pub struct SigningKey(Arc<RsaKeyPair>);

impl SigningKey {
    /// The key of a PEM `PRIVATE KEY` (PKCS#8) block, as Google's key files hold it.
    fn from_pem(pem: &str) -> Result<Self, String> {
        const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
        const END: &str = "-----END PRIVATE KEY-----";
        let pem = pem.trim();
        if pem.starts_with("-----BEGIN RSA PRIVATE KEY-----") {
            return Err(
                "has a PKCS#1 `private_key` (`BEGIN RSA PRIVATE KEY`); convert it to \
                        PKCS#8 with `openssl pkcs8 -topk8 -nocrypt`"
                    .to_owned(),
            );
        }
        let body = pem
            .strip_prefix(BEGIN)
            .and_then(|rest| rest.strip_suffix(END))
            .ok_or("has a `private_key` that is not a PEM `PRIVATE KEY` (PKCS#8) block")?;
        let base64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(base64)
            .map_err(|_| "has a `private_key` whose PEM body is not base64")?;
        let pair = RsaKeyPair::from_pkcs8(&der).map_err(|e| {
            format!(
                "has a `private_key` that is not an RSA key of 2048 bits or more in PKCS#8 ({e})"
            )
        })?;
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

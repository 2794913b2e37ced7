//! The assertion of the OAuth 2.0 JWT bearer grant (RFC 7523) as Google's token endpoint
//! takes it: a JWT whose header names the key (`kid`) and whose claims say who asks (`iss`),
//! for what (`scope`), of whom (`aud`, the key file's `token_uri`) and for how long, signed
//! RS256 with the service account's key.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;

use crate::config::ServiceAccount;

/// What the tokens may do: Vertex AI is under Google Cloud's scope.
pub(super) const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an assertion is valid, in seconds: the most Google accepts.
pub(super) const LIFETIME: u64 = 3600;

/// A signed assertion. It proves the account's identity until it expires, so nothing
/// formats it; [`Assertion::expose`] is for the request body.
pub(super) struct Assertion(String);

impl Assertion {
    /// The JWT itself: for the request body, never for formatting.
    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Assertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Assertion(<redacted>)")
    }
}

/// The JOSE header.
#[derive(Serialize)]
struct Header<'a> {
    /// `RS256`.
    alg: &'static str,
    /// `JWT`.
    typ: &'static str,
    /// Which of the account's keys signed: its `private_key_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    kid: Option<&'a str>,
}

/// The claims Google requires.
#[derive(Serialize)]
struct Claims<'a> {
    /// Who asks: the account's `client_email`.
    iss: &'a str,
    /// What the token may do.
    scope: &'a str,
    /// Whom the assertion is for: the key file's `token_uri`.
    aud: &'a str,
    /// When it was issued, in seconds since the Unix epoch.
    iat: u64,
    /// When it expires: [`LIFETIME`] later.
    exp: u64,
}

/// `account`'s assertion issued at `now` (seconds since the Unix epoch): base64url (no
/// padding) of the header, of the claims, and of the RS256 signature of the two, joined by
/// dots. `None` only if the signature could not be made (the random source failed).
pub(super) fn assertion(account: &ServiceAccount, now: u64) -> Option<Assertion> {
    let header = Header {
        alg: "RS256",
        typ: "JWT",
        kid: account.key_id.as_deref(),
    };
    let claims = Claims {
        iss: &account.client_email,
        scope: SCOPE,
        aud: &account.token_uri,
        iat: now,
        exp: now.saturating_add(LIFETIME),
    };
    let mut jwt = String::with_capacity(1024);
    // Plain structs of strings and numbers: writing them as JSON cannot fail.
    URL_SAFE_NO_PAD.encode_string(serde_json::to_vec(&header).ok()?, &mut jwt);
    jwt.push('.');
    URL_SAFE_NO_PAD.encode_string(serde_json::to_vec(&claims).ok()?, &mut jwt);
    let signature = account.key.sign_rs256(jwt.as_bytes())?;
    jwt.push('.');
    URL_SAFE_NO_PAD.encode_string(signature, &mut jwt);
    Some(Assertion(jwt))
}

//! SigV4 request signing: the headers that prove a request came from the holder of a set of
//! AWS keys, over its method, path, headers and body
//! (<https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html>).
//!
//! The runtime's own rather than AWS's signer (`aws-sigv4`, against which the tests hold it
//! on arbitrary requests, and AWS's test suite): that one derived the day's signing key (four
//! HMACs) for every request and built the canonical request through a dozen allocations and
//! formatters, a twentieth of a streamed Bedrock call's CPU. Here the key is derived once a
//! day per set of keys, and the canonical request is written into one buffer. It signs what
//! the adapter sends: headers, a path encoded twice (as AWS signs every service's but S3's),
//! the body's hash, no query string.

use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{HeaderName, HeaderValue};
use ring::{digest, hmac};

use super::credentials::AwsKeys;

/// The signing algorithm's name, in the string to sign and the `Authorization` header.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Headers left unsigned, as AWS's signer leaves them: the signature's own, and those a proxy
/// may change.
const UNSIGNED: [&str; 4] = [
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];

/// What a request is signed over and for.
pub(super) struct Signing<'a> {
    pub keys: &'a AwsKeys,
    /// E.g. `us-east-1`.
    pub region: &'a str,
    /// The signing name: `bedrock`.
    pub service: &'a str,
    pub time: SystemTime,
}

/// The headers a request with `method`, `uri` (scheme, authority and path, as sent),
/// `headers` (those signed, `host` among them; an `x-amz-date` or `x-amz-security-token`
/// among them is left out, the signer's own taking its place) and `body` must carry:
/// `x-amz-date`, the session token when there is one, and `authorization`, those with a
/// secret marked sensitive. `Err` says why it cannot be signed, without any of its inputs.
pub(super) fn sign_request(
    signing: &Signing<'_>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(HeaderName, HeaderValue)>, &'static str> {
    let path = path_of(uri)?;
    let time = amz_date(signing.time)?;
    let day = &time[..8];
    let token = signing.keys.session_token();
    let signed = signed_headers(headers, &time, token);
    let names = names(&signed);
    let canonical = canonical_request(method, path, &signed, &names, body);

    let scope = format!("{day}/{}/{}/aws4_request", signing.region, signing.service);
    let mut to_sign = String::with_capacity(ALGORITHM.len() + scope.len() + 90);
    for part in [ALGORITHM, "\n", &time, "\n", &scope, "\n"] {
        to_sign.push_str(part);
    }
    hex(sha256(canonical.as_bytes()).as_ref(), &mut to_sign);
    let key = signing
        .keys
        .signing_key(&scope, || derive_key(signing, day));
    let mut authorization = format!(
        "{ALGORITHM} Credential={}/{scope}, SignedHeaders={names}, Signature=",
        signing.keys.access_key_id()
    );
    hex(
        hmac::sign(&key, to_sign.as_bytes()).as_ref(),
        &mut authorization,
    );

    let mut out = vec![(
        HeaderName::from_static("x-amz-date"),
        header_value(&time, false)?,
    )];
    if let Some(token) = token {
        let name = HeaderName::from_static("x-amz-security-token");
        out.push((name, header_value(token, true)?));
    }
    let authorization = header_value(&authorization, true)?;
    out.push((http::header::AUTHORIZATION, authorization));
    Ok(out)
}

fn sha256(bytes: &[u8]) -> digest::Digest {
    digest::digest(&digest::SHA256, bytes)
}

/// The headers signed, by name (lowercase), each value trimmed: `headers`, the time and the
/// session token.
fn signed_headers(
    headers: &[(&str, &str)],
    time: &str,
    token: Option<&str>,
) -> Vec<(String, String)> {
    let mut signed: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), trim_all(value)))
        // The time and the token are the signer's own.
        .filter(|(name, _)| {
            !UNSIGNED.contains(&name.as_str())
                && name != "x-amz-date"
                && name != "x-amz-security-token"
        })
        .collect();
    signed.push(("x-amz-date".to_owned(), time.to_owned()));
    if let Some(token) = token {
        signed.push(("x-amz-security-token".to_owned(), token.to_owned()));
    }
    // Stable: a name given twice keeps its values in order.
    signed.sort_by(|a, b| a.0.cmp(&b.0));
    signed
}

/// The names of `signed` (sorted), each once, joined by `;`.
fn names(signed: &[(String, String)]) -> String {
    let mut names = String::new();
    for (i, (name, _)) in signed.iter().enumerate() {
        if i > 0 && signed[i - 1].0 == *name {
            continue;
        }
        if !names.is_empty() {
            names.push(';');
        }
        names.push_str(name);
    }
    names
}

/// The canonical request: the method, the canonical path, no query, the signed headers
/// (`names`, `signed` sorted) and the body's hash.
fn canonical_request(
    method: &str,
    path: &str,
    signed: &[(String, String)],
    names: &str,
    body: &[u8],
) -> String {
    let mut canonical = String::with_capacity(256 + path.len() + 64 * signed.len());
    canonical.push_str(method);
    canonical.push('\n');
    canonical_path(path, &mut canonical);
    // No query string.
    canonical.push_str("\n\n");
    for (i, (name, value)) in signed.iter().enumerate() {
        // A name given twice: its values in order, joined by commas.
        if i > 0 && signed[i - 1].0 == *name {
            canonical.push(',');
        } else {
            if i > 0 {
                canonical.push('\n');
            }
            canonical.push_str(name);
            canonical.push(':');
        }
        canonical.push_str(value);
    }
    canonical.push_str("\n\n");
    canonical.push_str(names);
    canonical.push('\n');
    hex(sha256(body).as_ref(), &mut canonical);
    canonical
}

fn header_value(text: &str, sensitive: bool) -> Result<HeaderValue, &'static str> {
    let mut value =
        HeaderValue::from_str(text).map_err(|_| "a signed header is not a valid header value")?;
    value.set_sensitive(sensitive);
    Ok(value)
}

/// The day's signing key for `signing`'s keys, region and service.
fn derive_key(signing: &Signing<'_>, day: &str) -> hmac::Key {
    let secret = format!("AWS4{}", signing.keys.secret_access_key());
    let mut key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    for part in [day, signing.region, signing.service, "aws4_request"] {
        let tag = hmac::sign(&key, part.as_bytes());
        key = hmac::Key::new(hmac::HMAC_SHA256, tag.as_ref());
    }
    key
}

/// The path of `uri` (`scheme://authority/path`); a query or a fragment is refused, since this
/// signer does not sign one.
fn path_of(uri: &str) -> Result<&str, &'static str> {
    let (_, rest) = uri
        .split_once("://")
        .ok_or("the request's URI has no scheme")?;
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    if path.contains(['?', '#']) {
        return Err("the request's URI has a query or a fragment, which this signer does not sign");
    }
    Ok(path)
}

/// `time` as SigV4 writes it: `20150830T123600Z`. A clock that reads before 1970 or after
/// 9999 (a host whose clock was reset) cannot sign.
fn amz_date(time: SystemTime) -> Result<String, &'static str> {
    /// 10000-01-01T00:00:00Z.
    const YEAR_10000: u64 = 253_402_300_800;
    let since = time
        .duration_since(UNIX_EPOCH)
        .map_err(|_| "the system clock reads before 1970")?;
    if since.as_secs() >= YEAR_10000 {
        return Err("the system clock reads after 9999");
    }
    // `2015-08-30T12:36:00Z`, without its separators.
    Ok(humantime::format_rfc3339_seconds(time)
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect())
}

/// `path` with its dot segments and empty segments removed, each byte but the unreserved
/// ones and `/` percent-encoded (again: the path is sent encoded already), onto `out`.
fn canonical_path(path: &str, out: &mut String) {
    let plain = !path.is_empty()
        && path.starts_with('/')
        && !path.contains("//")
        && !path.split('/').any(|s| s == "." || s == "..");
    if plain {
        encode(path, out);
        return;
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut normal = String::from("/");
    normal.push_str(&segments.join("/"));
    let ends_in_slash = ["/", "/.", "/./", "/..", "/../"]
        .iter()
        .any(|end| path.ends_with(end));
    if ends_in_slash && !normal.ends_with('/') {
        normal.push('/');
    }
    encode(&normal, out);
}

/// Every byte of `path` but the unreserved ones and `/`, percent-encoded, onto `out`.
fn encode(path: &str, out: &mut String) {
    for &byte in path.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX_UPPER[usize::from(byte >> 4)]));
            out.push(char::from(HEX_UPPER[usize::from(byte & 15)]));
        }
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// `bytes` in lowercase hexadecimal, onto `out`.
fn hex(bytes: &[u8], out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
}

/// `value` with its leading and trailing spaces removed and each run of spaces within made
/// one, as SigV4 canonicalizes a header's value.
fn trim_all(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

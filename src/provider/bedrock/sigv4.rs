//! SigV4 request signing, by AWS's own signer (`aws-sigv4`): the headers that prove a request
//! came from the holder of a set of AWS keys, over its method, path, query, headers and body.

use std::time::SystemTime;

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use http::header::{HeaderName, HeaderValue};

use super::credentials::AwsKeys;

/// What a request is signed over and for.
pub(super) struct Signing<'a> {
    pub keys: &'a AwsKeys,
    /// E.g. `us-east-1`.
    pub region: &'a str,
    /// The signing name: `bedrock`.
    pub service: &'a str,
    pub time: SystemTime,
}

/// The headers a request with `method`, `uri` (scheme, authority, path and query, as sent),
/// `headers` (those signed) and `body` must carry: `x-amz-date`, the session token when there
/// is one, and `authorization`, each marked sensitive where it holds a secret. `Err` says why
/// the signer refused, without any of its inputs.
pub(super) fn sign_request(
    signing: &Signing<'_>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(HeaderName, HeaderValue)>, &'static str> {
    let identity = signing.keys.credentials().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(signing.region)
        .name(signing.service)
        .time(signing.time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|_| "the signing parameters are incomplete")?
        .into();
    let request = SignableRequest::new(
        method,
        uri,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|_| "the request cannot be signed (a header or the URI is not valid)")?;
    let (instructions, _) = sign(request, &params)
        .map_err(|_| "the signer refused the request")?
        .into_parts();
    let (signed, _) = instructions.into_parts();
    signed
        .into_iter()
        .map(|header| {
            let name = HeaderName::from_bytes(header.name().as_bytes())
                .map_err(|_| "a signed header's name is not a valid header name")?;
            let mut value = HeaderValue::from_str(header.value())
                .map_err(|_| "a signed header is not a valid header value")?;
            value.set_sensitive(header.sensitive() || name == http::header::AUTHORIZATION);
            Ok((name, value))
        })
        .collect()
}

//! SigV4 signatures checked as AWS checks them: the request a fake provider received, signed
//! again with AWS's own signer (`aws-sigv4`) and the keys it should have been signed with.

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

use super::upstream::Recorded;

/// Checks `recorded`'s SigV4 `Authorization` by signing what was received again with
/// `secret` (and the key id and token it names), at the time its `x-amz-date` says.
#[track_caller]
pub fn assert_signed(recorded: &Recorded, key_id: &str, secret: &str, token: Option<&str>) {
    let authorization = recorded.header("authorization").expect("signed");
    let signed_headers = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .expect("SignedHeaders");
    assert!(authorization.contains(&format!("Credential={key_id}/")));
    assert!(authorization.contains("/us-east-1/bedrock/aws4_request"));
    assert_eq!(recorded.header("x-amz-security-token"), token);
    let date = recorded.header("x-amz-date").expect("x-amz-date");
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &date[0..4],
        &date[4..6],
        &date[6..8],
        &date[9..11],
        &date[11..13],
        &date[13..15]
    );
    let time = humantime::parse_rfc3339(&rfc3339).unwrap();
    let headers: Vec<(&str, &str)> = signed_headers
        .split(';')
        .map(|name| {
            (
                name,
                recorded.header(name).expect("a signed header was sent"),
            )
        })
        .collect();
    let identity = aws_credential_types::Credentials::new(
        key_id,
        secret,
        token.map(str::to_owned),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let uri = format!(
        "http://{}{}",
        recorded.header("host").unwrap(),
        recorded.path
    );
    let signable = SignableRequest::new(
        &recorded.method,
        &uri,
        headers.into_iter(),
        SignableBody::Bytes(&recorded.body),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned());
    assert_eq!(Some(authorization.to_owned()), expected);
}

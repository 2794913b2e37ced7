//! The assertion's encoding and signature, the reading of token replies, and what a failed
//! refresh does (when one is due: `refresh/tests.rs`).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use serde_json::{Value, json};

use super::grant::{Granted, granted};
use super::*;
use crate::config::{AdapterConfig, Config, Credentials};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/fixtures/service_account"
);

/// The fixture's account (test data only: its README), its tokens asked of `token_endpoint`.
fn config(token_endpoint: &str) -> Config {
    let toml = format!(
        "[providers.p]\nadapter = \"vertex\"\nproject = \"proj\"\nlocation = \"us-east5\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\n\
         service_account_file = \"{FIXTURES}/key.json\"\ntoken_endpoint = \"{token_endpoint}\"\n\
         timeouts = {{ connect = \"200ms\", first_byte = \"1s\", idle = \"1s\" }}\n\
         [[providers.p.models]]\nname = \"m\"\n\
         [policies.default]\ntargets = [\"p/m\"]\n[abilities.chat]\npolicy = \"default\"\n"
    );
    Config::from_toml_with_env(&toml, &|_| None).unwrap()
}

fn account(config: &Config) -> (&ServiceAccount, &HttpEndpointConfig) {
    let AdapterConfig::Vertex(vertex) = &config.providers["p"].adapter else {
        panic!("a vertex provider");
    };
    let Credentials::ServiceAccount(account) = &vertex.auth else {
        panic!("a service account");
    };
    (account, &vertex.endpoint)
}

/// A part of a JWT, decoded, as JSON.
fn part(text: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(text).unwrap()).unwrap()
}

#[test]
fn the_assertion_is_a_jwt_signed_rs256_with_the_accounts_claims() {
    let config = config("http://127.0.0.1:9/token");
    let (account, _) = account(&config);
    let assertion = jwt::assertion(account, 1_700_000_000).unwrap();
    let text = assertion.expose();
    assert!(
        !text.contains(['=', '+', '/']),
        "base64url without padding: {text}"
    );
    let parts: Vec<&str> = text.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        part(parts[0]),
        json!({"alg": "RS256", "typ": "JWT", "kid": "0123456789abcdef0123456789abcdef01234567"})
    );
    assert_eq!(
        part(parts[1]),
        json!({
            "iss": "runtime-test@test-project.iam.gserviceaccount.com",
            "scope": "https://www.googleapis.com/auth/cloud-platform",
            "aud": "https://oauth2.googleapis.com/token",
            "iat": 1_700_000_000,
            "exp": 1_700_003_600,
        })
    );
    let public = std::fs::read(format!("{FIXTURES}/public.der")).unwrap();
    let signed = format!("{}.{}", parts[0], parts[1]);
    let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
        .verify(signed.as_bytes(), &signature)
        .expect("the signature verifies with the key's public half");
    let mut tampered = signed.into_bytes();
    tampered[5] ^= 1;
    assert!(
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
            .verify(&tampered, &signature)
            .is_err()
    );
    assert_eq!(format!("{assertion:?}"), "Assertion(<redacted>)");
}

#[test]
fn a_reply_grants_its_token_for_its_lifetime() {
    let reply = br#"{"access_token":"ya29.abc","expires_in":3599,"token_type":"Bearer"}"#;
    let Granted { bearer, lifetime } = granted(200, reply).unwrap();
    assert_eq!(lifetime, Duration::from_secs(3599));
    assert_eq!(bearer.token.expose(), "ya29.abc");
    assert_eq!(bearer.header.to_str().unwrap(), "Bearer ya29.abc");
    assert!(bearer.header.is_sensitive());
    assert_eq!(format!("{bearer:?}"), "Bearer(<redacted>)");
    let long = br#"{"access_token":"t","expires_in":99999999}"#;
    assert_eq!(
        granted(200, long).unwrap().lifetime,
        Duration::from_secs(86_400)
    );
}

#[test]
fn a_reply_without_a_usable_token_is_a_failure_that_quotes_nothing() {
    for (status, body, says, refused) in [
        (200, &b"not json"[..], "not JSON", false),
        (200, br#"{"expires_in":10}"#, "no `access_token`", false),
        (
            200,
            br#"{"access_token":"a b","expires_in":10}"#,
            "no `access_token`",
            false,
        ),
        (200, br#"{"access_token":"t"}"#, "`expires_in`", false),
        (
            200,
            br#"{"access_token":"t","expires_in":0}"#,
            "`expires_in`",
            false,
        ),
        (
            200,
            br#"{"access_token":"t","expires_in":9,"token_type":"mac"}"#,
            "`token_type`",
            false,
        ),
        (
            400,
            br#"{"error":"invalid_grant","error_description":"bad eyJhbGciOi"}"#,
            "HTTP 400 (invalid_grant)",
            true,
        ),
        // An endpoint that is unwell is not a refusal of the key.
        (500, &b"eyJhbGciOi"[..], "HTTP 500", false),
        (429, &b"eyJhbGciOi"[..], "HTTP 429", false),
    ] {
        let Err(failed) = granted(status, body) else {
            panic!("{status} {body:?} granted a token");
        };
        assert!(failed.cause.contains(says), "`{says}` not in {failed:?}");
        assert_eq!(failed.refused, refused, "{failed:?}");
        assert!(!failed.cause.contains("eyJ"), "{failed:?}");
    }
}

#[tokio::test]
async fn a_failed_refresh_keeps_a_valid_token_and_without_one_fails_retryable() {
    // Nothing listens on port 9: every token request fails to connect.
    let config = config("http://127.0.0.1:9/token");
    let (account, endpoint) = account(&config);
    let source =
        Arc::new(TokenSource::new("p", account, endpoint, &mut HttpClients::default()).unwrap());
    let upstream = Upstream::offline("p", "vertex", None);
    let deadline = Instant::now() + Duration::from_secs(5);
    // An endpoint that cannot be reached is not a bad key: retryable, nothing ejected for it.
    let error = source.bearer(&upstream, deadline).await.unwrap_err();
    assert_eq!(error.code, AttemptCode::Unavailable);
    assert_eq!(error.class, crate::execution::ErrorClass::Retryable);
    assert_eq!(
        error.message,
        "vertex provider `p`: the service account's token request failed"
    );
    // The failure is shared for five seconds: no second request.
    let again = source.bearer(&upstream, deadline).await.unwrap_err();
    assert_eq!(again.message, error.message);
    // A token whose refresh is due (two seconds: due after one) still serves at once, its
    // refresh failing beside the call.
    let source =
        Arc::new(TokenSource::new("p", account, endpoint, &mut HttpClients::default()).unwrap());
    let granted = granted(200, br#"{"access_token":"t","expires_in":2}"#).unwrap();
    let plant = |_| std::future::ready(Ok((granted.bearer, granted.lifetime)));
    source.tokens.get(deadline, plant, |_| {}).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(source.fresh().is_none(), "due");
    let bearer = source.bearer(&upstream, deadline).await.unwrap();
    assert_eq!(bearer.token.expose(), "t");
}

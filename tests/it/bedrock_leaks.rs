//! A Bedrock provider's AWS secrets go nowhere but the requests that need them: the secret
//! key, the session token, the container's keys and authorization token, and each request's
//! signature are in no log line, no event a caller sees and no `check-config` output, even
//! when Bedrock and the credentials endpoint echo them back and fetching keys fails. The real
//! binary, over real gRPC, against a local container credentials endpoint and a fake Bedrock.

use crate::common;

use std::time::{Duration, SystemTime};

use common::eventstream::{event, exception, reply};
use common::leaks::refresh_refused;
use common::upstream::{Upstream, status};

const CONTAINER_SECRET: &str = "container-secret-leak-check-0123456789";
const CONTAINER_TOKEN: &str = "container-session-token-leak-check-0123456789";
const AUTHORIZATION: &str = "pod-identity-authorization-leak-check";

fn config_toml(bedrock: &Upstream) -> String {
    format!(
        r#"
[providers.bedrock]
adapter = "bedrock"
region = "us-east-1"
aws_credentials = "container"
base_url = "{}"
[[providers.bedrock.models]]
name = "anthropic.claude-3-5-sonnet-20240620-v1:0"
capabilities = ["text"]

[policies.default]
targets = ["bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"]
max_attempts = 1

[abilities.chat]
policy = "default"
"#,
        bedrock.base_url()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn no_log_event_or_config_output_of_the_binary_holds_an_aws_secret() {
    // Keys that live three seconds (fetched again after one and a half); every later fetch
    // is refused with the authorization token echoed back.
    let keys = Upstream::start(|n| match n {
        0 => {
            let expiration =
                humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(3));
            status(
                200,
                &format!(
                    r#"{{"AccessKeyId":"ASIALEAKCHECK","SecretAccessKey":"{CONTAINER_SECRET}","Token":"{CONTAINER_TOKEN}","Expiration":"{expiration}"}}"#
                ),
                &[],
            )
        }
        _ => status(403, &format!(r#"{{"message":"bad token {AUTHORIZATION}"}}"#), &[]),
    })
    .await;
    // Bedrock first refuses the request quoting the secret and the session token, in an
    // exception; then answers.
    let echo = format!(r#"{{"message":"signature by {CONTAINER_SECRET} with {CONTAINER_TOKEN}"}}"#);
    let bedrock = Upstream::start(move |n| match n {
        0 => reply(&[
            event("messageStart", r#"{"role":"assistant"}"#),
            exception("validationException", &echo),
        ]),
        _ => reply(&[
            event("messageStart", r#"{"role":"assistant"}"#),
            event(
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#,
            ),
            event("messageStop", r#"{"stopReason":"end_turn"}"#),
            event(
                "metadata",
                r#"{"usage":{"inputTokens":1,"outputTokens":1}}"#,
            ),
        ]),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, AUTHORIZATION).unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config_toml(&bedrock)).unwrap();
    let path = file.to_str().unwrap();
    let uri = format!("{}/credentials", keys.base_url());
    let env = [
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri.as_str()),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.to_str().unwrap(),
        ),
    ];
    let run = refresh_refused(path, &env).await;
    assert_eq!(bedrock.requests().len(), 2);

    let mut secrets: Vec<String> = [CONTAINER_SECRET, CONTAINER_TOKEN, AUTHORIZATION]
        .map(str::to_owned)
        .to_vec();
    for sent in bedrock.requests() {
        let authorization = sent.header("authorization").unwrap();
        secrets.push(
            authorization
                .rsplit("Signature=")
                .next()
                .unwrap()
                .to_owned(),
        );
    }
    run.assert_none_holds(path, &env, &secrets);
    let log = &run.log;
    assert_eq!(
        log.matching("the current ones are still valid").len(),
        1,
        "{}",
        log.tail(30)
    );
    assert_eq!(
        log.matching("fetching AWS credentials from the container endpoint failed")
            .len(),
        1,
        "{}",
        log.tail(30)
    );
}

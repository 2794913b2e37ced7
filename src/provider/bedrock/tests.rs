use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use serde_json::Value;

use super::credentials::{AwsKeys, KeySource};
use super::fast::text_delta;
use super::sigv4::{Signing, sign_request};
use super::stream::Payload;
use crate::config::Secret;
use crate::provider::scan::arbitrary;

/// One vector of AWS's suite: what to sign, and the headers AWS's own signed request has.
struct Vector {
    context: Value,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    expected: Vec<(String, String)>,
}

fn vector(dir: &Path) -> Vector {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let context = serde_json::from_str(&read("context.json")).unwrap();
    let request = read("request.txt");
    let (head, body) = request.split_once("\n\n").unwrap_or((&request, ""));
    let mut lines = head.lines();
    let mut first = lines.next().unwrap().split(' ');
    let (method, path) = (first.next().unwrap(), first.next().unwrap());
    let pairs = |lines: std::str::Lines<'_>| -> Vec<(String, String)> {
        lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect()
    };
    let headers = pairs(lines);
    let signed = read("header-signed-request.txt");
    let expected = pairs(signed.lines())
        .into_iter()
        .filter(|(n, _)| !headers.iter().any(|(h, _)| h == n))
        .collect();
    Vector {
        context,
        method: method.to_owned(),
        path: path.to_owned(),
        headers,
        body: body.as_bytes().to_vec(),
        expected,
    }
}

#[test]
fn the_signer_matches_awss_signing_test_suite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/provider/bedrock/vectors");
    let mut checked = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let v = vector(&dir);
        let c = &v.context;
        let text = |key: &str| c["credentials"][key].as_str().map(Secret::new);
        let keys = KeySource::fixed(
            &text("access_key_id").unwrap(),
            &text("secret_access_key").unwrap(),
            text("token").as_ref(),
        )
        .at_hand()
        .unwrap();
        let time: SystemTime = humantime::parse_rfc3339(c["timestamp"].as_str().unwrap()).unwrap();
        let signing = Signing {
            keys: &keys,
            region: c["region"].as_str().unwrap(),
            service: c["service"].as_str().unwrap(),
            time,
        };
        let host = &v.headers.iter().find(|(n, _)| n == "Host").unwrap().1;
        let uri = format!("https://{host}{}", v.path);
        let headers: Vec<(&str, &str)> = v
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let signed = sign_request(&signing, &v.method, &uri, &headers, &v.body).unwrap();
        let got: Vec<(String, String)> = signed
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        for (name, value) in &v.expected {
            let ours = got.iter().find(|(n, _)| n.eq_ignore_ascii_case(name));
            assert_eq!(
                ours.map(|(_, v)| v),
                Some(value),
                "{}: {name}",
                dir.display()
            );
        }
        assert!(
            signed
                .iter()
                .any(|(n, v)| n == "authorization" && v.is_sensitive()),
            "the signature is marked sensitive"
        );
        checked += 1;
    }
    assert_eq!(checked, 5);
}

#[test]
fn keys_and_sources_never_show_in_debug() {
    let source = KeySource::fixed(
        &Secret::new("AKIDEXAMPLE"),
        &Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        Some(&Secret::new("SESSIONTOKENEXAMPLE")),
    );
    let shown = format!("{source:?} {:?}", source.at_hand().unwrap());
    for secret in ["AKIDEXAMPLE", "wJalrXUtnFEMI", "SESSIONTOKENEXAMPLE"] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

/// AWS's example keys, with `token` for the session token if there is one.
fn example_keys(token: Option<String>) -> Arc<AwsKeys> {
    KeySource::fixed(
        &Secret::new("AKIDEXAMPLE"),
        &Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        token.map(Secret::new).as_ref(),
    )
    .at_hand()
    .unwrap()
}

/// Bedrock's signing in `region` with `keys`, `seconds` after 1970 (before it if negative).
fn bedrock<'a>(keys: &'a AwsKeys, region: &'a str, seconds: i64) -> Signing<'a> {
    let since = Duration::from_secs(seconds.unsigned_abs());
    let time = if seconds < 0 {
        SystemTime::UNIX_EPOCH - since
    } else {
        SystemTime::UNIX_EPOCH + since
    };
    Signing {
        keys,
        region,
        service: "bedrock",
        time,
    }
}

/// AWS's own signer's headers for the same request: what `sign_request` is held to.
fn awss(
    signing: &Signing<'_>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<(String, String)> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    use aws_sigv4::sign::v4;

    let keys = signing.keys;
    let identity = aws_credential_types::Credentials::new(
        keys.access_key_id(),
        keys.secret_access_key(),
        keys.session_token().map(str::to_owned),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(signing.region)
        .name(signing.service)
        .time(signing.time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let request = SignableRequest::new(
        method,
        uri,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    let (signed, _) = instructions.into_parts();
    let mut signed: Vec<(String, String)> = signed
        .into_iter()
        .map(|h| (h.name().to_owned(), h.value().to_owned()))
        .collect();
    signed.sort();
    signed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_signer_signs_as_awss_own_does(
        model in "[a-zA-Z0-9.:/_~ %é-]{1,24}",
        base in prop_oneof![Just(""), Just("/proxy"), Just("/a/./b/../c"), Just("//x")],
        port in prop_oneof![Just(""), Just(":8443")],
        token in proptest::option::of("[A-Za-z0-9+/=]{1,40}"),
        region in prop_oneof![Just("us-east-1"), Just("eu-west-3")],
        seconds in 0i64..4_000_000_000,
        body in proptest::collection::vec(any::<u8>(), 0..300),
        extra in proptest::option::of(("[A-Z][a-z-]{0,8}", "[ a-z]{0,10}")),
    ) {
        let keys = example_keys(token);
        // The adapter's path: the model id percent-encoded into it.
        let id = percent_encoding::utf8_percent_encode(&model, super::PATH_KEEPS);
        let host = format!("bedrock-runtime.{region}.amazonaws.com{port}");
        let uri = format!("https://{host}{base}/model/{id}/converse-stream");
        let mut headers = vec![("host", host.as_str())];
        if let Some((name, value)) = &extra {
            headers.push((name.as_str(), value.as_str()));
        }
        // Twice: the second with the signing key kept from the first.
        for _ in 0..2 {
            let signing = bedrock(&keys, region, seconds);
            let ours = sign_request(&signing, "POST", &uri, &headers, &body).unwrap();
            let mut ours: Vec<(String, String)> = ours
                .iter()
                .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
                .collect();
            ours.sort();
            prop_assert_eq!(ours, awss(&signing, "POST", &uri, &headers, &body));
        }
    }
}

#[test]
fn a_new_day_has_a_new_signing_key() {
    let keys = example_keys(None);
    let uri = "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream";
    let headers = [("host", "bedrock-runtime.us-east-1.amazonaws.com")];
    for seconds in [86_399, 86_400, 86_399, 3 * 86_400 - 1] {
        let signing = bedrock(&keys, "us-east-1", seconds);
        let ours = sign_request(&signing, "POST", uri, &headers, b"{}").unwrap();
        let authorization = ours.iter().find(|(n, _)| n == "authorization").unwrap();
        let awss = awss(&signing, "POST", uri, &headers, b"{}");
        let want = awss.iter().find(|(n, _)| n == "authorization").unwrap();
        assert_eq!(authorization.1.to_str().unwrap(), want.1, "{seconds}");
    }
}

#[test]
fn a_clock_outside_1970_to_9999_fails_the_signing_without_a_panic() {
    let keys = example_keys(None);
    let uri = "https://example.amazonaws.com/model/m/converse-stream";
    let host = [("host", "example.amazonaws.com")];
    // A day before 1970, and about 8 200 years after it.
    for seconds in [-86_400, 3_000_000 * 86_400] {
        let refused = sign_request(
            &bedrock(&keys, "us-east-1", seconds),
            "POST",
            uri,
            &host,
            b"",
        );
        assert!(refused.is_err(), "{seconds}");
    }
}

#[test]
fn a_uri_with_a_query_is_not_signed() {
    let keys = example_keys(None);
    let uri = "https://example.amazonaws.com/model/m/converse-stream?x=1";
    let host = [("host", "example.amazonaws.com")];
    let refused = sign_request(&bedrock(&keys, "us-east-1", 0), "POST", uri, &host, b"");
    assert!(refused.is_err());
}

// The hand reader of text deltas (`fast.rs`), against serde.
/// The hand reader's answer, checked against serde's when it has one.
fn agrees(payload: &str) -> Option<(u32, String)> {
    let fast = text_delta(payload.as_bytes()).map(|(i, t)| (i, t.to_string()));
    if let Some((index, text)) = &fast {
        let typed: Payload = serde_json::from_str(payload).expect(payload);
        assert_eq!(
            typed.text_delta(),
            Some((*index, text.as_str())),
            "{payload}"
        );
    }
    fast
}

#[test]
fn bedrocks_text_deltas_are_read_by_hand() {
    let cases = [
        (
            r#"{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghijklmnopqrstu"}"#,
            Some((0, "Hello")),
        ),
        (
            r#"{"delta":{"text":" a\nb"},"contentBlockIndex":3}"#,
            Some((3, " a\nb")),
        ),
        (
            r#" { "p" : "x" , "contentBlockIndex" : 1 , "delta" : { "text" : "" } } "#,
            Some((1, "")),
        ),
        // serde's to read, or to refuse:
        (r#"{"contentBlockIndex":0,"delta":{"text":"\u00e9"}}"#, None),
        (
            r#"{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{}"}}}"#,
            None,
        ),
        (
            r#"{"contentBlockIndex":0,"delta":{"text":"a","text":"b"}}"#,
            None,
        ),
        (
            r#"{"contentBlockIndex":0,"contentBlockIndex":1,"delta":{"text":"a"}}"#,
            None,
        ),
        (
            r#"{"contentBlockIndex":4294967296,"delta":{"text":"a"}}"#,
            None,
        ),
        (r#"{"contentBlockIndex":0,"delta":{"text":null}}"#, None),
        (r#"{"contentBlockIndex":0,"delta":{}}"#, None),
        (r#"{"delta":{"text":"a"}}"#, None),
        (
            r#"{"contentBlockIndex":0,"delta":{"text":"a"},"p":1}"#,
            None,
        ),
        (r#"{"contentBlockIndex":0,"delta":{"text":"a"}} x"#, None),
    ];
    for (payload, want) in cases {
        let got = agrees(payload);
        assert_eq!(
            got.as_ref().map(|(i, t)| (*i, t.as_str())),
            want,
            "{payload}"
        );
    }
}

/// A payload: mostly a text delta, and its near misses.
fn payload() -> impl Strategy<Value = String> {
    let delta = arbitrary::shaped(
        vec![
            arbitrary::text()
                .prop_map(|t| format!("\"text\":{t}"))
                .boxed(),
        ],
        prop_oneof![
            Just(r#""toolUse":{"input":"{}"}"#.to_owned()),
            Just(r#""reasoningContent":{"text":"r"}"#.to_owned()),
        ],
    );
    arbitrary::shaped(
        vec![
            arbitrary::number()
                .prop_map(|n| format!("\"contentBlockIndex\":{n}"))
                .boxed(),
            delta.prop_map(|d| format!("\"delta\":{d}")).boxed(),
            arbitrary::text().prop_map(|t| format!("\"p\":{t}")).boxed(),
        ],
        prop_oneof![
            Just(r#""start":{}"#.to_owned()),
            Just(r#""delta":null"#.to_owned()),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn what_the_hand_reader_reads_serde_reads_the_same(payload in payload()) {
        agrees(&payload);
    }
}

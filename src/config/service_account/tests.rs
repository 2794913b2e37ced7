//! Reading a service account's key file: what it must hold, and complaints that never quote
//! it.

use super::*;

/// The tests' key file (test data only: `tests/it/fixtures/service_account/README.md`).
const KEY_FILE: &str = include_str!("../../../tests/it/fixtures/service_account/key.json");

/// A P-256 key in PKCS#8: a valid key, not an RSA one (test data, made for this test).
const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghIKAV8/KFAnRHUJK\n\
IIb9FEl/fsHhpocELUf616EUSF+hRANCAAQx/eylik9Yv8HCcl23xDJkHIgFlkH3\n\
tu/L/JkxuIBohHl2lOUnHQbOYDOjqS7KTibWf+0ZONm+VqL/T2Of9H+X\n\
-----END PRIVATE KEY-----\n";

fn fixture() -> Map<String, Value> {
    match serde_json::from_str(KEY_FILE).unwrap() {
        Value::Object(fields) => fields,
        other => panic!("{other}"),
    }
}

/// The base64 of the fixture's key, as a leak would show it (one PEM line of it).
fn key_text() -> String {
    fixture()["private_key"]
        .as_str()
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned()
}

fn parse(fields: &Map<String, Value>) -> Result<ServiceAccount, String> {
    let json = serde_json::to_vec(fields).unwrap();
    ServiceAccount::parse("key.json".into(), &json, None).map_err(|e| e.to_string())
}

/// The complaint about the fixture with `edit` made to it.
fn complaint(edit: impl FnOnce(&mut Map<String, Value>)) -> String {
    let mut fields = fixture();
    edit(&mut fields);
    let reason = parse(&fields).unwrap_err();
    assert!(!reason.contains(&key_text()), "{reason}");
    reason
}

#[test]
fn a_key_file_gives_the_account_its_key_and_where_tokens_come_from() {
    let account = parse(&fixture()).unwrap();
    assert_eq!(
        account.client_email,
        "runtime-test@test-project.iam.gserviceaccount.com"
    );
    assert_eq!(
        account.key_id.as_deref(),
        Some("0123456789abcdef0123456789abcdef01234567")
    );
    assert_eq!(account.token_uri, "https://oauth2.googleapis.com/token");
    assert_eq!(account.token_endpoint, account.token_uri);
    let signature = account.key.sign_rs256(b"message").unwrap();
    assert_eq!(signature.len(), 256, "a 2048-bit key's signature");

    let elsewhere = ServiceAccount::parse(
        "key.json".into(),
        KEY_FILE.as_bytes(),
        Some("http://127.0.0.1:1/token"),
    )
    .unwrap();
    assert_eq!(elsewhere.token_endpoint, "http://127.0.0.1:1/token");
    assert_eq!(
        elsewhere.token_uri, "https://oauth2.googleapis.com/token",
        "the audience stays the key file's"
    );
    let shown = format!("{elsewhere:?}");
    assert!(!shown.contains(&key_text()), "{shown}");
    assert!(shown.contains("SigningKey(<redacted>)"), "{shown}");
}

#[test]
fn what_is_wrong_with_a_key_file_is_said_without_quoting_it() {
    let cut = &KEY_FILE[..KEY_FILE.len() / 2];
    let reason = ServiceAccount::parse("key.json".into(), cut.as_bytes(), None)
        .unwrap_err()
        .to_string();
    assert!(reason.starts_with("is not JSON (line"), "{reason}");
    assert!(!reason.contains(&key_text()), "{reason}");
    let string = serde_json::to_vec(&fixture()["private_key"]).unwrap();
    let reason = ServiceAccount::parse("key.json".into(), &string, None)
        .unwrap_err()
        .to_string();
    assert!(reason.contains("not a JSON object"), "{reason}");
    assert!(!reason.contains(&key_text()), "{reason}");

    for (edit, says) in [
        (
            (|f: &mut Map<String, Value>| {
                f.insert("type".into(), "authorized_user".into());
            }) as fn(&mut Map<String, Value>),
            "holds a `authorized_user` credential, not a `service_account` key",
        ),
        (
            |f| {
                f.remove("client_email");
            },
            "has no `client_email`",
        ),
        (
            |f| {
                f.insert("token_uri".into(), 7.into());
            },
            "has a `token_uri` that is not a non-empty string",
        ),
        (
            |f| {
                let pem = f["private_key"]
                    .as_str()
                    .unwrap()
                    .replace("PRIVATE", "RSA PRIVATE");
                f.insert("private_key".into(), pem.into());
            },
            "PKCS#1",
        ),
        (
            |f| {
                let pem = f["private_key"].as_str().unwrap().replace('M', "!");
                f.insert("private_key".into(), pem.into());
            },
            "not base64",
        ),
        (
            |f| {
                let pem = f["private_key"].as_str().unwrap().replace("BEGIN", "START");
                f.insert("private_key".into(), pem.into());
            },
            "not a PEM `PRIVATE KEY` (PKCS#8) block",
        ),
        (
            |f| {
                f.insert("private_key".into(), EC_KEY.into());
            },
            "not an RSA key of 2048 bits or more in PKCS#8",
        ),
    ] {
        let reason = complaint(edit);
        assert!(reason.contains(says), "`{says}` not in: {reason}");
    }
}

#[test]
fn a_file_that_cannot_be_read_is_named() {
    let reason = ServiceAccount::read("/nonexistent/key.json".into(), None)
        .unwrap_err()
        .to_string();
    assert!(
        reason.starts_with("`/nonexistent/key.json` cannot be read"),
        "{reason}"
    );
}

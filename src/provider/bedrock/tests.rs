use std::path::Path;
use std::time::SystemTime;

use serde_json::Value;

use super::credentials::KeySource;
use super::sigv4::{Signing, sign_request};
use crate::config::Secret;

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
    assert_eq!(checked, 7);
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

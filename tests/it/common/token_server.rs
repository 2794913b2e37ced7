//! A local OAuth token endpoint on 127.0.0.1:0 for the service-account tests. It checks each
//! request as Google's would (a form with the JWT bearer grant type, an assertion whose RS256
//! signature verifies against the fixture key's public half, and the claims Google requires),
//! refuses one that fails with `400 invalid_grant`, and otherwise answers as its script says.
//! Requests are read by the runtime's own HTTP/1.1 reader ([`serve_raw`]), like the fake
//! providers'.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::upstream::{Raw, Recorded, serve_raw};

/// The fixtures' directory: the key file and its public half (test data only).
pub const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/fixtures/service_account"
);

/// The fixture key file's path.
pub fn key_file() -> String {
    format!("{FIXTURES}/key.json")
}

/// The fixture account's `client_email`.
pub const CLIENT_EMAIL: &str = "runtime-test@test-project.iam.gserviceaccount.com";
/// The fixture's `private_key_id`.
pub const KEY_ID: &str = "0123456789abcdef0123456789abcdef01234567";
/// The fixture's `token_uri`: every assertion's audience.
pub const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// What the server answers a valid request (number n, 0-based).
#[derive(Debug, Clone)]
pub enum Answer {
    /// `{"access_token": token, "expires_in": .., "token_type": "Bearer"}`, after `delay`.
    Token {
        /// The `access_token`.
        token: String,
        /// Its `expires_in`, in seconds.
        expires_in: u64,
        /// How long the server takes to answer.
        delay: Duration,
    },
    /// This status, with `{"error": "...", "error_description": <the assertion>}`: an
    /// endpoint that echoes what it was sent, which nothing may pass on.
    Refuse(u16),
    /// Never answer.
    Hang,
}

impl Answer {
    /// Token `token` valid for `expires_in` seconds, at once.
    pub fn token(token: &str, expires_in: u64) -> Self {
        Self::Token {
            token: token.to_owned(),
            expires_in,
            delay: Duration::ZERO,
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The assertion, as sent.
    pub assertion: String,
    /// Whether it passed every check, and if not, which failed.
    pub verdict: Result<(), String>,
}

type Script = dyn Fn(usize) -> Answer + Send + Sync;

/// A running token endpoint.
pub struct TokenServer {
    port: u16,
    grants: Arc<Mutex<Vec<Grant>>>,
}

impl TokenServer {
    /// Answers the valid request number n with `script(n)`.
    pub async fn start(script: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let grants = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let (kept, count) = (grants.clone(), Arc::new(AtomicUsize::new(0)));
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (kept, script, count) = (kept.clone(), script.clone(), count.clone());
                tokio::spawn(serve_raw(socket, move |request, raw| {
                    let (kept, script, count) = (kept.clone(), script.clone(), count.clone());
                    async move {
                        let grant = check(&request);
                        let answer = match &grant.verdict {
                            Ok(()) => script(count.fetch_add(1, Ordering::SeqCst)),
                            Err(_) => Answer::Refuse(400),
                        };
                        let assertion = grant.assertion.clone();
                        kept.lock().unwrap().push(grant);
                        reply(&raw, answer, &assertion).await
                    }
                }));
            }
        });
        Self { port, grants }
    }

    /// Where to send token requests.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/token", self.port)
    }

    /// Every request so far.
    pub fn grants(&self) -> Vec<Grant> {
        self.grants.lock().unwrap().clone()
    }

    /// Asserts that every request so far passed the checks, and that there were `n`.
    #[track_caller]
    pub fn assert_valid_grants(&self, n: usize) {
        let grants = self.grants();
        assert_eq!(grants.len(), n, "{grants:?}");
        for grant in grants {
            assert_eq!(grant.verdict, Ok(()), "{}", grant.assertion);
        }
    }
}

/// Writes `answer` on `raw`; false when the connection must not be reused.
async fn reply(raw: &Raw, answer: Answer, assertion: &str) -> bool {
    let (status, body) = match answer {
        Answer::Hang => std::future::pending().await,
        Answer::Token {
            token,
            expires_in,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            let body =
                json!({"access_token": token, "expires_in": expires_in, "token_type": "Bearer"});
            (200, body)
        }
        Answer::Refuse(status) => {
            let body = json!({"error": "invalid_grant", "error_description": format!("refused {assertion}")});
            (status, body)
        }
    };
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut socket = raw.lock().await;
    socket.write_all(head.as_bytes()).await.is_ok()
        && socket.write_all(body.as_bytes()).await.is_ok()
}

/// The request's assertion and whether it is what Google's endpoint would take.
fn check(request: &Recorded) -> Grant {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(&request.body)
        .into_owned()
        .collect();
    let field = |name: &str| {
        form.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let assertion = field("assertion").unwrap_or_default();
    let verdict = (|| {
        if request.method != "POST" || request.path != "/token" {
            return Err(format!("{} {}", request.method, request.path));
        }
        if request.header("content-type") != Some("application/x-www-form-urlencoded") {
            return Err("not a form".to_owned());
        }
        if field("grant_type").as_deref() != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
            return Err("not the JWT bearer grant".to_owned());
        }
        verify(&assertion)
    })();
    Grant { assertion, verdict }
}

/// Checks the JWT's signature, header and claims.
fn verify(jwt: &str) -> Result<(), String> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err("not three parts".to_owned());
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|e| e.to_string());
    let public = std::fs::read(format!("{FIXTURES}/public.der")).unwrap();
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
        .verify(format!("{header}.{claims}").as_bytes(), &decode(signature)?)
        .map_err(|_| "the signature does not verify".to_owned())?;
    let json = |part: &str| -> Result<Value, String> {
        serde_json::from_slice(&decode(part)?).map_err(|e| e.to_string())
    };
    let header = json(header)?;
    if header != json!({"alg": "RS256", "typ": "JWT", "kid": KEY_ID}) {
        return Err(format!("header {header}"));
    }
    let claims = json(claims)?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let iat = claims["iat"].as_u64().unwrap_or(0);
    let ok = claims["iss"] == CLIENT_EMAIL
        && claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"
        && claims["aud"] == TOKEN_URI
        && now.abs_diff(iat) < 60
        && claims["exp"].as_u64() == Some(iat + 3600);
    if !ok {
        return Err(format!("claims {claims}"));
    }
    Ok(())
}

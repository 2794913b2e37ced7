//! The credentials of the providers that take more than a key (Azure OpenAI, Vertex AI), as
//! request headers: an `api-key`, a bearer token, or a bearer token kept in a file that
//! something else rotates (Kubernetes workload identity, a sidecar), read again whenever the
//! file changes, never logged.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use super::http::{Upstream, bearer_header, secret_header};
use super::{ProviderError, ProviderInitError};
use crate::config::{Credentials, Secret};
use crate::execution::AttemptCode;

/// What `Credentials` put on a provider's requests.
#[derive(Debug)]
pub(super) struct Auth {
    /// Headers every request carries.
    pub headers: HeaderMap,
    /// The key or token, to blank out wherever upstream text is quoted.
    pub secret: Option<Secret>,
    /// A token to read per call.
    pub file: Option<TokenFile>,
}

impl Auth {
    /// The headers and the token file `credentials` give provider `name`'s requests.
    pub(super) fn new(name: &str, credentials: &Credentials) -> Result<Self, ProviderInitError> {
        let mut headers = HeaderMap::new();
        let (secret, file) = match credentials {
            Credentials::ApiKey(key) => {
                headers.insert("api-key", secret_header(name, key.expose())?);
                (Some(key.clone()), None)
            }
            Credentials::Token(token) => {
                headers.insert(AUTHORIZATION, bearer_header(name, token)?);
                (Some(token.clone()), None)
            }
            Credentials::TokenFile(path) => (None, Some(TokenFile::new(path.clone()))),
            // Minted per call (`service_account.rs`): nothing is fixed at start-up.
            Credentials::ServiceAccount(_) => (None, None),
        };
        Ok(Self {
            headers,
            secret,
            file,
        })
    }
}

/// A bearer token kept in a file that something else rotates: read again whenever the file
/// changes, never logged.
#[derive(Debug)]
pub(super) struct TokenFile {
    path: PathBuf,
    /// The file's modification time and length when last read, and the header it gave.
    read: Mutex<Option<(SystemTime, u64, HeaderValue)>>,
}

impl TokenFile {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            read: Mutex::new(None),
        }
    }

    /// `Authorization: Bearer <the file's token>`, read again if the file changed. A file
    /// that cannot be read fails the attempt before anything is sent: the credentials are
    /// this target's problem, and another target may serve the request.
    pub(super) fn bearer(&self, upstream: &Upstream) -> Result<HeaderValue, ProviderError> {
        let unreadable = |why: &str| {
            ProviderError::rejected(
                AttemptCode::Unauthorized,
                format!("{}: the token file {why}", upstream.label()),
            )
        };
        let meta = std::fs::metadata(&self.path).map_err(|_| unreadable("cannot be read"))?;
        let stamp = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((modified, len, header)) = &*read
            && (*modified, *len) == stamp
        {
            return Ok(header.clone());
        }
        let token =
            std::fs::read_to_string(&self.path).map_err(|_| unreadable("cannot be read"))?;
        let token = token.trim();
        if token.is_empty() {
            return Err(unreadable("is empty"));
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| unreadable("holds characters a header cannot"))?;
        header.set_sensitive(true);
        *read = Some((stamp.0, stamp.1, header.clone()));
        Ok(header)
    }
}

/// `upstream` as one call takes it: carrying `file`'s token now, when there is a file.
pub(super) fn authorized(
    file: Option<&TokenFile>,
    upstream: &Upstream,
) -> Result<Upstream, ProviderError> {
    let mut upstream = upstream.clone();
    if let Some(file) = file {
        let bearer = file.bearer(&upstream)?;
        upstream.headers.insert(AUTHORIZATION, bearer);
    }
    Ok(upstream)
}

//! A bearer token kept in a file that something else rotates (Kubernetes workload identity,
//! a sidecar): read again whenever the file changes, never logged. Azure OpenAI's and Vertex
//! AI's `token_file`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use http::header::{AUTHORIZATION, HeaderValue};

use super::ProviderError;
use super::http::Upstream;
use crate::execution::AttemptCode;

/// A bearer token kept in a file that something else rotates: read again whenever the file
/// changes, never logged.
#[derive(Debug)]
pub(super) struct TokenFile {
    path: PathBuf,
    /// The file's modification time and length when last read, and the header it gave.
    read: Mutex<Option<(SystemTime, u64, HeaderValue)>>,
}

impl TokenFile {
    pub(super) fn new(path: PathBuf) -> Self {
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

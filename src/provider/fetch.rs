//! One small request whose whole reply is wanted (a token or credentials endpoint's), within a
//! deadline and a size bound: not a model call, so none of the exchange's streaming.

use std::future::poll_fn;
use std::time::Duration;

use h1::Progress;
use tokio::time::Instant;

/// Why no whole reply came. [`FetchError::what`] is fit for a caller; [`FetchError::cause`]
/// adds the network's account of it, for the log only (it may name addresses).
#[derive(Debug)]
pub(super) enum FetchError {
    /// Nothing (or not all of it) came by the deadline, `limit` after the request.
    Timeout(Duration),
    /// The request or the reply failed on the network.
    Failed { broke: bool, cause: String },
    /// The reply's body passed the bound.
    TooLarge(usize),
}

impl FetchError {
    /// What happened, in words a caller may read.
    pub(super) fn what(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "did not answer in time",
            Self::Failed { broke: false, .. } => "could not be reached",
            Self::Failed { broke: true, .. } => "broke off its reply",
            Self::TooLarge(_) => "sent a reply larger than the limit",
        }
    }

    /// What happened, with the detail the log keeps.
    pub(super) fn cause(&self) -> String {
        match self {
            Self::Timeout(limit) => {
                let limit = Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(0));
                format!("no reply came within {}", humantime::format_duration(limit))
            }
            Self::Failed {
                broke: false,
                cause,
            } => format!("the request failed: {cause}"),
            Self::Failed { broke: true, cause } => format!("the reply broke: {cause}"),
            Self::TooLarge(limit) => format!("the reply is larger than {} KiB", limit / 1024),
        }
    }
}

/// Sends `request` (from `h1::Client::get` or `post`) on `client` and reads the reply's
/// status and body, at most `limit` bytes of it, all by `by`.
pub(super) async fn fetch(
    client: &h1::Client,
    request: Vec<u8>,
    by: Instant,
    limit: usize,
) -> Result<(u16, Vec<u8>), FetchError> {
    let mut call = client.call(request);
    let within = by.saturating_duration_since(Instant::now());
    tokio::time::timeout_at(by, read(&mut call, limit))
        .await
        .map_err(|_| FetchError::Timeout(within))?
}

async fn read(call: &mut h1::Call, limit: usize) -> Result<(u16, Vec<u8>), FetchError> {
    let failed = |broke, failure: h1::Failure| FetchError::Failed {
        broke,
        cause: failure.cause().to_owned(),
    };
    let head = poll_fn(|cx| call.poll_head(cx))
        .await
        .map_err(|f| failed(false, f))?;
    let mut body = Vec::new();
    let mut over = false;
    loop {
        let mut take = |data: &[u8]| {
            if body.len() + data.len() > limit {
                over = true;
            } else {
                body.extend_from_slice(data);
            }
        };
        let progress = poll_fn(|cx| call.poll_body(cx, &mut take))
            .await
            .map_err(|f| failed(true, f))?;
        if over {
            call.close();
            return Err(FetchError::TooLarge(limit));
        }
        if progress == Progress::End {
            return Ok((head.status, body));
        }
    }
}

//! A provider's idle connections. The most recently used goes out first (it is the likeliest
//! to be alive); one idle past the timeout, or one the server has closed or written to since,
//! is dropped instead of used. The timeout must end before the server's own: a request sent on
//! a connection the server is just closing fails after it was sent (outcome unknown).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::Conn;

pub(super) struct Idle {
    /// Oldest first; each with when it was put back.
    conns: Mutex<VecDeque<(Conn, Instant)>>,
    max: usize,
    timeout: Duration,
}

impl Idle {
    pub(crate) fn new(max: usize, timeout: Duration) -> Self {
        Self {
            conns: Mutex::new(VecDeque::new()),
            max,
            timeout,
        }
    }

    /// A connection still fit to carry a request, if one is idle.
    pub(crate) fn take(&self) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
                self.expire(&mut conns);
                conns.pop_back()?.0
            };
            if quiet(&mut conn) {
                return Some(conn);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Keeps `conn` for the next request; when as many are idle already, the oldest goes.
    pub(crate) fn put(&self, conn: Conn) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        self.expire(&mut conns);
        if conns.len() >= self.max {
            conns.pop_front();
        }
        if self.max > 0 {
            conns.push_back((conn, Instant::now()));
        }
    }

    /// Closes the connections idle for too long (the oldest are at the front). Nothing
    /// watches idle connections in between: one the server closed holds its descriptor until
    /// the provider's next call (at most `max` of them).
    fn expire(&self, conns: &mut VecDeque<(Conn, Instant)>) {
        let now = Instant::now();
        while conns
            .front()
            .is_some_and(|(_, since)| now.duration_since(*since) >= self.timeout)
        {
            conns.pop_front();
        }
    }
}

/// Whether an idle connection has nothing to read: a server that closed it (or said anything
/// unasked) makes it unfit.
fn quiet(conn: &mut Conn) -> bool {
    conn.fill_now().is_pending()
}

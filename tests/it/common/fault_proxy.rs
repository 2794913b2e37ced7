//! A TCP fault proxy between a replica and PostgreSQL, for the tests of what the PostgreSQL
//! store promises under a database's and a network's faults. The replica connects to the
//! proxy as it would to the database, and every byte passes on, except as the test says:
//! - [`arm`](FaultProxy::arm): the next statement of a kind (its `/* model-runtime: KIND */`
//!   tag, `pg.rs`) meets a [`Fault`] once: its connection reset before the server sees it;
//!   its answer dropped after the server ran it; held a while; or answered, and then every
//!   connection cut and new ones refused, or every connection held, for a while;
//! - [`delay`](FaultProxy::delay): every byte waits that long, each way;
//! - [`stall`](FaultProxy::stall): nothing passes, either way, until it is lifted;
//! - [`cut`](FaultProxy::cut) and [`refuse`](FaultProxy::refuse): every open connection reset
//!   now; new ones reset as they come.
//!
//! It counts the statements it saw by kind and the faults that fired, so a test knows that
//! its fault happened. Resets are real (`SO_LINGER` 0): the replica sees what a broken network
//! or a killed server gives it.

pub mod pg;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use pg::{Frontend, Sent};

/// What happens to the next statement of an armed kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Its connection is reset as it is sent: the server never sees it.
    Reset,
    /// The server runs it (and commits, outside a transaction); its answer is dropped and
    /// the connection reset: the client cannot know whether it ran.
    DropAnswer,
    /// It waits this long before it goes on to the server (and whatever follows it on its
    /// connection with it).
    Hold(Duration),
    /// Its answer reaches the client; then every connection is cut and new ones are refused
    /// for this long.
    CutAfter(Duration),
    /// Its answer reaches the client; then nothing passes on any connection for this long.
    StallAfter(Duration),
}

/// What the proxy passes, and how.
#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    delay: Duration,
    stalled: bool,
    refusing: bool,
}

#[derive(Default)]
struct Counts {
    armed: Vec<(String, Fault)>,
    seen: HashMap<String, usize>,
    fired: Vec<(String, Fault)>,
}

struct Control {
    settings: watch::Sender<Settings>,
    counts: Mutex<Counts>,
    connections: Mutex<HashMap<u64, CancellationToken>>,
    next: AtomicU64,
}

impl Control {
    fn settings(&self) -> Settings {
        *self.settings.borrow()
    }

    fn cut(&self) {
        for (_, token) in self.connections.lock().unwrap().drain() {
            token.cancel();
        }
    }

    /// The fault armed for a statement of `kind`, taken (once), and the statement counted.
    fn fault_for(&self, kind: &str) -> Option<Fault> {
        let mut counts = self.counts.lock().unwrap();
        *counts.seen.entry(kind.to_owned()).or_default() += 1;
        let at = counts.armed.iter().position(|(k, _)| k == kind)?;
        let (kind, fault) = counts.armed.remove(at);
        eprintln!("fault proxy: {fault:?} on a `{kind}` statement");
        counts.fired.push((kind, fault));
        Some(fault)
    }
}

/// The proxy: listening on 127.0.0.1 port 0, in front of one PostgreSQL server.
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: String,
    control: Arc<Control>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy in front of the server of `url` (a `postgres://` URL with a host and port).
    pub async fn start(url: &str) -> Self {
        let authority = authority(url);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let server: SocketAddr = tokio::net::lookup_host(host_port)
            .await
            .unwrap()
            .next()
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let control = Arc::new(Control {
            settings: watch::Sender::new(Settings::default()),
            counts: Mutex::default(),
            connections: Mutex::default(),
            next: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept(listener, server, control.clone()));
        Self {
            addr,
            upstream: url.to_owned(),
            control,
            accept,
        }
    }

    /// The database's URL with the proxy in its place.
    pub fn url(&self) -> String {
        let authority = authority(&self.upstream);
        let proxied = match authority.rsplit_once('@') {
            Some((user, _)) => format!("{user}@{}", self.addr),
            None => self.addr.to_string(),
        };
        self.upstream.replacen(authority, &proxied, 1)
    }

    /// The next statement of `kind` meets `fault`.
    pub fn arm(&self, kind: &str, fault: Fault) {
        self.control
            .counts
            .lock()
            .unwrap()
            .armed
            .push((kind.to_owned(), fault));
    }

    /// How many faults armed for `kind` have fired.
    pub fn fired(&self, kind: &str) -> usize {
        let counts = self.control.counts.lock().unwrap();
        counts.fired.iter().filter(|(k, _)| k == kind).count()
    }

    /// How many statements of `kind` passed (or met a fault).
    pub fn seen(&self, kind: &str) -> usize {
        let counts = self.control.counts.lock().unwrap();
        counts.seen.get(kind).copied().unwrap_or(0)
    }

    /// Waits (at most `limit`) until a fault armed for `kind` has fired.
    pub async fn until_fired(&self, kind: &str, limit: Duration) {
        assert!(
            self.fired_within(kind, limit).await,
            "the fault armed for `{kind}` did not fire within {limit:?}; statements seen: {:?}",
            self.control.counts.lock().unwrap().seen
        );
    }

    /// Whether a fault armed for `kind` fires within `limit` (or has fired).
    pub async fn fired_within(&self, kind: &str, limit: Duration) -> bool {
        let began = Instant::now();
        while self.fired(kind) == 0 {
            if began.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Every byte waits `delay`, each way (zero: none).
    pub fn delay(&self, delay: Duration) {
        self.control.settings.send_modify(|s| s.delay = delay);
    }

    /// Holds every byte, both ways, while `on`.
    pub fn stall(&self, on: bool) {
        self.control.settings.send_modify(|s| s.stalled = on);
    }

    /// Resets every open connection.
    pub fn cut(&self) {
        self.control.cut();
    }

    /// Resets new connections as they come, while `on`.
    pub fn refuse(&self, on: bool) {
        self.control.settings.send_modify(|s| s.refusing = on);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.control.cut();
    }
}

/// The `user@host:port` part of a URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

async fn accept(listener: TcpListener, server: SocketAddr, control: Arc<Control>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let control = control.clone();
        tokio::spawn(async move {
            if control.settings().refusing {
                reset(client);
                return;
            }
            let Ok(upstream) = TcpStream::connect(server).await else {
                reset(client);
                return;
            };
            connection(control, client, upstream).await;
        });
    }
}

/// Drops `stream` with a reset, not a FIN.
fn reset(stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// What one direction's reader hands its writer.
enum Item {
    /// Bytes read at that instant.
    Bytes(Instant, Vec<u8>),
    /// Everything before this is written: cut this connection.
    Cut,
    /// Everything before this is written: cut every connection, refuse new ones this long.
    CutAll(Duration),
    /// Everything before this is written: hold every connection this long.
    StallAll(Duration),
}

/// One connection's own state, shared by its two directions.
#[derive(Default)]
struct Conn {
    /// Statements (and start-up) the client sent that the server answers with one `Z` each.
    asked: AtomicU64,
    /// Raw bytes the server sends before its next tagged message (its answer to a TLS request).
    raw: AtomicUsize,
    /// Answers (numbered from 1, as `asked` counts) to drop, or to cut every connection after.
    faults: Mutex<VecDeque<(u64, Fault)>>,
}

async fn connection(control: Arc<Control>, client: TcpStream, server: TcpStream) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let token = CancellationToken::new();
    let id = control.next.fetch_add(1, Ordering::Relaxed);
    control
        .connections
        .lock()
        .unwrap()
        .insert(id, token.clone());
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let conn = Arc::new(Conn::default());
    let (to_server, for_server) = mpsc::unbounded_channel();
    let (to_client, for_client) = mpsc::unbounded_channel();
    tokio::select! {
        () = token.cancelled() => {}
        () = from_client(&control, &conn, client_read, &to_server) => {}
        () = from_server(&conn, server_read, &to_client) => {}
        () = write(&control, for_server, &server_write) => {}
        () = write(&control, for_client, &client_write) => {}
    }
    control.connections.lock().unwrap().remove(&id);
    for half in [client_write, server_write] {
        let _ = socket2::SockRef::from(half.as_ref()).set_linger(Some(Duration::ZERO));
    }
}

/// Reads the client's messages: counts and arms what they run, passes the rest on.
async fn from_client(
    control: &Control,
    conn: &Conn,
    mut read: OwnedReadHalf,
    to: &mpsc::UnboundedSender<Item>,
) {
    let mut frontend = Frontend::default();
    let mut buffer = Vec::new();
    loop {
        while let Some(len) = frontend.next_len(&buffer) {
            let message: Vec<u8> = buffer.drain(..len).collect();
            let (sent, encryption) = frontend.read(&message);
            if encryption {
                conn.raw.store(1, Ordering::Release);
            }
            match &sent {
                Sent::Runs(kind) => {
                    let answer = conn.asked.load(Ordering::Acquire) + 1;
                    match control.fault_for(kind) {
                        Some(Fault::Reset) => {
                            let _ = to.send(Item::Cut);
                            return;
                        }
                        Some(Fault::Hold(hold)) => tokio::time::sleep(hold).await,
                        Some(fault) => conn.faults.lock().unwrap().push_back((answer, fault)),
                        None => {}
                    }
                }
                Sent::Untagged if !encryption && message.len() >= 8 => {
                    // The start-up packet is answered by a `Z` too (a cancel request is
                    // answered by nothing, and its connection closes).
                    conn.asked.fetch_add(1, Ordering::AcqRel);
                }
                Sent::Sync => {
                    conn.asked.fetch_add(1, Ordering::AcqRel);
                }
                _ => {}
            }
            if message[0] == b'Q' && !matches!(sent, Sent::Untagged) {
                conn.asked.fetch_add(1, Ordering::AcqRel);
            }
            if to.send(Item::Bytes(Instant::now(), message)).is_err() {
                return;
            }
        }
        if !more(&mut read, &mut buffer).await {
            return;
        }
    }
}

/// Reads the server's messages: passes them on, except an answer a fault drops.
async fn from_server(conn: &Conn, mut read: OwnedReadHalf, to: &mpsc::UnboundedSender<Item>) {
    let mut buffer = Vec::new();
    let mut answered = 0u64;
    loop {
        let raw = conn.raw.swap(0, Ordering::AcqRel).min(buffer.len());
        if raw > 0 {
            let bytes: Vec<u8> = buffer.drain(..raw).collect();
            let _ = to.send(Item::Bytes(Instant::now(), bytes));
        }
        while let Some(len) = pg::tagged_len(&buffer) {
            let message: Vec<u8> = buffer.drain(..len).collect();
            let answer = answered + 1;
            let fault = conn
                .faults
                .lock()
                .unwrap()
                .iter()
                .find(|(a, _)| *a == answer)
                .map(|(_, f)| *f);
            let ends = pg::ends_answer(&message);
            if ends {
                answered = answer;
            }
            match fault {
                Some(Fault::DropAnswer) => {
                    if ends {
                        // The server is done with it (committed, if it commits): cut.
                        let _ = to.send(Item::Cut);
                        return;
                    }
                }
                Some(Fault::CutAfter(refuse)) if ends => {
                    let _ = to.send(Item::Bytes(Instant::now(), message));
                    let _ = to.send(Item::CutAll(refuse));
                    return;
                }
                Some(Fault::StallAfter(stall)) if ends => {
                    let _ = to.send(Item::Bytes(Instant::now(), message));
                    let _ = to.send(Item::StallAll(stall));
                }
                _ => {
                    if to.send(Item::Bytes(Instant::now(), message)).is_err() {
                        return;
                    }
                }
            }
        }
        if !more(&mut read, &mut buffer).await {
            return;
        }
    }
}

/// Reads what comes next onto `buffer`; `false` at the end.
async fn more(read: &mut OwnedReadHalf, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    match read.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// Writes what a reader passed on, each piece once the delay since it was read has passed
/// and while nothing is stalled.
async fn write(
    control: &Arc<Control>,
    mut items: mpsc::UnboundedReceiver<Item>,
    write: &OwnedWriteHalf,
) {
    let mut settings = control.settings.subscribe();
    while let Some(item) = items.recv().await {
        match item {
            Item::Bytes(read_at, bytes) => {
                loop {
                    let now = *settings.borrow_and_update();
                    if now.stalled {
                        if settings.changed().await.is_err() {
                            return;
                        }
                        continue;
                    }
                    if Instant::now() < read_at + now.delay {
                        tokio::select! {
                            () = tokio::time::sleep_until(read_at + now.delay) => {}
                            changed = settings.changed() => if changed.is_err() { return },
                        }
                        continue;
                    }
                    break;
                }
                if write_all(write, &bytes).await.is_err() {
                    return;
                }
            }
            Item::Cut => return,
            Item::CutAll(refuse) => {
                for_a_while(control, refuse, |s, on| s.refusing = on);
                control.cut();
                return;
            }
            Item::StallAll(stall) => for_a_while(control, stall, |s, on| s.stalled = on),
        }
    }
}

/// Turns a setting on (`set(settings, true)`) for `long`, then off.
fn for_a_while(control: &Arc<Control>, long: Duration, set: fn(&mut Settings, bool)) {
    control.settings.send_modify(|s| set(s, true));
    let control = control.clone();
    tokio::spawn(async move {
        tokio::time::sleep(long).await;
        control.settings.send_modify(|s| set(s, false));
    });
}

async fn write_all(write: &OwnedWriteHalf, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        write.writable().await?;
        match write.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

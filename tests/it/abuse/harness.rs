//! The abuse suite's ground: the real binary on a config of small limits, its memory read
//! from `/proc`, and a well-behaved client that keeps running beside every attack.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use model_runtime::config::ConfigBuilder;
use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

use crate::common::process::{Guard, start_server_env};
use crate::common::*;

const MIB: u64 = 1024 * 1024;

/// A `serve` process on its own config file.
pub struct Target {
    server: Guard,
    pub addr: String,
    _config: tempfile::NamedTempFile,
}

impl Target {
    pub fn start(config: ConfigBuilder) -> Self {
        Self::start_env(config, &[])
    }

    /// [`Target::start`] with variables set in the server's environment.
    pub fn start_env(config: ConfigBuilder, env: &[(&str, &str)]) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), config.to_toml()).unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let (server, addr) = start_server_env(&["--config", &path], env, WAIT);
        Self {
            server,
            addr,
            _config: file,
        }
    }

    /// A client on a connection of its own.
    pub async fn client(&self) -> ModelRuntimeClient<Channel> {
        ModelRuntimeClient::new(self.channel().await)
    }

    pub async fn channel(&self) -> Channel {
        within(self.endpoint().connect()).await.expect("connect")
    }

    /// A connection whose HTTP/2 windows are `window` bytes per stream and 64 times that in
    /// all: a reader that stops reading stalls the server's side of its stream that soon.
    pub async fn narrow_channel(&self, window: u32) -> Channel {
        let endpoint = self
            .endpoint()
            .initial_stream_window_size(window)
            .initial_connection_window_size(window * 64);
        within(endpoint.connect()).await.expect("connect")
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint::from_shared(format!("http://{}", self.addr)).unwrap()
    }

    fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.server.0.id()))
            .expect("the server is running");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("no {field} in /proc status"))
    }

    /// Resident memory once start-up and the first calls have settled, in bytes: what an
    /// attack's growth is measured from.
    pub async fn settled_rss(&self) -> u64 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.rss()
    }

    /// Resident memory now, in bytes.
    pub fn rss(&self) -> u64 {
        self.status("VmRSS:")
    }

    /// The most resident memory the server has had, in bytes.
    pub fn peak(&self) -> u64 {
        self.status("VmHWM:")
    }

    /// Fails unless the server never held more than `allowance` bytes beyond `settled` (see
    /// [`Target::settled_rss`]), and is still running.
    pub fn assert_grew_under(&self, settled: u64, allowance: u64, attack: &str) {
        let peak = self.peak();
        let grew = peak.saturating_sub(settled);
        eprintln!(
            "{attack}: settled at {} MiB, peak {} MiB (grew {} MiB; at most {} MiB), now {} MiB",
            settled / MIB,
            peak / MIB,
            grew / MIB,
            allowance / MIB,
            self.rss() / MIB
        );
        assert!(
            grew < allowance,
            "{attack}: the server grew {} MiB, over the {} MiB allowed",
            grew / MIB,
            allowance / MIB
        );
    }
}

/// A caller that runs one small `Execute` after another on its own connection, checking each
/// reply is the whole echo, complete and in order, until stopped.
pub struct WellBehaved {
    stop: Arc<AtomicBool>,
    task: JoinHandle<(usize, Vec<String>)>,
}

impl WellBehaved {
    pub async fn start(target: &Target) -> Self {
        let mut client = target.client().await;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let (mut ok, mut failures) = (0, Vec::new());
            while !stopped.load(Ordering::Relaxed) {
                let call = tokio::time::timeout(
                    WAIT,
                    try_execute(&mut client, request("chat", "hello big world")),
                )
                .await;
                match call {
                    Ok(Ok(events)) => {
                        assert_complete_sequence(&events);
                        if text_of(&events) == "hello big world" {
                            ok += 1;
                        } else {
                            failures.push(format!("wrong text: {:?}", text_of(&events)));
                        }
                    }
                    Ok(Err(status)) => failures.push(format!("{status:?}")),
                    Err(_) => failures.push("no reply within the wait".into()),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ok, failures)
        });
        Self { stop, task }
    }

    /// Stops it; fails unless every call succeeded and there were at least `least`.
    pub async fn assert_served(self, least: usize, attack: &str) {
        self.stop.store(true, Ordering::Relaxed);
        let (ok, failures) = within(self.task).await.expect("the caller's task");
        eprintln!("{attack}: the well-behaved caller succeeded {ok} times");
        assert!(
            failures.is_empty(),
            "{attack}: the well-behaved caller saw {failures:?}"
        );
        assert!(
            ok >= least,
            "{attack}: only {ok} calls succeeded (want {least})"
        );
    }
}

/// Runs `Execute` to its end; the status of the call or of the first failed item.
pub async fn try_execute(
    client: &mut ModelRuntimeClient<Channel>,
    request: pb::ExecuteRequest,
) -> Result<Vec<pb::ExecutionEvent>, tonic::Status> {
    let mut stream = client.execute(request).await?.into_inner();
    let mut events = Vec::new();
    while let Some(event) = futures_util::StreamExt::next(&mut stream).await {
        events.push(event?);
    }
    Ok(events)
}

/// Mebibytes.
pub const fn mib(n: u64) -> u64 {
    n * MIB
}

//! A `serve` child as one replica: started on a configuration file of the test's, with its
//! log kept (shown when the test fails, as the evidence of what the server did), a client,
//! its health, and the signals a replica's process goes through (SIGKILL, SIGSTOP, SIGCONT).

use std::time::{Duration, Instant};

use model_runtime::pb;
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;
use rustix::process::{Pid, Signal};
use tonic::Status;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::process::{Guard, Log, start_serve_logged};
use super::{WAIT, connect, metadata, within};

/// How long a replica may take to report SERVING after it logs its address: its store
/// starts in the background (connects, migrates its schema, registers), on a busy machine.
const START: Duration = Duration::from_secs(60);

/// The lines of a replica's log shown when a test fails.
const SHOWN: usize = 120;

/// One `serve` process.
pub struct Replica {
    /// A name for messages (`A`, `B`, ...).
    pub name: String,
    pub addr: String,
    pub client: ModelRuntimeClient<Channel>,
    pub channel: Channel,
    process: Guard,
    log: Log,
    _config: tempfile::NamedTempFile,
}

impl Replica {
    /// `serve` on the configuration `toml` with `env`, once it is ready (see
    /// [`until_ready`](Self::until_ready)).
    pub async fn start(name: &str, toml: &str, env: &[(&str, &str)]) -> Self {
        let replica = Self::spawn(name, toml, env).await;
        replica.until_ready(START).await;
        replica
    }

    /// [`start`](Self::start) on `listen` (a restarted server's address, which its clients
    /// know).
    pub async fn start_on(name: &str, toml: &str, env: &[(&str, &str)], listen: &str) -> Self {
        let replica = Self::spawn_on(name, toml, env, listen).await;
        replica.until_ready(START).await;
        replica
    }

    /// `serve` on the configuration `toml` with `env`, connected as soon as it logs its
    /// address (its store may not have started yet).
    pub async fn spawn(name: &str, toml: &str, env: &[(&str, &str)]) -> Self {
        Self::spawn_on(name, toml, env, "127.0.0.1:0").await
    }

    async fn spawn_on(name: &str, toml: &str, env: &[(&str, &str)], listen: &str) -> Self {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), toml).unwrap();
        let path = file.path().to_str().unwrap();
        let (process, addr, log) =
            start_serve_logged(&["serve", "--listen", listen, "--config", path], env, WAIT);
        let channel = connect(&addr).await;
        Self {
            name: name.to_owned(),
            addr,
            client: ModelRuntimeClient::new(channel.clone()),
            channel,
            process,
            log,
            _config: file,
        }
    }

    /// What it has logged so far.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.process.0.id()).unwrap()).unwrap();
        rustix::process::kill_process(pid, signal)
            .unwrap_or_else(|e| panic!("signal {signal:?} to replica {}: {e}", self.name));
    }

    /// SIGKILL, and waits until the process is gone.
    pub fn kill(&mut self) {
        self.process.0.kill().unwrap();
        self.process.0.wait().unwrap();
    }

    /// The overall health (service `""`), or the status of the call.
    pub async fn health(&self) -> Result<ServingStatus, Status> {
        let mut client = HealthClient::new(self.channel.clone());
        let request = HealthCheckRequest {
            service: String::new(),
        };
        within(client.check(request))
            .await
            .map(|r| r.into_inner().status())
    }

    /// Polls the health until it is `want`; how long that took. Fails the test after
    /// `limit`, showing the last answer.
    pub async fn until_health(&self, want: ServingStatus, limit: Duration) -> Duration {
        let began = Instant::now();
        loop {
            let health = self.health().await;
            if health.as_ref().is_ok_and(|h| *h == want) {
                return began.elapsed();
            }
            assert!(
                began.elapsed() < limit,
                "replica {}: health is not {want:?} within {limit:?}; the last answer: {health:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Replica {
    /// Polls until health is SERVING and the runtime says READY; how long that took. Health
    /// alone is not enough: it answers SERVING for a moment after start-up, before the
    /// server has first looked at its store (which starts in the background), and lags the
    /// runtime's state by up to a quarter second after that.
    pub async fn until_ready(&self, limit: Duration) -> Duration {
        let began = Instant::now();
        loop {
            let health = self.health().await;
            let state = metadata(&mut self.client.clone()).await.state();
            if health.as_ref().is_ok_and(|h| *h == ServingStatus::Serving)
                && state == pb::RuntimeState::Ready
            {
                return began.elapsed();
            }
            assert!(
                began.elapsed() < limit,
                "replica {} is not ready within {limit:?}: health {health:?}, state {state:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- replica {} (pid {}), its last {SHOWN} log lines ---\n{}",
                self.name,
                self.process.0.id(),
                self.log.tail(SHOWN)
            );
        }
    }
}

//! PostgreSQL for the tests of the postgres store: a configuration on a schema of the test's
//! own (so tests run side by side on one database, and nothing of one is seen by another),
//! a guard that drops that schema when the test ends, and a PostgreSQL server of a test's own
//! that it can stop and start again (the shared one must stay up for everyone else).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use model_runtime::config::ConfigBuilder;

use super::services::unavailable;

/// The variable a `serve` child reads the store's connection string from.
pub const URL_ENV: &str = "MODEL_RUNTIME_POSTGRES_URL";

/// The prefix of the schemas these tests make, so old ones can be found and dropped.
const PREFIX: &str = "mr_it_";

/// How the tests' replicas use the store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pub schema: String,
    pub lease: Duration,
    pub poll_interval: Duration,
    /// The server-side limit of a statement (the store waits a second more for an answer).
    pub statement_timeout: Option<Duration>,
}

impl PgStore {
    /// A fresh schema with `lease` and `poll_interval`.
    pub fn new(lease: Duration, poll_interval: Duration) -> Self {
        Self {
            schema: fresh_schema(),
            lease,
            poll_interval,
            statement_timeout: None,
        }
    }

    /// `config`'s TOML with `[store] kind = "postgres"` on this schema, its connection string
    /// read from [`URL_ENV`]. The builder has no postgres store of its own, so the table is
    /// set in the TOML the builder writes (the same keys a file would have).
    pub fn toml(&self, config: &ConfigBuilder) -> String {
        let mut table: toml::Table = config.to_toml().parse().expect("the builder's TOML");
        let store = table
            .entry("store")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .expect("[store] is a table");
        let duration = |d: Duration| toml::Value::String(humantime::format_duration(d).to_string());
        store.insert("kind".into(), "postgres".into());
        store.insert("url_env".into(), URL_ENV.into());
        store.insert("schema".into(), self.schema.clone().into());
        store.insert("lease".into(), duration(self.lease));
        store.insert("poll_interval".into(), duration(self.poll_interval));
        if let Some(timeout) = self.statement_timeout {
            store.insert("statement_timeout".into(), duration(timeout));
        }
        // A test's replicas are few and light: a small pool each, so several tests' replicas
        // stay well within the server's `max_connections` (100 by default).
        store.insert("pool_size".into(), 4.into());
        toml::to_string(&table).expect("TOML")
    }
}

/// A schema name no other test uses: the prefix, the time it was made (so leftovers of
/// killed runs can be told by age), and random hex.
pub fn fresh_schema() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    format!("{PREFIX}{secs}_{}", &tag[..12])
}

/// Drops its schema (and the schemas of this kind made over an hour ago, which a killed run
/// left) when dropped. Declare it before the replicas that use the schema, so they are gone
/// (dropped first) when it runs.
pub struct DropSchema {
    url: String,
    schema: String,
}

impl DropSchema {
    pub fn new(url: &str, schema: &str) -> Self {
        Self {
            url: url.to_owned(),
            schema: schema.to_owned(),
        }
    }
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        let (url, schema) = (self.url.clone(), self.schema.clone());
        // Its own thread and runtime: a drop may run inside the test's runtime, which cannot
        // be blocked on, or after it.
        let dropping = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let _ = tokio::time::timeout(Duration::from_secs(10), drop_schemas(&url, &schema))
                    .await;
            });
        });
        let _ = dropping.join();
    }
}

/// Drops `schema` and every schema of [`PREFIX`] older than an hour; errors are ignored (a
/// leftover schema harms nothing but space).
async fn drop_schemas(url: &str, schema: &str) {
    let Ok((client, connection)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return;
    };
    let connection = tokio::spawn(connection);
    let cutoff = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .saturating_sub(3600);
    let mut names = vec![schema.to_owned()];
    if let Ok(rows) = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'mr\\_it\\_%'",
            &[],
        )
        .await
    {
        for row in rows {
            let name: String = row.get(0);
            let made = name[PREFIX.len()..]
                .split('_')
                .next()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(u64::MAX);
            if made < cutoff {
                names.push(name);
            }
        }
    }
    for name in names {
        let _ = client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .await;
    }
    drop(client);
    let _ = connection.await;
}

/// A PostgreSQL server of the test's own in a temporary directory, on a free loopback port,
/// that the test can stop and start again; stopped (immediately) on drop, its log shown if
/// the test failed.
pub struct PrivatePostgres {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    running: bool,
}

impl PrivatePostgres {
    /// A new cluster, started; `None` (after a line saying why) when this machine has no
    /// PostgreSQL server binaries, unless CI=true, where that fails the test.
    pub fn start() -> Option<Self> {
        let Some(bin) = server_binaries() else {
            unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on this machine");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // The server refuses to run as root: as root, it runs as `postgres`, which must own
        // its directory.
        if is_root() {
            let owned = Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(owned.success(), "chown postgres {}", dir.path().display());
        }
        let mut server = Self {
            bin,
            dir,
            port: free_port(),
            running: false,
        };
        server.run(
            "initdb",
            &[
                "-D",
                server.data().to_str().unwrap(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-locale",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        server.restart();
        Some(server)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable`.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable",
            self.port
        )
    }

    /// Starts it (again) on the same port and waits until it accepts connections. Its Unix
    /// socket is in its own directory, not the system's (which another server may use).
    pub fn restart(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data().to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        self.running = true;
    }

    /// Stops it with `mode` (`fast`: sessions are ended, the server shuts down cleanly) and
    /// waits until it has.
    pub fn stop(&mut self, mode: &str) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data().to_str().unwrap(),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "stop",
            ],
        );
        self.running = false;
    }

    /// The server's own log, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Runs one of the server's programs to its end (as `postgres` when this is root).
    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        let output = command
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
        assert!(
            output.status.success(),
            "{} {args:?}: {}\n{}\n{}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!(
                "--- the private PostgreSQL's log, its last 40 lines ---\n{}",
                lines[lines.len().saturating_sub(40)..].join("\n")
            );
        }
        if self.running {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.stop("immediate");
            }));
        }
    }
}

/// The directory of `initdb` and `pg_ctl`: the newest of Debian's
/// `/usr/lib/postgresql/VERSION/bin`, else wherever `PATH` has them.
fn server_binaries() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            has_server(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find(|d| has_server(d)))
}

fn has_server(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A loopback port free a moment ago (bound to port 0, then released for a server).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

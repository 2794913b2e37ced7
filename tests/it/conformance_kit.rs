//! The conformance kit (`crates/conformance`) run as a user runs it: its provider on
//! loopback, the runtime a `serve` process on the kit's configuration, the kit against its
//! address. It passes on the memory store, the file store and two replicas on PostgreSQL,
//! with every rule it can observe concluded (none left unsupported but the unobservable);
//! and it fails each broken implementation with the rule that implementation breaks
//! (`conformance_kit/broken.rs`).

mod broken;

use std::time::Duration;

use conformance::provider::Provider;
use conformance::report::Report;
use conformance::{Options, rules, setup};

use crate::common::postgres::{DropSchema, URL_ENV, fresh_schema};
use crate::common::postgres_answering;
use crate::common::replica::Replica;

/// The stores' retention in these runs: the expiry cases wait for it.
const RETENTION: Duration = Duration::from_secs(2);

const STORE_KEY_ENV: &str = "MODEL_RUNTIME_TEST_STORE_KEY";
const STORE_KEY: &str = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

/// The kit's provider on a free loopback port.
async fn provider() -> Provider {
    Provider::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// A `serve` configuration: a short drain, `store` (a `[store]` table), and the kit's.
fn config(store: &str, provider: &Provider) -> String {
    format!(
        "[server]\ndrain_timeout = \"1s\"\n\n[store]\n{store}\n{}",
        setup::config(provider.addr())
    )
}

/// Runs the kit (with its SHOULD cases) against `target` (and `replica`).
async fn run(provider: &Provider, target: &Replica, replica: Option<&Replica>) -> Report {
    let options = Options {
        target: target.addr.clone(),
        replica: replica.map(|r| r.addr.clone()),
        retention: Some(RETENTION),
        strict: true,
        only: Vec::new(),
        wait: Duration::from_secs(10),
    };
    conformance::run(&options, provider).await.unwrap()
}

/// Every rule passes, but those no case can observe from outside and `also` (what this
/// configuration cannot show).
fn assert_conforms(report: &Report, also: &[&str]) {
    let table = report.table();
    assert!(!report.failed(), "the kit failed the runtime:\n{table}");
    for row in &report.rules {
        let unsupported = rules::unobserved(&row.id).is_some() || also.contains(&row.id.as_str());
        let expected = if unsupported { "unsupported" } else { "pass" };
        assert_eq!(row.status, expected, "{}:\n{table}", row.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_passes_the_runtime_on_the_memory_store() {
    let provider = provider().await;
    let store = format!(
        "kind = \"memory\"\nretention = \"{}\"\n",
        humantime::format_duration(RETENTION)
    );
    let server = Replica::start("memory", &config(&store, &provider), &[]).await;
    let report = run(&provider, &server, None).await;
    // One replica cannot show a cancel through another.
    assert_conforms(&report, &["CANCEL-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_passes_the_runtime_on_the_file_store() {
    let provider = provider().await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!(
        "kind = \"file\"\npath = \"{}\"\nkey_env = \"{STORE_KEY_ENV}\"\nretention = \"{}\"\n",
        dir.path().join("journal").display(),
        humantime::format_duration(RETENTION)
    );
    let server = Replica::start(
        "file",
        &config(&store, &provider),
        &[(STORE_KEY_ENV, STORE_KEY)],
    )
    .await;
    let report = run(&provider, &server, None).await;
    assert_conforms(&report, &["CANCEL-3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_passes_two_replicas_on_postgres() {
    let Some(url) = postgres_answering() else {
        return;
    };
    let provider = provider().await;
    let schema = fresh_schema();
    let _drop = DropSchema::new(&url, &schema);
    let store = format!(
        "kind = \"postgres\"\nurl_env = \"{URL_ENV}\"\nschema = \"{schema}\"\npool_size = 4\n\
         lease = \"5s\"\npoll_interval = \"50ms\"\nretention = \"{}\"\n",
        humantime::format_duration(RETENTION)
    );
    let toml = config(&store, &provider);
    let a = Replica::start("A", &toml, &[(URL_ENV, &url)]).await;
    let b = Replica::start("B", &toml, &[(URL_ENV, &url)]).await;
    let report = run(&provider, &a, Some(&b)).await;
    assert_conforms(&report, &[]);
}

/// The kit's command line (`conformance::cli::main`, all its binary does) with `args`: its
/// exit code, what it printed, and what it complained of.
async fn kit(args: &[&str]) -> (std::process::ExitCode, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = std::iter::once("model-runtime-conformance").chain(args.iter().copied());
    let code = conformance::cli::main(argv, &mut out, &mut err).await;
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (code, text(out), text(err))
}

/// The README's steps: `config` writes what the runtime loads, `serve` loads it, `run`
/// checks the runtime, prints the table, writes JSON and JUnit, exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_runs_as_the_readme_says() {
    use std::process::ExitCode;
    let provider = format!("127.0.0.1:{}", crate::common::postgres::free_port());
    let (code, printed, _) = kit(&["config", "--provider", &provider]).await;
    assert_eq!(code, ExitCode::SUCCESS);
    let toml = format!("[server]\ndrain_timeout = \"1s\"\n\n{printed}");
    let server = Replica::start("runtime", &toml, &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let (json, junit) = (dir.path().join("kit.json"), dir.path().join("kit.xml"));
    let (json_path, junit_path) = (json.to_str().unwrap(), junit.to_str().unwrap());
    let args = ["run", "--target", &server.addr, "--provider", &provider];
    let (code, table, err) =
        kit(&[&args[..], &["--json", json_path, "--junit", junit_path]].concat()).await;
    assert_eq!(code, ExitCode::SUCCESS, "{table}\n{err}");
    assert!(
        table.contains("RULE") && table.contains("COMMIT-2    MUST   pass"),
        "{table}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["summary"]["must_failed"], 0, "{report}");
    assert_eq!(report["summary"]["fail"], 0, "{report}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"model-runtime-conformance\"")
            && xml.contains("failures=\"0\""),
        "{xml}"
    );

    // Nothing answers at the target: the run says so and exits 2, not 0 or 1.
    let args = [
        "run",
        "--target",
        "127.0.0.1:1",
        "--provider",
        "127.0.0.1:0",
        "--wait",
        "0s",
    ];
    let (code, _, err) = kit(&args).await;
    assert_eq!(code, ExitCode::from(2), "{err}");
    assert!(err.contains("cannot reach 127.0.0.1:1"), "{err}");
    // A misspelt flag is the caller's mistake, said and exit 2.
    let (code, _, err) = kit(&["run", "--targett", "x"]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(err.contains("--targett"), "{err}");
}

//! `[store] kind = "postgres"`: its connection string read from the environment and never
//! shown, its defaults, its bounds, and keys of one kind of store refused on another.

use super::*;

/// A connection string with a password, which no message and no `Debug` may show.
const URL: &str = "postgres://mr:hunter2@db.internal:5432/model_runtime";

/// `MINIMAL` with `[store]` set to `body`, the variable `PG` holding `url`.
fn with_store(body: &str, url: &str) -> Result<Config, ConfigError> {
    let text = format!("{MINIMAL}\n[store]\n{body}\n");
    Config::from_toml_with_env(&text, &|name| (name == "PG").then(|| url.to_owned()))
}

fn postgres_of(config: &Config) -> &PostgresStoreConfig {
    match &config.store.kind {
        StoreKind::Postgres(postgres) => postgres,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_postgres_store_reads_its_connection_string_and_fills_its_defaults() {
    let config = with_store("kind = \"postgres\"\nurl_env = \"PG\"", URL).unwrap();
    let postgres = postgres_of(&config);
    assert_eq!(postgres.url.expose(), URL);
    assert_eq!(&*postgres.url_env, "PG");
    assert_eq!(postgres.pool_size, 16);
    assert_eq!(postgres.connect_timeout, Duration::from_secs(5));
    assert_eq!(postgres.acquire_timeout, Duration::from_secs(2));
    assert_eq!(postgres.statement_timeout, Duration::from_secs(5));
    assert_eq!(postgres.lease, Duration::from_secs(10));
    assert_eq!(postgres.poll_interval, Duration::from_secs(1));
    // The store's own bounds are the shared tables' bounds.
    assert_eq!(config.store.max_executions, 10_000);
    assert_eq!(config.store.retention, Duration::from_secs(600));
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("hunter2") && !shown.contains(URL),
        "{shown}"
    );

    // The other forms libpq reads: `postgresql://`, key=value pairs, a Unix socket directory.
    for url in [
        "postgresql://mr:hunter2@db.internal/model_runtime?sslmode=require",
        "host=db.internal port=5432 user=mr password=hunter2 dbname=model_runtime",
        "host=/var/run/postgresql user=mr dbname=model_runtime",
        "postgres://mr@db-a:5432,db-b:5433/model_runtime?target_session_attrs=read-write",
    ] {
        let config = with_store("kind = \"postgres\"\nurl_env = \"PG\"", url)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(postgres_of(&config).url.expose(), url);
    }
}

#[test]
fn every_postgres_store_key_is_read() {
    let body = "kind = \"postgres\"\nurl_env = \"PG\"\npool_size = 1024\n\
                connect_timeout = \"100ms\"\nacquire_timeout = \"10ms\"\n\
                statement_timeout = \"10m\"\nlease = \"1s\"\npoll_interval = \"1s\"\n\
                schema = \"tenant_7\"\n\
                max_executions = 5\nmax_bytes = 1048576\nretention = \"1h\"";
    let config = with_store(body, URL).unwrap();
    assert_eq!(
        config.store.kind,
        StoreKind::Postgres(PostgresStoreConfig {
            url: Secret::new(URL),
            url_env: "PG".into(),
            pool_size: 1024,
            connect_timeout: Duration::from_millis(100),
            acquire_timeout: Duration::from_millis(10),
            statement_timeout: Duration::from_secs(600),
            lease: Duration::from_secs(1),
            poll_interval: Duration::from_secs(1),
            schema: "tenant_7".into(),
        })
    );
    assert_eq!(
        (
            config.store.max_executions,
            config.store.max_bytes,
            config.store.retention
        ),
        (5, 1 << 20, Duration::from_secs(3600))
    );
}

#[test]
fn postgres_store_errors_name_the_key_and_never_the_connection_string() {
    let pg = "kind = \"postgres\"\nurl_env = \"PG\"";
    let not_a_connection_string = "store.url_env: environment variable `PG` is not a PostgreSQL \
        connection string (a `postgres://` or `postgresql://` URL, or libpq's `key=value` pairs)";
    let cases: &[(&str, &str, &str)] = &[
        (
            "kind = \"postgres\"",
            URL,
            "store.url_env: the `postgres` store needs the environment variable that holds its \
             connection string",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"NOPE\"",
            URL,
            "store.url_env: environment variable `NOPE` is not set (or is not valid UTF-8)",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"postgres://db\"",
            URL,
            "store.url_env: must name an environment variable (letters, digits and `_`)",
        ),
        (pg, "", "store.url_env: environment variable `PG` is empty"),
        // Parser messages that would quote the value: an unknown option names its keyword,
        // a stray character is quoted, a bad port is the password's neighbour.
        (pg, "hunter2=1 host=db", not_a_connection_string),
        (pg, "host=db password='hunter2", not_a_connection_string),
        (
            pg,
            "postgres://mr:hunter2@db:port/model_runtime",
            not_a_connection_string,
        ),
        (pg, "hunter2", not_a_connection_string),
        (
            pg,
            "user=mr password=hunter2 dbname=model_runtime",
            "store.url_env: environment variable `PG` names no host (`postgres://HOST/...` or \
             `host=HOST`)",
        ),
        (
            pg,
            "postgres://mr:hunter2@/model_runtime",
            "store.url_env: environment variable `PG` names no host (`postgres://HOST/...` or \
             `host=HOST`)",
        ),
        (
            pg,
            "host=a,b port=1,2,3 password=hunter2",
            "store.url_env: environment variable `PG` gives 2 host(s), 0 hostaddr(s) and 3 \
             port(s): give one port or one per host, and no hostaddr or one per host",
        ),
        (
            "kind = \"postgress\"",
            URL,
            "store.kind: unknown kind `postgress`; expected `memory`, `file` or `postgres`",
        ),
    ];
    for (body, url, expected) in cases {
        let error = with_store(body, url).unwrap_err();
        assert_eq!(error.to_string(), *expected, "{body} with {url:?}");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}

#[test]
fn every_postgres_store_duration_and_count_is_bounded() {
    let cases = [
        (
            "pool_size = 0",
            "store.pool_size: must be between 1 and 1024",
        ),
        (
            "pool_size = 1025",
            "store.pool_size: must be between 1 and 1024",
        ),
        (
            "connect_timeout = \"99ms\"",
            "store.connect_timeout: must be at least 100ms",
        ),
        (
            "connect_timeout = \"61s\"",
            "store.connect_timeout: must be at most 1m",
        ),
        (
            "acquire_timeout = \"9ms\"",
            "store.acquire_timeout: must be at least 10ms",
        ),
        (
            "acquire_timeout = \"2m\"",
            "store.acquire_timeout: must be at most 1m",
        ),
        (
            "statement_timeout = \"50ms\"",
            "store.statement_timeout: must be at least 100ms",
        ),
        (
            "statement_timeout = \"11m\"",
            "store.statement_timeout: must be at most 10m",
        ),
        ("lease = \"999ms\"", "store.lease: must be at least 1s"),
        ("lease = \"1h\"", "store.lease: must be at most 10m"),
        (
            "poll_interval = \"5ms\"",
            "store.poll_interval: must be at least 10ms",
        ),
        (
            "poll_interval = \"11s\"",
            "store.poll_interval: must be at most store.lease (10s)",
        ),
        (
            "schema = \"Model-Runtime\"",
            "store.schema: must be 1 to 63 lowercase letters, digits and `_`, not beginning with a digit",
        ),
        (
            "schema = \"\"",
            "store.schema: must be 1 to 63 lowercase letters, digits and `_`, not beginning with a digit",
        ),
        (
            "lease = \"2s\"\npoll_interval = \"2s 1ms\"",
            "store.poll_interval: must be at most store.lease (2s)",
        ),
        (
            "max_executions = 0",
            "store.max_executions: must be between 1 and 10000000",
        ),
        (
            "retention = \"8days\"",
            "store.retention: must be at most 7days",
        ),
    ];
    for (line, expected) in cases {
        let body = format!("kind = \"postgres\"\nurl_env = \"PG\"\n{line}");
        let error = with_store(&body, URL).unwrap_err().to_string();
        assert_eq!(error, expected, "{line}");
    }
    // At the bound is within it.
    let body = "kind = \"postgres\"\nurl_env = \"PG\"\nlease = \"2s\"\npoll_interval = \"2s\"";
    assert_eq!(
        postgres_of(&with_store(body, URL).unwrap()).poll_interval,
        Duration::from_secs(2)
    );
}

#[test]
fn one_kind_of_stores_keys_are_refused_on_another() {
    let file = "kind = \"file\"\npath = \"d\"\nkey_env = \"PG\"";
    let cases = [
        // The file store's keys on the postgres store.
        (
            "kind = \"postgres\"\nurl_env = \"PG\"\npath = \"d\"",
            "store.path: only applies to the `file` store",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"PG\"\nkey_env = \"K\"",
            "store.key_env: only applies to the `file` store",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"PG\"\nkey_file = \"k\"",
            "store.key_file: only applies to the `file` store",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"PG\"\nkeys = []",
            "store.keys: only applies to the `file` store",
        ),
        (
            "kind = \"postgres\"\nurl_env = \"PG\"\nmax_disk_bytes = 1048576",
            "store.max_disk_bytes: only applies to the `file` store",
        ),
        // The postgres store's keys on the memory store (the default kind) ...
        (
            "url_env = \"PG\"",
            "store.url_env: only applies to the `postgres` store",
        ),
        (
            "kind = \"memory\"\npool_size = 4",
            "store.pool_size: only applies to the `postgres` store",
        ),
        (
            "connect_timeout = \"1s\"",
            "store.connect_timeout: only applies to the `postgres` store",
        ),
        (
            "acquire_timeout = \"1s\"",
            "store.acquire_timeout: only applies to the `postgres` store",
        ),
        (
            "statement_timeout = \"1s\"",
            "store.statement_timeout: only applies to the `postgres` store",
        ),
        (
            "lease = \"10s\"",
            "store.lease: only applies to the `postgres` store",
        ),
        (
            "poll_interval = \"1s\"",
            "store.poll_interval: only applies to the `postgres` store",
        ),
    ];
    for (body, expected) in cases {
        let error = with_store(body, URL).unwrap_err().to_string();
        assert_eq!(error, expected, "{body}");
    }
    // ... and on the file store, before its own keys are read (its key here is no key).
    for (line, key) in [
        ("url_env = \"PG\"", "store.url_env"),
        ("pool_size = 4", "store.pool_size"),
        ("lease = \"10s\"", "store.lease"),
        ("poll_interval = \"1s\"", "store.poll_interval"),
    ] {
        let error = with_store(&format!("{file}\n{line}"), URL)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!("{key}: only applies to the `postgres` store")
        );
    }
}

#[test]
fn check_config_shows_the_postgres_defaults_and_never_the_connection_string() {
    let text = format!("{MINIMAL}\n[store]\nkind = \"postgres\"\nurl_env = \"PG\"\n");
    let env = |name: &str| (name == "PG").then(|| URL.to_owned());
    let config = Config::from_toml_with_env(&text, &env).unwrap();
    let shown = effective::effective(toml::from_str(&text).unwrap(), &config);
    for line in [
        "kind = \"postgres\"",
        "url_env = \"PG\"",
        "pool_size = 16",
        "connect_timeout = \"5s\"",
        "acquire_timeout = \"2s\"",
        "statement_timeout = \"5s\"",
        "lease = \"10s\"",
        "poll_interval = \"1s\"",
    ] {
        assert!(shown.contains(line), "no `{line}` in\n{shown}");
    }
    assert!(!shown.contains("hunter2"), "{shown}");
    // What is shown is itself a config that passes, to the same store.
    let again = Config::from_toml_with_env(&shown, &env).unwrap();
    assert_eq!(again.store.kind, config.store.kind);
}

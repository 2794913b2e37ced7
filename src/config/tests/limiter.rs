//! `limiter = { ... }` on a provider: the Redis limiter's keys, defaults and errors.

use super::*;

/// `MINIMAL` with `limiter` set to `table` on its provider, read with `env`.
fn with_limiter(table: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let text = MINIMAL.replace(
        "adapter = \"scripted\"",
        &format!("adapter = \"scripted\"\nmax_concurrency = 4\nlimiter = {table}"),
    );
    Config::from_toml_with_env(&text, &|name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    })
}

#[test]
fn a_redis_limiter_reads_its_url_from_the_environment_and_fills_its_defaults() {
    let url = "redis://:hunter2@127.0.0.1:6379/0";
    let config = with_limiter(r#"{ kind = "redis", url_env = "R" }"#, &[("R", url)]).unwrap();
    let limiter = config.providers["fake"].limiter.clone().unwrap();
    assert_eq!(limiter.url.expose(), url);
    assert_eq!(&*limiter.key, "model-runtime:limiter:fake");
    assert_eq!(limiter.lease, Duration::from_secs(10));
    assert_eq!(limiter.timeout, Duration::from_millis(500));
    assert_eq!(limiter.on_unavailable, OnUnavailable::FailClosed);
    // The password never reaches a formatted config.
    assert!(!format!("{config:?}").contains("hunter2"));

    let open = with_limiter(
        r#"{ kind = "redis", url_env = "R", on_unavailable = "fail_open", key = "k", lease = "3s", timeout = "1s" }"#,
        &[("R", "redis+unix:///tmp/r.sock")],
    )
    .unwrap();
    let limiter = open.providers["fake"].limiter.clone().unwrap();
    assert_eq!(
        limiter.local_limit, 4,
        "fail_open defaults to max_concurrency"
    );
    assert_eq!(
        (&*limiter.key, limiter.lease),
        ("k", Duration::from_secs(3))
    );
}

#[test]
fn limiter_errors_name_the_key_and_never_the_url() {
    let env = [
        ("R", "redis://:hunter2@localhost"),
        ("TLS", "rediss://:hunter2@h"),
    ];
    let cases = [
        (
            r#"{ kind = "etcd", url_env = "R" }"#,
            "providers.fake.limiter.kind: unknown kind `etcd`",
        ),
        (
            r#"{ kind = "redis" }"#,
            "providers.fake.limiter.url_env: the `redis` limiter needs",
        ),
        (
            r#"{ kind = "redis", url_env = "NOPE" }"#,
            "providers.fake.limiter.url_env: environment variable `NOPE` is not set",
        ),
        (
            r#"{ kind = "redis", url_env = "TLS" }"#,
            "providers.fake.limiter.url_env: environment variable `TLS` asks for TLS",
        ),
        (
            r#"{ kind = "redis", url_env = "R", lease = "500ms" }"#,
            "providers.fake.limiter.lease: must be at least 1s",
        ),
        (
            r#"{ kind = "redis", url_env = "R", lease = "3s", timeout = "2s" }"#,
            "providers.fake.limiter.timeout: must be at least 1ms and at most a third of `lease`",
        ),
        (
            r#"{ kind = "redis", url_env = "R", local_limit = 2 }"#,
            "providers.fake.limiter.local_limit: only applies with `on_unavailable = \"fail_open\"`",
        ),
        (
            r#"{ kind = "redis", url_env = "R", on_unavailable = "fail_open", local_limit = 5 }"#,
            "providers.fake.limiter.local_limit: must be between 1 and 4",
        ),
        (
            r#"{ kind = "redis", url_env = "R", key = "" }"#,
            "providers.fake.limiter.key: must be 1 to 256 bytes",
        ),
        (
            r#"{ kind = "redis", url_env = "R", on_unavailable = "retry" }"#,
            "unknown variant `retry`",
        ),
    ];
    for (table, expected) in cases {
        let error = with_limiter(table, &env).unwrap_err().to_string();
        assert!(
            error.contains(expected),
            "expected `{expected}`, got `{error}`"
        );
        assert!(!error.contains("hunter2"), "{error}");
    }
}

#[test]
fn two_providers_counting_one_key_must_count_one_limit() {
    let text = format!(
        "{MINIMAL}\n[providers.other]\nadapter = \"scripted\"\nmax_concurrency = 8\n\
         limiter = {{ kind = \"redis\", url_env = \"R\", key = \"k\" }}\n\
         [[providers.other.models]]\nname = \"m\"\ncapabilities = [\"text\"]\n"
    )
    .replace(
        "adapter = \"scripted\"\n[[providers.fake",
        "adapter = \"scripted\"\nmax_concurrency = 4\nlimiter = { kind = \"redis\", url_env = \"R\", key = \"k\" }\n[[providers.fake",
    );
    let env = |name: &str| (name == "R").then(|| "redis://127.0.0.1".to_owned());
    let error = Config::from_toml_with_env(&text, &env)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("providers.other.limiter.key: `k` is also provider `fake`'s, with max_concurrency 4 against 8"),
        "{error}"
    );
}

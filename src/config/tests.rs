use super::*;

mod ingress;
mod limiter;
mod postgres;

const MINIMAL: &str = r#"
[providers.fake]
adapter = "scripted"
[[providers.fake.models]]
name = "m1"
capabilities = ["text"]

[policies.main]
targets = ["fake/m1"]

[abilities.chat]
policy = "main"
"#;

fn error_of(text: &str) -> String {
    Config::from_toml(text).unwrap_err().to_string()
}

/// Each file is refused with an error that starts with its expected text.
fn assert_errors(cases: &[(String, &str)]) {
    for (text, expected) in cases {
        let error = error_of(text);
        assert!(
            error.starts_with(expected),
            "expected `{expected}`, got `{error}`"
        );
    }
}

#[test]
fn the_embedded_default_is_valid_and_echoes() {
    let config = Config::embedded_default().unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:50051");
    let chat = &config.abilities["chat"];
    assert_eq!(&*chat.default_policy, "default");
    let provider = &config.providers["scripted"];
    assert!(matches!(provider.adapter, AdapterConfig::Scripted(_)));
    assert_eq!(provider.models[0].script.reply, None, "echo the prompt");
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    let config = Config::from_toml(MINIMAL).unwrap();
    assert_eq!(config.store.kind, StoreKind::Memory);
    assert_eq!(config.server.default_deadline, Duration::from_secs(60));
    let policy = &config.policies["main"];
    assert_eq!((policy.max_attempts, policy.retries_per_target), (3, 0));
    let ability = &config.abilities["chat"];
    assert!(
        ability.allowed_policies.contains("main"),
        "the default policy is always allowed"
    );
}

#[test]
fn unknown_keys_are_rejected_with_their_name() {
    let text = format!("{MINIMAL}\n[server]\nlisten_port = 1\n");
    assert!(
        error_of(&text).contains("listen_port"),
        "{}",
        error_of(&text)
    );
    let text = MINIMAL.replace(
        "adapter = \"scripted\"",
        "adapter = \"scripted\"\nmax_concurency = 2",
    );
    assert!(error_of(&text).contains("max_concurency"));
    let text = MINIMAL.replace(
        "capabilities = [\"text\"]",
        "capabilities = [\"text\"]\nscript = { replies = \"x\" }",
    );
    assert!(error_of(&text).contains("replies"));
}

#[test]
fn errors_name_the_key_and_the_reason() {
    let cases = [
        (MINIMAL.replace("fake/m1", "fake/m2"), "policies.main.targets[0]: provider `fake` has no model `m2`"),
        (MINIMAL.replace("fake/m1", "nope/m1"), "policies.main.targets[0]: unknown provider `nope`"),
        (MINIMAL.replace("fake/m1", "fake"), "policies.main.targets[0]: `fake` is not of the form `provider/model`"),
        (MINIMAL.replace("policy = \"main\"", "policy = \"other\""), "abilities.chat.policy: unknown policy `other`"),
        (MINIMAL.replace("adapter = \"scripted\"", "adapter = \"grpc\""), "providers.fake.adapter: unknown adapter `grpc`"),
        (
            MINIMAL.replace("adapter = \"scripted\"", "adapter = \"scripted\"\nmax_concurrency = 0"),
            "providers.fake.max_concurrency: must be between 1 and 100000",
        ),
        (
            MINIMAL.replace("targets = [\"fake/m1\"]", "targets = [\"fake/m1\"]\nmax_attempts = 0"),
            "policies.main.max_attempts: must be between 1 and 100",
        ),
        (
            MINIMAL.replace("targets = [\"fake/m1\"]", "targets = [\"fake/m1\", \"fake/m1\"]"),
            "policies.main.targets[1]: `fake/m1` is listed twice",
        ),
        (format!("{MINIMAL}\n[server]\nlisten = \"here\"\n"), "server.listen: `here` is not an address"),
        (
            format!("{MINIMAL}\n[server]\ndefault_deadline = \"20m\"\n"),
            "server.default_deadline: must not be longer than server.max_deadline",
        ),
        (format!("{MINIMAL}\n[store]\nkind = \"redis\"\n"), "store.kind: unknown kind `redis`"),
        (
            format!("{MINIMAL}\n[server]\nmetrics_listen = \"everywhere\"\n"),
            "server.metrics_listen: `everywhere` is not an address",
        ),
        (format!("{MINIMAL}\n[store]\nmax_executions = 0\n"), "store.max_executions: must be between 1 and 10000000"),
        (
            MINIMAL.replace("capabilities = [\"text\"]", "capabilities = [\"text\"]\nscript = { tool_call = { name = \"f\", arguments = \"{nope\" } }"),
            "providers.fake.models[0].script.tool_call.arguments: is not JSON text",
        ),
    ];
    assert_errors(&cases);
}

#[test]
fn durations_are_humantime() {
    let text = format!("{MINIMAL}\n[server]\ndrain_timeout = \"250ms\"\nmax_deadline = \"1h\"\n");
    let config = Config::from_toml(&text).unwrap();
    assert_eq!(config.server.drain_timeout, Duration::from_millis(250));
    assert_eq!(config.server.max_deadline, Duration::from_secs(3600));
    let bad = format!("{MINIMAL}\n[server]\ndrain_timeout = \"soon\"\n");
    assert!(
        error_of(&bad).contains("drain_timeout"),
        "{}",
        error_of(&bad)
    );
}

#[test]
fn a_missing_file_names_the_path() {
    let error = Config::load(Path::new("/nonexistent/runtime.toml")).unwrap_err();
    assert!(error.to_string().contains("/nonexistent/runtime.toml"));
}

#[test]
fn every_duration_and_count_is_bounded() {
    let cases = [
        // Once a panic in time arithmetic at the first execution; now a start-up error.
        (
            MINIMAL.replace(
                "targets = [\"fake/m1\"]",
                "targets = [\"fake/m1\"]\nretry_budget = \"300000000000y\"",
            ),
            "policies.main.retry_budget: must be at most 1day",
        ),
        (
            MINIMAL.replace(
                "targets = [\"fake/m1\"]",
                "targets = [\"fake/m1\"]\nbackoff = \"2h\"",
            ),
            "policies.main.backoff: must be at most 1h",
        ),
        (
            MINIMAL.replace(
                "targets = [\"fake/m1\"]",
                "targets = [\"fake/m1\"]\nretries_per_target = 1000",
            ),
            "policies.main.retries_per_target: must be between 0 and 100",
        ),
        (
            format!("{MINIMAL}\n[server]\nmax_deadline = \"2days\"\n"),
            "server.max_deadline: must be at most 1day",
        ),
        (
            format!("{MINIMAL}\n[server]\ndrain_timeout = \"1year\"\n"),
            "server.drain_timeout: must be at most 1h",
        ),
        (
            format!("{MINIMAL}\n[server]\nmax_connection_age = \"10ms\"\n"),
            "server.max_connection_age: must be at least 100ms",
        ),
        (
            format!("{MINIMAL}\n[server]\nmax_connection_age_grace = \"2days\"\n"),
            "server.max_connection_age_grace: must be at most 1day",
        ),
        (
            format!("{MINIMAL}\n[server]\nmax_input_bytes = 0\n"),
            "server.max_input_bytes: must be between 1 and 67108864",
        ),
        (
            format!("{MINIMAL}\n[server]\nmax_events_per_execution = 3\n"),
            "server.max_events_per_execution: must be between 16 and 10000000",
        ),
        (
            format!("{MINIMAL}\n[store]\nmax_bytes = 1024\n"),
            "store.max_bytes: must be between 1048576 and 1099511627776",
        ),
        (
            format!("{MINIMAL}\n[store]\nretention = \"30days\"\n"),
            "store.retention: must be at most 7days",
        ),
        (
            MINIMAL.replace(
                "adapter = \"scripted\"",
                "adapter = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                 timeouts = { idle = \"5h\" }",
            ),
            "providers.fake.timeouts.idle: must be at most 1h",
        ),
        (
            MINIMAL.replace(
                "capabilities = [\"text\"]",
                "capabilities = [\"text\"]\nscript = { first_delta_ms = 99999999999 }",
            ),
            "providers.fake.models[0].script.first_delta_ms: must be at most 3600000",
        ),
        (
            MINIMAL.replace(
                "capabilities = [\"text\"]",
                &format!("capabilities = [\"{}\"]", "c".repeat(200)),
            ),
            "providers.fake.models[0].capabilities[0]: must be 1 to 128 bytes without spaces",
        ),
    ];
    assert_errors(&cases);
}

#[test]
fn an_ability_that_can_never_route_is_an_error_naming_it() {
    let text = MINIMAL.replace(
        "policy = \"main\"",
        "policy = \"main\"\nrequires = [\"vision\"]",
    );
    assert_eq!(
        error_of(&text),
        "abilities.chat.requires: no target of any policy ability `chat` allows has every \
         capability it requires (vision)"
    );
    // One allowed policy that can serve it is enough.
    let text = format!(
        "{}\n[[providers.fake.models]]\nname = \"eyes\"\ncapabilities = [\"text\", \"vision\"]\n\
         [policies.seeing]\ntargets = [\"fake/eyes\"]\n",
        text.replace(
            "requires = [\"vision\"]",
            "requires = [\"vision\"]\nallowed_policies = [\"seeing\"]"
        )
    );
    assert!(Config::from_toml(&text).is_ok(), "{}", error_of(&text));
}

#[test]
fn the_file_store_needs_a_directory_and_a_32_byte_key() {
    let hex = "ab".repeat(32);
    let env = |name: &str| match name {
        "STORE_KEY" => Some(hex.clone()),
        "SHORT_KEY" => Some("abcd".to_owned()),
        _ => None,
    };
    let store = |body: &str| format!("{MINIMAL}\n[store]\n{body}\n");
    let ok = Config::from_toml_with_env(
        &store("kind = \"file\"\npath = \"/var/lib/mr\"\nkey_env = \"STORE_KEY\""),
        &env,
    )
    .unwrap();
    let StoreKind::File(file) = &ok.store.kind else {
        panic!("{:?}", ok.store.kind)
    };
    assert_eq!(file.keys.len(), 1);
    assert_eq!(file.keys[0].expose(), &[0xab; 32]);
    assert_eq!(file.max_disk_bytes, 2 << 30);
    assert!(
        !format!("{ok:?}").contains(&hex),
        "the key is never formatted"
    );

    let key_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key_file.path(), [7u8; 31]).unwrap();
    let key_path = key_file.path().display().to_string();
    for (body, error) in [
        ("kind = \"file\"\nkey_env = \"STORE_KEY\"", "store.path: the `file` store needs a directory".to_owned()),
        ("kind = \"file\"\npath = \"d\"", "store.key_env: the `file` store needs a key".to_owned()),
        (
            "kind = \"file\"\npath = \"d\"\nkey_env = \"SHORT_KEY\"",
            "store.key_env: environment variable `SHORT_KEY` must hold a 32-byte key: 64 hex digits or 32 raw bytes (it holds 4 bytes)".to_owned(),
        ),
        ("kind = \"file\"\npath = \"d\"\nkey_env = \"NOT_SET\"", "store.key_env: environment variable `NOT_SET` is not set".to_owned()),
        (
            &format!("kind = \"file\"\npath = \"d\"\nkey_file = \"{key_path}\""),
            format!("store.key_file: `{key_path}` must hold a 32-byte key: 64 hex digits or 32 raw bytes (it holds 31 bytes)"),
        ),
        (
            "kind = \"file\"\npath = \"d\"\nkey_env = \"STORE_KEY\"\nkeys = [{ env = \"STORE_KEY\" }]",
            "store.keys: give the keys either as store.keys or as store.key_env / store.key_file, not both".to_owned(),
        ),
        (
            "kind = \"file\"\npath = \"d\"\nkeys = [{ env = \"STORE_KEY\" }, { env = \"STORE_KEY\" }]",
            "store.keys[1]: is the same key as one before it".to_owned(),
        ),
        (
            "kind = \"file\"\npath = \"d\"\nkeys = [{ env = \"STORE_KEY\", file = \"k\" }]",
            "store.keys[0].env: give one of store.keys[0].env and store.keys[0].file, not both".to_owned(),
        ),
        ("kind = \"file\"\npath = \"d\"\nkeys = []", "store.keys: must list at least one key".to_owned()),
        ("max_disk_bytes = 1048576", "store.max_disk_bytes: only applies to the `file` store".to_owned()),
        (
            "kind = \"file\"\npath = \"d\"\nkey_env = \"STORE_KEY\"\nmax_disk_bytes = 1000",
            "store.max_disk_bytes: must be between 1048576 and".to_owned(),
        ),
    ] {
        let got = Config::from_toml_with_env(&store(body), &env).unwrap_err().to_string();
        assert!(got.contains(&error), "{body}: {got}");
    }
}

/// `on_unknown_outcome` on a provider and a policy; `retry_unknown_outcome = true` is its
/// older spelling of "retry", and the two may only say the same.
#[test]
fn unknown_outcomes_stop_by_default_and_may_retry_or_fall_back() {
    let config = Config::from_toml(MINIMAL).unwrap();
    assert_eq!(
        config.providers["fake"].on_unknown_outcome,
        OnUnknownOutcome::Stop
    );
    assert_eq!(config.policies["main"].on_unknown_outcome, None);
    let provider = |keys: &str| {
        MINIMAL.replace(
            "adapter = \"scripted\"",
            &format!("adapter = \"scripted\"\n{keys}"),
        )
    };
    let policy = |keys: &str| {
        MINIMAL.replace(
            "targets = [\"fake/m1\"]",
            &format!("targets = [\"fake/m1\"]\n{keys}"),
        )
    };
    for (text, mode) in [
        (
            provider("on_unknown_outcome = \"fallback\""),
            OnUnknownOutcome::Fallback,
        ),
        (
            provider("retry_unknown_outcome = true"),
            OnUnknownOutcome::Retry,
        ),
        (
            provider("retry_unknown_outcome = true\non_unknown_outcome = \"retry\""),
            OnUnknownOutcome::Retry,
        ),
    ] {
        let config = Config::from_toml(&text).unwrap();
        assert_eq!(config.providers["fake"].on_unknown_outcome, mode, "{text}");
    }
    let config = Config::from_toml(&policy("on_unknown_outcome = \"fallback\"")).unwrap();
    assert_eq!(
        config.policies["main"].on_unknown_outcome,
        Some(OnUnknownOutcome::Fallback)
    );
    // A refusal on a content policy stops unless the policy says otherwise.
    assert_eq!(
        Config::from_toml(MINIMAL).unwrap().policies["main"].on_content_filter,
        OnContentFilter::Stop
    );
    let config = Config::from_toml(&policy("on_content_filter = \"fallback\"")).unwrap();
    assert_eq!(
        config.policies["main"].on_content_filter,
        OnContentFilter::Fallback
    );
    assert_errors(&[
        (
            provider("retry_unknown_outcome = true\non_unknown_outcome = \"fallback\""),
            "providers.fake.retry_unknown_outcome: says `on_unknown_outcome = \"retry\"`",
        ),
        (
            provider("retry_unknown_outcome = false\non_unknown_outcome = \"retry\""),
            "providers.fake.retry_unknown_outcome: says `on_unknown_outcome = \"stop\"`, and \
             `on_unknown_outcome` says \"retry\"",
        ),
    ]);
    // A misspelt health setting is named, with the settings there are.
    let error = error_of(&provider("health = { consecutive_failure = 2 }"));
    assert!(
        error.contains("unknown field `consecutive_failure`")
            && error.contains("`consecutive_failures`"),
        "{error}"
    );
    let error = error_of(&provider("health = \"of\""));
    assert!(
        error.contains("\"on\", \"off\", or a table of health settings"),
        "{error}"
    );
    // A word it does not know: the parser's error shows the line and the words it knows.
    let error = error_of(&provider("on_unknown_outcome = \"sometimes\""));
    assert!(
        error.contains("on_unknown_outcome = \"sometimes\"")
            && error.contains("`stop`, `retry`, `fallback`"),
        "{error}"
    );
}

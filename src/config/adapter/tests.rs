//! The `openai` and `anthropic` provider settings: URLs, keys from the environment, and
//! settings that belong to another adapter.

use crate::config::*;

const KEY: &str = "sk-test-0123456789";

fn env(name: &str) -> Option<String> {
    match name {
        "TEST_KEY" => Some(KEY.to_owned()),
        "EMPTY_KEY" => Some(String::new()),
        "NEWLINE_KEY" => Some(format!("{KEY}\n")),
        _ => None,
    }
}

fn with_provider(table: &str) -> String {
    format!(
        "[providers.p]\n{table}\n[[providers.p.models]]\nname = \"m\"\n\
         [policies.default]\ntargets = [\"p/m\"]\n[abilities.chat]\npolicy = \"default\"\n"
    )
}

fn load(table: &str) -> Result<Config, ConfigError> {
    Config::from_toml_with_env(&with_provider(table), &env)
}

fn error(table: &str) -> (String, String) {
    match load(table) {
        Err(ConfigError::Invalid { key, reason }) => (key, reason),
        other => panic!("expected an invalid key, got {other:?}"),
    }
}

#[test]
fn openai_needs_only_a_base_url() {
    let config = load("adapter = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1/\"").unwrap();
    let AdapterConfig::OpenAi(openai) = &config.providers["p"].adapter else {
        panic!("not openai");
    };
    assert_eq!(openai.endpoint.base_url, "http://127.0.0.1:8000/v1");
    assert!(openai.api_key.is_none());
    assert_eq!(openai.max_tokens_field, MaxTokensField::MaxCompletionTokens);
    assert_eq!(
        openai.endpoint.timeouts.idle,
        std::time::Duration::from_secs(30)
    );
}

#[test]
fn openai_settings_are_read() {
    let config = load(
        "adapter = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"TEST_KEY\"\n\
         max_tokens_field = \"max_tokens\"\ntimeouts = { connect = \"2s\", first_byte = \"9s\", idle = \"200ms\" }",
    )
    .unwrap();
    let AdapterConfig::OpenAi(openai) = &config.providers["p"].adapter else {
        panic!("not openai");
    };
    assert_eq!(openai.api_key.as_ref().unwrap().expose(), KEY);
    assert_eq!(openai.max_tokens_field, MaxTokensField::MaxTokens);
    assert_eq!(
        openai.endpoint.timeouts.idle,
        std::time::Duration::from_millis(200)
    );
    assert_eq!(config.providers["p"].adapter.name(), "openai");
}

#[test]
fn anthropic_reads_its_key_and_defaults() {
    let config = load(
        "adapter = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\napi_key_env = \"TEST_KEY\"",
    )
    .unwrap();
    let AdapterConfig::Anthropic(anthropic) = &config.providers["p"].adapter else {
        panic!("not anthropic");
    };
    assert_eq!(anthropic.api_key.expose(), KEY);
    assert_eq!(anthropic.version, "2023-06-01");
    assert_eq!(anthropic.default_max_output_tokens, 4096);
}

#[test]
fn keys_never_show_in_debug_output() {
    let config = load(
        "adapter = \"anthropic\"\nbase_url = \"https://api.anthropic.com/v1\"\napi_key_env = \"TEST_KEY\"",
    )
    .unwrap();
    let shown = format!("{config:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("redacted"));
}

#[test]
fn a_missing_or_unusable_key_is_a_start_up_error_naming_the_variable() {
    let (key, reason) = error(
        "adapter = \"anthropic\"\nbase_url = \"https://x/v1\"\napi_key_env = \"NOT_SET_ANYWHERE\"",
    );
    assert_eq!(key, "providers.p.api_key_env");
    assert!(reason.contains("`NOT_SET_ANYWHERE` is not set"), "{reason}");
    let (_, reason) =
        error("adapter = \"openai\"\nbase_url = \"https://x/v1\"\napi_key_env = \"EMPTY_KEY\"");
    assert!(reason.contains("`EMPTY_KEY` is empty"), "{reason}");
    let (_, reason) =
        error("adapter = \"openai\"\nbase_url = \"https://x/v1\"\napi_key_env = \"NEWLINE_KEY\"");
    assert!(reason.contains("line break"), "{reason}");
    assert!(!reason.contains(KEY));
    let (_, reason) =
        error("adapter = \"openai\"\nbase_url = \"https://x/v1\"\napi_key_env = \"sk-oops\"");
    assert!(
        reason.contains("must name an environment variable"),
        "{reason}"
    );
}

#[test]
fn anthropic_requires_a_key() {
    let (key, reason) = error("adapter = \"anthropic\"\nbase_url = \"https://x/v1\"");
    assert_eq!(key, "providers.p.api_key_env");
    assert!(reason.contains("required"), "{reason}");
}

#[test]
fn connecting_must_fit_inside_the_first_byte_wait() {
    for timeouts in [
        "{ connect = \"2s\", first_byte = \"200ms\" }",
        "{ connect = \"10m\", first_byte = \"10m\" }",
        // The default connect timeout (5s) against a shorter first_byte.
        "{ first_byte = \"3s\" }",
    ] {
        let (key, reason) = error(&format!(
            "adapter = \"openai\"\nbase_url = \"http://x/v1\"\ntimeouts = {timeouts}"
        ));
        assert_eq!(key, "providers.p.timeouts.connect", "{timeouts}");
        assert!(
            reason.contains("shorter than timeouts.first_byte"),
            "{reason}"
        );
    }
    load("adapter = \"openai\"\nbase_url = \"http://x/v1\"\ntimeouts = { connect = \"100ms\", first_byte = \"200ms\" }").unwrap();
    // The scripted adapter connects nowhere: timeouts are not its to take.
    let (key, reason) = error("adapter = \"scripted\"\ntimeouts = { first_byte = \"1s\" }");
    assert_eq!(key, "providers.p.timeouts");
    assert!(
        reason.contains("does not apply to the `scripted` adapter"),
        "{reason}"
    );
}

#[test]
fn base_urls_are_checked() {
    for (url, why) in [
        ("ftp://x/v1", "http:// or https://"),
        ("not a url", "is not a URL"),
        ("https://user:sk-secret@x/v1", "must not carry credentials"),
        ("https://x/v1?key=1", "query"),
    ] {
        let (key, reason) = error(&format!("adapter = \"openai\"\nbase_url = \"{url}\""));
        assert_eq!(key, "providers.p.base_url");
        assert!(reason.contains(why), "{url}: {reason}");
        assert!(!reason.contains("sk-secret"), "{reason}");
    }
    let (key, reason) = error("adapter = \"openai\"");
    assert_eq!(key, "providers.p.base_url");
    assert!(
        reason.contains("required for the `openai` adapter"),
        "{reason}"
    );
}

#[test]
fn settings_of_another_adapter_are_errors() {
    for (table, field) in [
        (
            "adapter = \"scripted\"\nbase_url = \"http://x\"",
            "base_url",
        ),
        (
            "adapter = \"scripted\"\napi_key_env = \"TEST_KEY\"",
            "api_key_env",
        ),
        (
            "adapter = \"openai\"\nbase_url = \"http://x\"\nanthropic_version = \"2023-06-01\"",
            "anthropic_version",
        ),
        (
            "adapter = \"openai\"\nbase_url = \"http://x\"\ndefault_max_output_tokens = 10",
            "default_max_output_tokens",
        ),
        (
            "adapter = \"anthropic\"\nbase_url = \"http://x\"\napi_key_env = \"TEST_KEY\"\nmax_tokens_field = \"max_tokens\"",
            "max_tokens_field",
        ),
    ] {
        let (key, reason) = error(table);
        assert_eq!(key, format!("providers.p.{field}"), "{table}");
        assert!(reason.contains("does not apply"), "{reason}");
    }
    let (key, _) =
        error("adapter = \"openai\"\nbase_url = \"http://x\"\nmax_tokens_field = \"tokens\"");
    assert_eq!(key, "providers.p.max_tokens_field");
    let (key, _) = error("adapter = \"grpc\"");
    assert_eq!(key, "providers.p.adapter");
}

#[test]
fn a_key_over_plain_http_goes_only_to_this_machine_unless_allowed() {
    let remote =
        "adapter = \"openai\"\nbase_url = \"http://10.0.0.7:8000/v1\"\napi_key_env = \"TEST_KEY\"";
    let (key, reason) = error(remote);
    assert_eq!(key, "providers.p.base_url");
    assert!(reason.contains("plain http"), "{reason}");
    assert!(load(&format!("{remote}\nallow_insecure_http = true")).is_ok());
    for local in ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"] {
        let table = format!(
            "adapter = \"openai\"\nbase_url = \"http://{local}/v1\"\napi_key_env = \"TEST_KEY\""
        );
        assert!(load(&table).is_ok(), "{local}");
    }
    // Without a key there is nothing to leak.
    assert!(load("adapter = \"openai\"\nbase_url = \"http://10.0.0.7:8000/v1\"").is_ok());
    assert!(load("adapter = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"TEST_KEY\"").is_ok());
}

#[test]
fn a_proxy_is_an_http_url_for_an_http_adapter() {
    let ok = "adapter = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\nproxy = \"http://proxy.internal:3128\"";
    let config = load(ok).unwrap();
    let AdapterConfig::OpenAi(openai) = &config.providers["p"].adapter else {
        panic!("openai");
    };
    assert_eq!(
        openai.endpoint.proxy.as_ref().map(ProxyUrl::expose),
        Some("http://proxy.internal:3128")
    );
    assert_eq!(
        error("adapter = \"openai\"\nbase_url = \"https://a/v1\"\nproxy = \"ftp://x\"").0,
        "providers.p.proxy"
    );
    assert_eq!(
        error("adapter = \"scripted\"\nproxy = \"http://x\"").0,
        "providers.p.proxy"
    );
}

/// A key to a plain-http target travels as it is to the proxy, so the proxy is where the
/// bytes go: it must be this machine or reached over https.
#[test]
fn a_key_over_plain_http_goes_through_no_proxy_on_another_machine_unless_allowed() {
    let local =
        "adapter = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1\"\napi_key_env = \"TEST_KEY\"";
    let remote_proxy = format!("{local}\nproxy = \"http://u:secret@10.9.9.9:3128\"");
    let (key, reason) = error(&remote_proxy);
    assert_eq!(key, "providers.p.proxy");
    assert!(reason.contains("clear text"), "{reason}");
    assert!(!reason.contains("secret"), "{reason}");
    assert!(load(&format!("{remote_proxy}\nallow_insecure_http = true")).is_ok());
    for proxy in ["https://10.9.9.9:3128", "http://127.0.0.1:3128"] {
        assert!(
            load(&format!("{local}\nproxy = \"{proxy}\"")).is_ok(),
            "{proxy}"
        );
    }
    // An https target is tunnelled through any proxy, encrypted end to end.
    let https = "adapter = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\napi_key_env = \"TEST_KEY\"\nproxy = \"http://10.9.9.9:3128\"";
    assert!(load(https).is_ok());
    // Without a key there is nothing to leak.
    assert!(load("adapter = \"openai\"\nbase_url = \"http://127.0.0.1:8000/v1\"\nproxy = \"http://10.9.9.9:3128\"").is_ok());
}

#[test]
fn proxy_credentials_never_show_in_debug_output() {
    let config = load(
        "adapter = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\nproxy = \"http://user:hunter2@proxy.internal:3128\"",
    )
    .unwrap();
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("hunter2") && !shown.contains("user:"),
        "{shown}"
    );
    assert!(shown.contains("proxy.internal:3128"), "{shown}");
}

//! Provider traffic goes through a proxy only when the configuration names one: a configured
//! `proxy` carries every request, and `HTTP_PROXY`-style variables in the environment are
//! ignored (they would send keys somewhere the configuration does not say).

use crate::common;

use common::adapters::{call, data, provider, split};
use common::process::start_server_env;
use common::upstream::{Upstream, sse};
use common::*;
use model_runtime::Config;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};
use model_runtime::pb::model_runtime_client::ModelRuntimeClient;

fn reply() -> common::upstream::Behaviour {
    sse(&[
        data(r#"{"choices":[{"index":0,"delta":{"content":"via"},"finish_reason":null}]}"#),
        data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
        data("[DONE]"),
    ])
}

fn config(provider: ProviderSpec) -> model_runtime::config::ConfigBuilder {
    Config::builder()
        .drain_timeout(std::time::Duration::from_millis(200))
        .provider("p", provider.model("m", &["text"]))
        .policy("default", PolicySpec::new(&["p/m"]))
        .ability("chat", AbilitySpec::new("default"))
}

#[tokio::test]
async fn a_configured_proxy_carries_every_request() {
    // The test server plays the proxy: a plain-http proxy gets the request in absolute form.
    let proxy = Upstream::always(reply()).await;
    let proxy_url = proxy.base_url().trim_end_matches("/v1").to_owned();
    // Nothing listens at the provider's own address: only the proxy can answer.
    let spec = ProviderSpec::openai("http://127.0.0.1:9/v1").proxy(&proxy_url);
    let built = config(spec).build_with_env(&|_| None).unwrap();
    let (events, error) = split(call(&provider(&built)).await);
    assert_eq!(error, None, "{events:?}");
    let requests = proxy.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "http://127.0.0.1:9/v1/chat/completions");
}

#[tokio::test]
async fn proxy_variables_in_the_environment_are_ignored() {
    let upstream = Upstream::always(reply()).await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        config(ProviderSpec::openai(&upstream.base_url())).to_toml(),
    )
    .unwrap();
    // A proxy that does not exist: a request sent there would fail.
    let dead = "http://127.0.0.1:9";
    let env = [
        ("HTTP_PROXY", dead),
        ("HTTPS_PROXY", dead),
        ("ALL_PROXY", dead),
        ("http_proxy", dead),
    ];
    let (_server, addr) =
        start_server_env(&["--config", file.path().to_str().unwrap()], &env, WAIT);
    let mut client = within(ModelRuntimeClient::connect(format!("http://{addr}")))
        .await
        .unwrap();
    let events = execute(&mut client, request("chat", "hi")).await;
    assert_eq!(events.last().unwrap().r#type, "execution.completed");
    assert_eq!(upstream.requests()[0].path, "/v1/chat/completions");
}

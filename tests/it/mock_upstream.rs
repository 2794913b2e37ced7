//! `model-runtime mock-upstream`, the provider `benches/provider.sh` measures against: the
//! runtime's OpenAI, Anthropic, Gemini and Bedrock adapters read its replies whole (20
//! deltas, usage, the finish), over keep-alive connections.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::process::{BIN, Guard};
use common::*;
use model_runtime::config::{AbilitySpec, PolicySpec, ProviderSpec};

fn start_mock() -> (Guard, String) {
    let mut child = Command::new(BIN)
        .args(["mock-upstream", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the mock");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .expect("the mock says where it listens")
        .to_owned();
    (Guard(child), addr)
}

#[tokio::test]
async fn the_adapters_read_the_mocks_replies_whole() {
    let (_mock, addr) = start_mock();
    let base = format!("http://{addr}/v1");
    let config = model_runtime::Config::builder()
        .provider(
            "openai",
            ProviderSpec::openai(&base).model("mock-model", &["text"]),
        )
        .provider(
            "anthropic",
            ProviderSpec::anthropic(&base)
                .api_key_env("MOCK_KEY")
                .model("mock-model", &["text"]),
        )
        .provider(
            "gemini",
            ProviderSpec::scripted()
                .adapter("gemini")
                .base_url(&base)
                .api_key_env("MOCK_KEY")
                .model("mock-model", &["text"]),
        )
        .provider(
            "bedrock",
            common::adapters::bedrock_at(&format!("http://{addr}")).model("mock-model", &["text"]),
        )
        .policy("openai", PolicySpec::new(&["openai/mock-model"]))
        .policy("anthropic", PolicySpec::new(&["anthropic/mock-model"]))
        .policy("gemini", PolicySpec::new(&["gemini/mock-model"]))
        .policy("bedrock", PolicySpec::new(&["bedrock/mock-model"]))
        .ability("openai", AbilitySpec::new("openai"))
        .ability("anthropic", AbilitySpec::new("anthropic"))
        .ability("gemini", AbilitySpec::new("gemini"))
        .ability("bedrock", AbilitySpec::new("bedrock"))
        .build_with_env(&|name| match name {
            "MOCK_KEY" => Some("k".to_owned()),
            _ => common::adapters::env(name),
        })
        .unwrap();
    let server = start_with(config).await;
    let mut c = server.client.clone();
    for ability in [
        "openai",
        "anthropic",
        "gemini",
        "bedrock",
        "openai",
        "bedrock",
    ] {
        let events = execute(&mut c, request(ability, "hello")).await;
        let types: Vec<&str> = events.iter().map(|e| e.r#type.as_str()).collect();
        let deltas = types.iter().filter(|t| **t == "output.text.delta").count();
        assert_eq!(deltas, 20, "{ability}: {types:?}");
        assert!(types.contains(&"usage.reported"), "{ability}: {types:?}");
        assert_eq!(types.last(), Some(&"execution.completed"), "{ability}");
    }
    server.stop().await;
}

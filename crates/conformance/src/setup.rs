//! The configuration an implementation loads to be checked: the kit's providers (each a path
//! of the one fault-injecting provider), and a policy and an ability per case setup. It is
//! written in this runtime's TOML (CONTRACT section 10); another implementation translates it.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::provider::Behaviour;

/// One ability and its policy, `kit-NAME` both.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub name: &'static str,
    /// `provider/model`, in order; a model is a [`Behaviour`]'s name.
    pub targets: &'static [&'static str],
    pub max_attempts: u32,
    pub retries_per_target: u32,
    pub retry_budget: &'static str,
}

const fn setup(name: &'static str, targets: &'static [&'static str]) -> Setup {
    Setup {
        name,
        targets,
        max_attempts: 3,
        retries_per_target: 0,
        retry_budget: "10s",
    }
}

/// Every setup the cases use.
pub const SETUPS: &[Setup] = &[
    setup("answer", &["kit-a/answer"]),
    setup("slow", &["kit-a/answer-slow"]),
    setup("quiet", &["kit-a/answer-quiet"]),
    setup("fallback", &["kit-a/fail-503", "kit-b/answer"]),
    setup("cut-text", &["kit-a/cut-text", "kit-b/answer"]),
    setup("cut-tool", &["kit-a/cut-tool", "kit-b/answer"]),
    setup("stall", &["kit-a/stall-text", "kit-b/answer"]),
    setup("cut-reasoning", &["kit-a/cut-reasoning", "kit-b/answer"]),
    setup("cut-usage", &["kit-a/cut-usage", "kit-b/answer"]),
    setup("rejected", &["kit-a/fail-404", "kit-b/answer"]).retries(2),
    setup("unknown", &["kit-a/silent", "kit-b/answer"]).retries(2),
    // No retries on a target: with fallback allowed the second target would be asked.
    setup("no-fallback", &["kit-a/fail-503", "kit-b/answer"]),
    // Three retryable status classes, 429 with its `Retry-After`.
    setup(
        "attempts",
        &["kit-a/fail-500", "kit-b/fail-429", "kit-c/fail-503"],
    )
    .attempts(5)
    .retries(4),
    Setup {
        retry_budget: "500ms",
        ..setup("budget", &["kit-a/fail-slow"])
            .attempts(20)
            .retries(19)
    },
    setup("order", &["kit-c/answer", "kit-a/answer", "kit-b/answer"]),
    setup("capability", &["kit-a/answer", "kit-b/answer"]),
    setup("hold", &["kit-n/answer-slow"]),
    setup("admission", &["kit-n/answer", "kit-b/answer"]),
    setup("health", &["kit-h/fail-503", "kit-b/answer"]),
];

impl Setup {
    const fn retries(mut self, retries: u32) -> Self {
        self.retries_per_target = retries;
        self
    }

    const fn attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The ability a case requests: `kit-NAME`.
    pub fn ability(name: &str) -> String {
        format!("kit-{name}")
    }
}

/// A provider table of the kit's configuration.
struct KitProvider {
    name: &'static str,
    capabilities: &'static str,
    extra: &'static str,
}

const PROVIDERS: &[KitProvider] = &[
    KitProvider {
        name: "kit-a",
        capabilities: r#"["text", "streaming", "tools"]"#,
        extra: "",
    },
    // The one provider whose models declare `vision`: the capability case's target.
    KitProvider {
        name: "kit-b",
        capabilities: r#"["text", "streaming", "tools", "vision"]"#,
        extra: "",
    },
    KitProvider {
        name: "kit-c",
        capabilities: r#"["text", "streaming", "tools"]"#,
        extra: "",
    },
    // One attempt at a time and no queue: the admission case's full provider.
    KitProvider {
        name: "kit-n",
        capabilities: r#"["text", "streaming"]"#,
        extra: "max_concurrency = 1\nqueue_capacity = 0\n",
    },
    // The one provider whose health is watched (the `--strict` ejection case).
    KitProvider {
        name: "kit-h",
        capabilities: r#"["text", "streaming"]"#,
        extra: "health = { consecutive_failures = 2, ejection = \"30s\" }\n",
    },
];

/// The configuration to load, for the kit's provider at `provider`: providers, policies and
/// abilities (an implementation adds its own server and store settings).
pub fn config(provider: SocketAddr) -> String {
    let mut toml = String::from(
        "# The conformance kit's providers, policies and abilities (model-runtime-conformance).\n\
         # Every provider is a path of the kit's one fault-injecting provider; a model's name is\n\
         # the behaviour its requests get. Add the [server] and [store] settings under test.\n",
    );
    for provider_table in PROVIDERS {
        let name = provider_table.name;
        let health = if provider_table.extra.contains("health") {
            ""
        } else {
            "health = \"off\"\n"
        };
        let _ = write!(
            toml,
            "\n[providers.{name}]\nadapter = \"openai\"\nbase_url = \"http://{provider}/{name}/v1\"\n\
             {health}{}timeouts = {{ connect = \"500ms\", first_byte = \"1s\", idle = \"1s\" }}\n",
            provider_table.extra
        );
        for behaviour in Behaviour::ALL {
            let _ = write!(
                toml,
                "[[providers.{name}.models]]\nname = \"{}\"\ncapabilities = {}\n",
                behaviour.name(),
                provider_table.capabilities
            );
        }
    }
    for setup in SETUPS {
        let ability = Setup::ability(setup.name);
        let targets: Vec<String> = setup.targets.iter().map(|t| format!("\"{t}\"")).collect();
        let _ = write!(
            toml,
            "\n[policies.{ability}]\ntargets = [{}]\nmax_attempts = {}\nretries_per_target = {}\n\
             backoff = \"1ms\"\nretry_budget = \"{}\"\n\n[abilities.{ability}]\npolicy = \"{ability}\"\n\
             requires = [\"text\"]\n",
            targets.join(", "),
            setup.max_attempts,
            setup.retries_per_target,
            setup.retry_budget,
        );
    }
    toml
}

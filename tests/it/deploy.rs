//! The deployment files agree with the server: the image's and the Kubernetes config are
//! valid and listen where the Dockerfile, the probes and the Service say; the readiness
//! probe asks for the service the server reports; the grace period outlasts the drain; the
//! three-replica variant's config is valid with the URLs its Secret gives, and keeps what the
//! base's probes and Service expect. (The files themselves were checked with hadolint and
//! kubernetes-validate --strict; neither is needed here.)

use std::path::Path;
use std::time::Duration;

use model_runtime::Config;
use model_runtime::config::StoreKind;
use model_runtime::server::SERVICE_NAME;

/// The config the Kubernetes Deployment mounts.
const KUBERNETES_CONFIG: &str = "deploy/kubernetes/config.toml";
/// The three-replica variant: an overlay of `deploy/kubernetes` (beside it, as kustomize
/// wants an overlay outside its base).
const REPLICAS: &str = "deploy/kubernetes-replicas";

fn file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The values of `key: value` lines of a YAML file, in order (quotes removed).
fn values(yaml: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}:");
    yaml.lines()
        .map(|line| line.trim().trim_start_matches("- "))
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(|value| value.trim().trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .collect()
}

/// The names of the ConfigMaps a kustomization makes.
fn config_maps(kustomization: &str) -> Vec<String> {
    values(kustomization, "name")
        .into_iter()
        .filter(|name| name.ends_with("-config"))
        .collect()
}

#[test]
fn the_image_listens_and_is_probed_where_its_config_says() {
    let config = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/config.toml"))
        .expect("the image's config is valid");
    let listen = config.server.listen.tcp().expect("a TCP address");
    let port = listen.port();
    assert!(listen.ip().is_unspecified(), "every interface");
    let dockerfile = file("Dockerfile");
    // Whatever a mounted config says, the server listens on every interface.
    assert!(dockerfile.contains(&format!("ENV MODEL_RUNTIME_LISTEN=0.0.0.0:{port}\n")));
    // What an https:// provider's certificate is verified against.
    assert!(
        dockerfile.contains("install -y --no-install-recommends ca-certificates"),
        "the runtime stage has the CA certificates"
    );
    assert!(dockerfile.contains(&format!("EXPOSE {port}\n")));
    assert!(
        dockerfile.contains(&format!(r#""health", "--addr", "127.0.0.1:{port}""#)),
        "the HEALTHCHECK asks the server's port"
    );
    assert!(dockerfile.contains("COPY deploy/config.toml /etc/model-runtime/config.toml"));
    assert!(dockerfile.contains(r#"CMD ["--config", "/etc/model-runtime/config.toml"]"#));
}

#[test]
fn the_kubernetes_probes_ports_and_grace_agree_with_the_config() {
    let config = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(KUBERNETES_CONFIG))
        .expect("the Kubernetes config is valid");
    let port = config
        .server
        .listen
        .tcp()
        .expect("a TCP address")
        .port()
        .to_string();
    let deployment = file("deploy/kubernetes/deployment.yaml");
    let metrics = config
        .server
        .metrics_listen
        .expect("the Kubernetes config serves metrics")
        .port()
        .to_string();
    assert_eq!(
        values(&deployment, "containerPort"),
        [port.clone(), metrics.clone()]
    );
    assert_eq!(values(&deployment, "prometheus.io/port"), [metrics]);
    // Liveness and readiness both probe the server's port; readiness asks for the service.
    assert_eq!(values(&deployment, "port"), [port.clone(), port.clone()]);
    assert_eq!(values(&deployment, "service"), [SERVICE_NAME]);
    let grace: u64 = values(&deployment, "terminationGracePeriodSeconds")[0]
        .parse()
        .unwrap();
    // The drain, then 5 s for cancelled work, then 5 s for open streams.
    assert!(
        Duration::from_secs(grace) > config.server.drain_timeout + Duration::from_secs(10),
        "{grace}s does not outlast a {:?} drain",
        config.server.drain_timeout
    );
    assert_eq!(values(&deployment, "mountPath"), ["/etc/model-runtime"]);
    assert!(deployment.contains(r#"args: ["--config", "/etc/model-runtime/config.toml"]"#));
    let kustomization = file("deploy/kubernetes/kustomization.yaml");
    assert_eq!(
        config_maps(&kustomization),
        values(&deployment, "name")
            .into_iter()
            .filter(|n| n.ends_with("-config"))
            .collect::<Vec<_>>(),
        "the ConfigMap the Deployment mounts is the one kustomize makes"
    );
    let service = file("deploy/kubernetes/service.yaml");
    assert_eq!(values(&service, "port"), [port]);
    assert_eq!(values(&service, "targetPort"), ["grpc"]);
}

#[test]
fn the_manifests_name_the_image_the_dockerfile_says_to_build() {
    let tag = format!("model-runtime:{}", env!("CARGO_PKG_VERSION"));
    assert!(
        file("Dockerfile").contains(&format!("docker build -t {tag} ")),
        "the Dockerfile says how {tag} is built"
    );
    let deployment = file("deploy/kubernetes/deployment.yaml");
    assert_eq!(values(&deployment, "image"), [tag.as_str()]);
    assert!(deployment.contains(&format!("docker build -t {tag} .")));
    let kustomization = file("deploy/kubernetes/kustomization.yaml");
    assert_eq!(
        values(&kustomization, "newTag"),
        [env!("CARGO_PKG_VERSION")]
    );
}

/// The image's `MODEL_RUNTIME_LISTEN` (as `docker run` sets it) overrides a mounted config's
/// `server.listen`, and the server says so.
#[test]
fn the_listen_variable_overrides_a_configs_address() {
    use crate::common::process::start_serve_logged;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    // The README's own first config listens on 127.0.0.1:50051: here, a port nobody uses.
    let text = file("src/config/default.toml").replace("127.0.0.1:50051", "127.0.0.1:1");
    std::fs::write(&config, text).unwrap();
    let (_server, addr, log) = start_serve_logged(
        &["serve", "--config", config.to_str().unwrap()],
        &[("MODEL_RUNTIME_LISTEN", "127.0.0.1:0")],
        Duration::from_secs(20),
    );
    assert_ne!(addr, "127.0.0.1:1");
    assert_eq!(
        log.matching("overrides server.listen").len(),
        1,
        "{}",
        log.tail(10)
    );
}

#[test]
fn the_three_replica_config_reads_its_urls_from_the_secret_and_keeps_the_base_ports() {
    let patch = file(&format!("{REPLICAS}/deployment.yaml"));
    let secret = file(&format!("{REPLICAS}/secret.example.yaml"));
    // Each variable the Deployment sets is a key of the Secret; the config is read with the
    // example's placeholders, so they are well-formed too.
    let secret_name = values(&secret, "name");
    assert_eq!(secret_name, ["model-runtime-urls"]);
    let names = values(&patch, "name");
    assert_eq!(
        names.iter().filter(|n| **n == secret_name[0]).count(),
        2,
        "{names:?}"
    );
    let variables: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("MODEL_RUNTIME_"))
        .collect();
    let keys = values(&patch, "key");
    assert_eq!(keys, ["postgres-url", "redis-url"]);
    let env: Vec<(&String, String)> = variables
        .into_iter()
        .zip(&keys)
        .map(|(variable, key)| (variable, values(&secret, key).remove(0)))
        .collect();
    let config = Config::from_toml_with_env(&file(&format!("{REPLICAS}/config.toml")), &|name| {
        env.iter()
            .find(|(variable, _)| *variable == name)
            .map(|(_, value)| value.clone())
    })
    .expect("the three-replica config is valid with the Secret's URLs");
    let StoreKind::Postgres(store) = &config.store.kind else {
        panic!("one store for every replica: {:?}", config.store.kind)
    };
    assert_eq!(&*store.url_env, "MODEL_RUNTIME_POSTGRES_URL");
    for provider in config.providers.values() {
        let limiter = provider
            .limiter
            .as_ref()
            .expect("one limit across replicas");
        assert_eq!(
            &*limiter.url_env, "MODEL_RUNTIME_REDIS_URL",
            "{}",
            provider.name
        );
    }
    // The base Deployment's probes, ports and grace, and its Service, are this config's too.
    let base = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(KUBERNETES_CONFIG))
        .expect("the Kubernetes config is valid");
    assert_eq!(config.server.listen, base.server.listen);
    assert_eq!(config.server.metrics_listen, base.server.metrics_listen);
    assert_eq!(config.server.drain_timeout, base.server.drain_timeout);

    assert_eq!(values(&patch, "replicas"), ["3"]);
    let budget = file(&format!("{REPLICAS}/pdb.yaml"));
    assert_eq!(values(&budget, "kind"), ["PodDisruptionBudget"]);
    assert_eq!(values(&budget, "minAvailable"), ["2"]);
    assert_eq!(
        values(&budget, "app.kubernetes.io/name"),
        ["model-runtime", "model-runtime"],
        "the budget covers the Deployment's pods"
    );
    let kustomization = file(&format!("{REPLICAS}/kustomization.yaml"));
    let resources: Vec<&str> = kustomization
        .lines()
        .skip_while(|line| *line != "resources:")
        .skip(1)
        .map_while(|line| line.strip_prefix("  - "))
        .collect();
    assert_eq!(
        resources,
        ["../kubernetes", "pdb.yaml"],
        "never the example Secret"
    );
    assert_eq!(
        config_maps(&kustomization),
        config_maps(&file("deploy/kubernetes/kustomization.yaml")),
        "the base's ConfigMap is the one replaced"
    );
    assert_eq!(values(&kustomization, "behavior"), ["replace"]);
}

#[test]
fn the_dashboard_charts_only_series_the_runtime_serves() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&file("deploy/grafana/model-runtime.json")).expect("JSON");
    // What the deployed config serves, and a file store's series too (its append latency).
    let deployed = Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(KUBERNETES_CONFIG))
        .expect("the Kubernetes config loads");
    let mut served = model_runtime::Runtime::new(deployed)
        .unwrap()
        .metrics_text()
        .expect("the deployed config serves metrics");
    let dir = tempfile::tempdir().unwrap();
    use model_runtime::config::{AbilitySpec, ConfigBuilder, PolicySpec, ProviderSpec};
    let durable = ConfigBuilder::default()
        .provider(
            "scripted",
            ProviderSpec::scripted().model("echo", &["text"]),
        )
        .policy("default", PolicySpec::new(&["scripted/echo"]))
        .ability("chat", AbilitySpec::new("default"))
        .metrics_listen("127.0.0.1:0")
        .file_store(dir.path().to_str().unwrap(), "KEY")
        .build_with_env(&|_| Some("0".repeat(64)))
        .unwrap();
    served += &model_runtime::Runtime::new(durable)
        .unwrap()
        .metrics_text()
        .unwrap();
    let mut charted = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("model_runtime_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    served
                        .lines()
                        .any(|line| line.starts_with(&format!("{name}{{"))
                            || line.starts_with(&format!("{name} "))),
                    "{}: {name} is not served",
                    panel["title"]
                );
                charted += 1;
            }
        }
    }
    assert!(charted >= 10, "{charted}");
}

/// On a machine (an image) without CA certificates, an https:// provider stops the start
/// with what to install, not only rustls's words.
#[test]
fn a_machine_without_ca_certificates_is_told_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        r#"
[providers.openai]
adapter = "openai"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"
[[providers.openai.models]]
name = "gpt-4o-mini"
capabilities = ["text", "streaming"]
[policies.default]
targets = ["openai/gpt-4o-mini"]
[abilities.chat]
policy = "default"
"#,
    )
    .unwrap();
    let missing = dir.path().join("no-certificates");
    let missing = missing.to_str().unwrap();
    // rustls-native-certs reads only these when they are set.
    let out = crate::common::process::run_env(
        &[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[
            ("OPENAI_API_KEY", "sk-test"),
            ("SSL_CERT_FILE", missing),
            ("SSL_CERT_DIR", missing),
        ],
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("providers.openai: setting up TLS"),
        "{stderr}"
    );
    assert!(stderr.contains("ca-certificates package"), "{stderr}");
}

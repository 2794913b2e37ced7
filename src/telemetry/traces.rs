//! Trace export over OTLP, configured by the standard `OTEL_*` variables and started only
//! when one of them names an endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`). Without one, no exporter, processor, task or connection
//! exists, and the spans stay at `debug`, off unless `RUST_LOG` asks for them.
//!
//! The SDK and the OTLP exporter read the rest themselves: the protocol
//! (`OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL`: `http/protobuf`, the default, or `grpc`), headers,
//! timeout, compression, the sampler (`OTEL_TRACES_SAMPLER`, parent-based by default), the
//! batch settings (`OTEL_BSP_*`) and the resource (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`; the service is `model-runtime` unless they name one).
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turns export off.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;

/// The name spans are exported under.
const SERVICE: &str = "model-runtime";

/// What the environment asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Wanted {
    /// No endpoint, or export turned off.
    Off,
    /// Export, with the exporter the environment configures.
    Otlp,
    /// A variable asks for something this build cannot do.
    Unsupported(NoExport),
}

/// Why no trace is exported though the environment asks for it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoExport {
    /// An exporter other than OTLP.
    #[error("OTEL_TRACES_EXPORTER={0}: only `otlp` (or `none`) is supported")]
    Exporter(String),
    /// An OTLP protocol this build does not speak.
    #[error("OTLP protocol `{0}`: `http/protobuf` or `grpc` are supported")]
    Protocol(String),
    /// No rustls crypto provider installed for the process (the exporter's HTTP client
    /// brings none).
    #[error(
        "the OTLP exporter needs a rustls CryptoProvider installed for the process \
         (rustls::crypto::ring::default_provider().install_default())"
    )]
    NoCryptoProvider,
    /// The exporter could not be built: its reason.
    #[error("the OTLP exporter: {0}")]
    Build(String),
}

/// What `env` asks for.
pub(super) fn wanted(env: &dyn Fn(&str) -> Option<String>) -> Wanted {
    let set = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Wanted::Off;
    }
    if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_none()
    {
        return Wanted::Off;
    }
    match set("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        None | Some("otlp") => {}
        Some("none") => return Wanted::Off,
        Some(other) => {
            return Wanted::Unsupported(NoExport::Exporter(other.to_owned()));
        }
    }
    let protocol =
        set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref().map(str::trim) {
        None | Some("http/protobuf" | "grpc") => Wanted::Otlp,
        Some(other) => Wanted::Unsupported(NoExport::Protocol(other.to_owned())),
    }
}

/// The tracer provider the environment configures. Must run inside the tokio runtime: the
/// batch processor is a task on it.
pub(super) fn provider() -> Result<SdkTracerProvider, NoExport> {
    // The exporter's HTTP client (reqwest, built without a bundled crypto provider) needs the
    // process's: the binary installs ring at start; an embedding program installs its own.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(NoExport::NoCryptoProvider);
    }
    let exporter = SpanExporter::builder()
        .build()
        .map_err(|e| NoExport::Build(e.to_string()))?;
    let processor = BatchSpanProcessor::builder(exporter, Tokio).build();
    let attributes = std::env::var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    let says = |key: &str| {
        attributes
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .any(|(k, _)| k.trim() == key)
    };
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty());
    // What the environment says (the SDK's detectors) stays; the defaults fill the rest.
    let mut resource = Resource::builder();
    if !named && !says("service.name") {
        resource = resource.with_service_name(SERVICE);
    }
    if !says("service.version") {
        resource = resource.with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ));
    }
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource.build())
        .build())
}

/// The tracer spans are exported through.
pub(super) fn tracer(provider: &SdkTracerProvider) -> opentelemetry_sdk::trace::Tracer {
    provider.tracer(SERVICE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Wanted {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wanted(&|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn export_starts_only_when_an_endpoint_is_named() {
        assert_eq!(with(&[]), Wanted::Off);
        assert_eq!(with(&[("OTEL_SERVICE_NAME", "gw")]), Wanted::Off);
        assert_eq!(with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Wanted::Off);
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(with(&[endpoint]), Wanted::Otlp);
        assert_eq!(
            with(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c:4318/v1/traces"
            )]),
            Wanted::Otlp
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            Wanted::Otlp
        );
    }

    #[test]
    fn export_can_be_turned_off_and_the_unsupported_is_named() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(
            with(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]),
            Wanted::Off
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]),
            Wanted::Off
        );
        let why = NoExport::Exporter("zipkin".into());
        assert!(
            why.to_string().contains("OTEL_TRACES_EXPORTER=zipkin"),
            "{why}"
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]),
            Wanted::Unsupported(why)
        );
        assert_eq!(
            with(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]),
            Wanted::Unsupported(NoExport::Protocol("http/json".into()))
        );
    }
}

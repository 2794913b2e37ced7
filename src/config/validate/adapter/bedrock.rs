//! `adapter = "bedrock"`: the region, and where the AWS keys come from.

use super::{Env, api_key, endpoint, invalid, one_of};
use crate::config::raw::RawProvider;
use crate::config::{
    AdapterConfig, AwsCredentials, BedrockConfig, ConfigError, ContainerCredentials, TimeoutsConfig,
};

/// The container credentials endpoint's host, which a relative URI is relative to.
const CONTAINER_HOST: &str = "http://169.254.170.2";

const FULL_URI: &str = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
const RELATIVE_URI: &str = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";

pub(super) fn bedrock(
    key: &str,
    raw: &RawProvider,
    timeouts: TimeoutsConfig,
    env: Env<'_>,
) -> Result<AdapterConfig, ConfigError> {
    let region = match raw.region.as_deref() {
        Some(r)
            if !r.is_empty()
                && r.len() <= 32
                && r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
        {
            r.to_owned()
        }
        Some(_) => {
            return Err(invalid(
                format!("{key}.region"),
                "must be an AWS region like `us-east-1` (lowercase letters, digits and `-`)",
            ));
        }
        None => {
            return Err(invalid(
                format!("{key}.region"),
                "is required for the `bedrock` adapter",
            ));
        }
    };
    let credentials = credentials(key, raw, env)?;
    let mut with_url = raw.clone();
    with_url
        .base_url
        .get_or_insert_with(|| format!("https://bedrock-runtime.{region}.amazonaws.com"));
    Ok(AdapterConfig::Bedrock(BedrockConfig {
        endpoint: endpoint(key, &with_url, timeouts)?,
        region,
        credentials,
    }))
}

/// The keys `aws_credentials` names, or (unset) the environment's when `AWS_ACCESS_KEY_ID` is
/// set, else the container endpoint's when its variables are.
fn credentials(key: &str, raw: &RawProvider, env: Env<'_>) -> Result<AwsCredentials, ConfigError> {
    let field = format!("{key}.aws_credentials");
    let set = |var: &str| env.var(var).is_some_and(|v| !v.is_empty());
    let sources = [("environment", false), ("container", true)];
    let named = one_of(
        key,
        "aws_credentials",
        "source",
        raw.aws_credentials.as_deref(),
        &sources,
    )?;
    let container = match named {
        Some(container) => container,
        None if set("AWS_ACCESS_KEY_ID") => false,
        None if set(FULL_URI) || set(RELATIVE_URI) => true,
        None => {
            return Err(invalid(
                field,
                format!(
                    "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                     run where {FULL_URI} or {RELATIVE_URI} is set"
                ),
            ));
        }
    };
    if !container {
        return Ok(AwsCredentials::Environment {
            access_key_id: api_key(&field, "AWS_ACCESS_KEY_ID", env)?,
            secret_access_key: api_key(&field, "AWS_SECRET_ACCESS_KEY", env)?,
            session_token: set("AWS_SESSION_TOKEN")
                .then(|| api_key(&field, "AWS_SESSION_TOKEN", env))
                .transpose()?,
        });
    }
    // As AWS's SDKs read them: the relative URI first.
    let url = match (
        env.var(RELATIVE_URI).filter(|v| !v.is_empty()),
        env.var(FULL_URI),
    ) {
        (Some(relative), _) if relative.starts_with('/') => format!("{CONTAINER_HOST}{relative}"),
        (Some(_), _) => {
            return Err(invalid(
                field,
                format!("{RELATIVE_URI} must start with `/`"),
            ));
        }
        (None, Some(full)) if !full.is_empty() => {
            full_uri(&field, &full, raw.allow_insecure_http)?;
            full
        }
        (None, _) => {
            return Err(invalid(
                field,
                format!("`container` needs {FULL_URI} or {RELATIVE_URI} to be set"),
            ));
        }
    };
    let token_file = env
        .var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        .filter(|v| !v.is_empty())
        .map(Into::into);
    let token = (token_file.is_none() && set("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
        .then(|| api_key(&field, "AWS_CONTAINER_AUTHORIZATION_TOKEN", env))
        .transpose()?;
    Ok(AwsCredentials::Container(ContainerCredentials {
        url,
        token,
        token_file,
    }))
}

/// A full container credentials URI as AWS's SDKs accept it: `https`, or plain `http` only to
/// this machine or the addresses ECS and EKS Pod Identity serve keys at (the authorization
/// token goes to it, and keys come back), unless `allow_insecure_http` says otherwise.
fn full_uri(field: &str, full: &str, allow_insecure_http: bool) -> Result<(), ConfigError> {
    let not_http = || {
        invalid(
            field,
            format!("{FULL_URI} is not an http(s) URL with a host"),
        )
    };
    let url = url::Url::parse(full).map_err(|_| not_http())?;
    let host = url.host().ok_or_else(not_http)?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if allow_insecure_http || container_host(&host) => Ok(()),
        "http" => Err(invalid(
            field,
            format!(
                "{FULL_URI} is plain http to a host that is neither this machine nor the \
                 ECS or EKS credentials address (169.254.170.2, 169.254.170.23, fd00:ec2::23); \
                 use https, or set allow_insecure_http = true"
            ),
        )),
        _ => Err(not_http()),
    }
}

/// Whether plain http to `host` stays on this machine or reaches the container agent.
fn container_host(host: &url::Host<&str>) -> bool {
    let agent_v4 = [[169, 254, 170, 2], [169, 254, 170, 23]];
    let agent_v6 = std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23);
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback() || agent_v4.contains(&ip.octets()),
        url::Host::Ipv6(ip) => ip.is_loopback() || *ip == agent_v6,
    }
}

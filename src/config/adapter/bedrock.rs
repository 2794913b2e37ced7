//! `adapter = "bedrock"`: AWS Bedrock's Converse API, signed with SigV4 for a region, with keys
//! from the environment or the container credentials endpoint (ECS, EKS Pod Identity).

use serde::{Deserialize, Serialize};

use super::credentials::api_key;
use super::http::{HttpEndpointConfig, RawEndpoint};
use super::{Adapter, At, name_of, one_of};
use crate::config::{ConfigError, ProviderSpec, Secret};

/// The container credentials endpoint's host, which a relative URI is relative to.
const CONTAINER_HOST: &str = "http://169.254.170.2";

const FULL_URI: &str = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
const RELATIVE_URI: &str = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";

/// `adapter = "bedrock"`.
#[derive(Debug, Clone)]
pub struct BedrockConfig {
    /// `https://bedrock-runtime.{region}.amazonaws.com` unless `base_url` says otherwise (a
    /// VPC endpoint, a test server).
    pub endpoint: HttpEndpointConfig,
    /// The AWS region requests are signed for, e.g. `us-east-1`.
    pub region: String,
    /// The keys requests are signed with.
    pub credentials: AwsCredentials,
}

/// Where a `bedrock` provider's AWS keys come from (`aws_credentials`).
#[derive(Debug, Clone)]
pub enum AwsCredentials {
    /// `environment`: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, when set,
    /// `AWS_SESSION_TOKEN`, read at start-up.
    Environment {
        access_key_id: Secret,
        secret_access_key: Secret,
        session_token: Option<Secret>,
    },
    /// `container`: the container credentials endpoint (ECS, EKS Pod Identity).
    Container(ContainerCredentials),
}

/// The container credentials endpoint, as its standard variables name it.
#[derive(Debug, Clone)]
pub struct ContainerCredentials {
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI`, or `http://169.254.170.2` followed by
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
    pub url: String,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`, sent as `Authorization`.
    pub token: Option<Secret>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`, read at every request (it is rotated);
    /// preferred to `token`.
    pub token_file: Option<std::path::PathBuf>,
}

/// The sources `aws_credentials` names: whether each is the container endpoint.
const SOURCES: [(&str, bool); 2] = [("environment", false), ("container", true)];

/// Its keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<String>,
    /// `environment` or `container`; unset, whichever the environment offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aws_credentials: Option<String>,
}

impl Adapter for BedrockConfig {
    type Raw = Raw;

    fn validate(at: &At<'_>, raw: Raw, endpoint: RawEndpoint) -> Result<Self, ConfigError> {
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
                return Err(at.invalid(
                    "region",
                    "must be an AWS region like `us-east-1` (lowercase letters, digits and `-`)",
                ));
            }
            None => return Err(at.invalid("region", "is required for the `bedrock` adapter")),
        };
        let credentials = credentials(at, &raw, endpoint.allow_insecure_http)?;
        // The requests carry a session token and a signature made with the secret key.
        let default_url = format!("https://bedrock-runtime.{region}.amazonaws.com");
        Ok(Self {
            endpoint: HttpEndpointConfig::new(at, &endpoint, Some(default_url), true)?,
            region,
            credentials,
        })
    }

    fn effective(&self, raw: &mut Raw, endpoint: &mut RawEndpoint) {
        self.endpoint.effective(endpoint);
        let container = matches!(self.credentials, AwsCredentials::Container(_));
        raw.aws_credentials = name_of(&container, &SOURCES);
    }
}

/// The keys `aws_credentials` names, or (unset) the environment's when `AWS_ACCESS_KEY_ID` is
/// set, else the container endpoint's when its variables are.
fn credentials(
    at: &At<'_>,
    raw: &Raw,
    allow_insecure_http: bool,
) -> Result<AwsCredentials, ConfigError> {
    const FIELD: &str = "aws_credentials";
    let set = |var: &str| at.env.var(var).is_some_and(|v| !v.is_empty());
    let named = one_of(
        at,
        FIELD,
        "source",
        raw.aws_credentials.as_deref(),
        &SOURCES,
    )?;
    let container = match named {
        Some(container) => container,
        None if set("AWS_ACCESS_KEY_ID") => false,
        None if set(FULL_URI) || set(RELATIVE_URI) => true,
        None => {
            return Err(at.invalid(
                FIELD,
                format!(
                    "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
                     run where {FULL_URI} or {RELATIVE_URI} is set"
                ),
            ));
        }
    };
    if !container {
        return Ok(AwsCredentials::Environment {
            access_key_id: api_key(at, FIELD, "AWS_ACCESS_KEY_ID")?,
            secret_access_key: api_key(at, FIELD, "AWS_SECRET_ACCESS_KEY")?,
            session_token: set("AWS_SESSION_TOKEN")
                .then(|| api_key(at, FIELD, "AWS_SESSION_TOKEN"))
                .transpose()?,
        });
    }
    // As AWS's SDKs read them: the relative URI first.
    let url = match (
        at.env.var(RELATIVE_URI).filter(|v| !v.is_empty()),
        at.env.var(FULL_URI),
    ) {
        (Some(relative), _) if relative.starts_with('/') => format!("{CONTAINER_HOST}{relative}"),
        (Some(_), _) => {
            return Err(at.invalid(FIELD, format!("{RELATIVE_URI} must start with `/`")));
        }
        (None, Some(full)) if !full.is_empty() => {
            full_uri(at, &full, allow_insecure_http)?;
            full
        }
        (None, _) => {
            return Err(at.invalid(
                FIELD,
                format!("`container` needs {FULL_URI} or {RELATIVE_URI} to be set"),
            ));
        }
    };
    let token_file = at
        .env
        .var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        .filter(|v| !v.is_empty())
        .map(Into::into);
    let token = (token_file.is_none() && set("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
        .then(|| api_key(at, FIELD, "AWS_CONTAINER_AUTHORIZATION_TOKEN"))
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
fn full_uri(at: &At<'_>, full: &str, allow_insecure_http: bool) -> Result<(), ConfigError> {
    let field = "aws_credentials";
    let not_http = || {
        at.invalid(
            field,
            format!("{FULL_URI} is not an http(s) URL with a host"),
        )
    };
    let url = url::Url::parse(full).map_err(|_| not_http())?;
    let host = url.host().ok_or_else(not_http)?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if allow_insecure_http || container_host(&host) => Ok(()),
        "http" => Err(at.invalid(
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

impl ProviderSpec {
    /// `region` (`bedrock`).
    pub fn region(self, region: &str) -> Self {
        self.set("region", region)
    }

    /// `aws_credentials` (`bedrock`): `environment` or `container`.
    pub fn aws_credentials(self, source: &str) -> Self {
        self.set("aws_credentials", source)
    }
}

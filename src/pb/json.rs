//! Any message of the API in protobuf's canonical JSON mapping, as `buf curl` and grpcurl
//! print it (enum names, RFC 3339 times, durations like `1.5s`, 64-bit numbers as strings,
//! fields at their default left out): read through the descriptor set the server's
//! reflection serves, so no field is rendered by hand. The CLI's `--json` and the HTTP
//! ingress's execution resource write it.

// Not generated: the house lints hold here, which `pb`'s allowances would lift.
#![warn(missing_docs, clippy::all)]

use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

/// Why a message could not be written as JSON: a fault of this build, never of the message.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// The descriptor set compiled into the binary does not decode.
    #[error("the descriptor set does not decode")]
    Descriptors,
    /// The type named is not in the descriptor set.
    #[error("`{0}` is not in the descriptor set")]
    Unknown(String),
    /// The message does not decode as the type named.
    #[error("the message does not decode as `{0}`")]
    Decode(String),
    /// Writing the JSON failed.
    #[error("writing JSON: {0}")]
    Write(#[from] serde_json::Error),
}

static POOL: LazyLock<Option<DescriptorPool>> =
    LazyLock::new(|| DescriptorPool::decode(super::FILE_DESCRIPTOR_SET).ok());

/// `message`, of the full type `name` (`model_runtime.v1.Execution`, say), as JSON: indented
/// when `pretty`, else on one line.
pub fn canonical_json(
    message: &impl prost::Message,
    name: &str,
    pretty: bool,
) -> Result<String, JsonError> {
    let pool = POOL.as_ref().ok_or(JsonError::Descriptors)?;
    let descriptor = pool
        .get_message_by_name(name)
        .ok_or_else(|| JsonError::Unknown(name.to_owned()))?;
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
        .map_err(|_| JsonError::Decode(name.to_owned()))?;
    let mut out = Vec::new();
    let options = SerializeOptions::new();
    if pretty {
        dynamic.serialize_with_options(&mut serde_json::Serializer::pretty(&mut out), &options)?;
    } else {
        dynamic.serialize_with_options(&mut serde_json::Serializer::new(&mut out), &options)?;
    }
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use crate::pb;

    #[test]
    fn an_execution_is_written_as_buf_curl_would() {
        let execution = pb::Execution {
            execution_id: "ex_1".into(),
            state: pb::ExecutionState::Succeeded.into(),
            last_sequence: 10,
            created_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            ..Default::default()
        };
        for pretty in [true, false] {
            let text =
                super::canonical_json(&execution, "model_runtime.v1.Execution", pretty).unwrap();
            assert_eq!(text.contains('\n'), pretty, "{text}");
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(json["executionId"], "ex_1");
            assert_eq!(json["state"], "EXECUTION_STATE_SUCCEEDED");
            assert_eq!(json["lastSequence"], "10");
            assert_eq!(json["createdAt"], "2023-11-14T22:13:20Z");
            assert!(json.get("ability").is_none(), "defaults are left out");
        }
    }

    #[test]
    fn a_type_not_in_the_contract_is_named() {
        let error = super::canonical_json(&pb::Execution::default(), "nope.Nope", false);
        assert_eq!(
            error.unwrap_err().to_string(),
            "`nope.Nope` is not in the descriptor set"
        );
    }
}

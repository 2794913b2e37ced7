//! Any message of the API in protobuf's canonical JSON mapping, as `buf curl` and grpcurl
//! print it (enum names, RFC 3339 times, durations like `1.5s`, 64-bit numbers as strings,
//! fields at their default left out): read through the descriptor set the server's
//! reflection serves, so no field is rendered by hand.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

use model_runtime::pb::FILE_DESCRIPTOR_SET;

fn pool() -> Result<&'static DescriptorPool, String> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(FILE_DESCRIPTOR_SET).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// `message` (of the full type `name`, e.g. `model_runtime.v1.Execution`) as indented JSON.
pub fn canonical_json(message: &impl prost::Message, name: &str) -> Result<String, String> {
    let descriptor = pool()?
        .get_message_by_name(name)
        .ok_or_else(|| format!("{name} is not in the descriptor set"))?;
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::pretty(&mut out);
    dynamic
        .serialize_with_options(&mut serializer, &SerializeOptions::new())
        .map_err(|e| e.to_string())?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {

    use model_runtime::pb;

    #[test]
    fn an_execution_prints_as_buf_curl_would() {
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
        let json: serde_json::Value = serde_json::from_str(
            &super::canonical_json(&execution, "model_runtime.v1.Execution").unwrap(),
        )
        .unwrap();
        assert_eq!(json["executionId"], "ex_1");
        assert_eq!(json["state"], "EXECUTION_STATE_SUCCEEDED");
        assert_eq!(json["lastSequence"], "10");
        assert_eq!(json["createdAt"], "2023-11-14T22:13:20Z");
        assert!(json.get("ability").is_none(), "defaults are left out");
    }
}

//! The generated wire types of `proto/model_runtime/v1`: messages and the client, those of
//! `model-runtime-client` (`crates/client`), so a caller's client and the runtime share one
//! set. The server the runtime mounts is the service layer's own, whose events are encoded
//! straight from the store; the core speaks its own types.

pub use ::model_runtime_client::pb::*;

pub mod json;

/// The encoded descriptor set of the wire contract, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("model_runtime_descriptor");

/// The field numbers of every message, generated from the .proto (`build.rs`): one module per
/// message, one constant per field. The codec's, not the API's.
#[allow(
    unreachable_pub,
    dead_code,
    reason = "generated: one constant per field, used or not"
)]
pub(crate) mod fields {
    include!(concat!(env!("OUT_DIR"), "/field_numbers.rs"));
}

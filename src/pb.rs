//! The generated wire types of `proto/model_runtime/v1`: messages, the client, and a plain
//! prost server (the bench's bare baseline uses it; the runtime serves
//! [`service::ModelRuntimeServer`](crate::service::ModelRuntimeServer), whose events are
//! encoded from the store). The core speaks its own types.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("model_runtime.v1");

/// The encoded descriptor set of the wire contract, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("model_runtime_descriptor");

/// The field numbers of every message, generated from the .proto (`build.rs`): one module per
/// message, one constant per field.
pub mod fields {
    include!(concat!(env!("OUT_DIR"), "/field_numbers.rs"));
}

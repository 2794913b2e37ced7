//! The generated wire types of `proto/model_runtime/v1`. Only `service/` and the CLI's client
//! use them; the core speaks its own types.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("model_runtime.v1");

/// The encoded descriptor set of the wire contract, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("model_runtime_descriptor");

//! Compiles `proto/` with protox (pure Rust, no system `protoc`) and writes the descriptor set
//! that server reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/model_runtime/v1/runtime.proto",
        "proto/model_runtime/v1/execution.proto",
        "proto/model_runtime/v1/events.proto",
        "proto/model_runtime/v1/input.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(files, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("model_runtime_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

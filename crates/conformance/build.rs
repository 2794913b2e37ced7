//! Compiles the repository's `proto/` (protox: pure Rust, no system `protoc`) into the
//! messages and the client the kit drives an implementation with, and the server trait a
//! small implementation of the API (the kit's own tests' broken ones) serves. The kit knows
//! the API through these files alone.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "model_runtime/v1/runtime.proto",
        "model_runtime/v1/execution.proto",
        "model_runtime/v1/events.proto",
        "model_runtime/v1/input.proto",
    ];
    println!("cargo:rerun-if-changed=../../proto");
    let descriptors = protox::compile(files, ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

//! Compiles the repository's `proto/` (protox: pure Rust, no system `protoc`) into the
//! messages, the client and a plain server trait of `model_runtime.v1`: the one Rust copy of
//! the wire types. The runtime re-exports them as its own `pb` (its own server is encoded
//! from its store, not this trait); the plain server serves the load tool's bare baseline and
//! the conformance kit's broken implementations.

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

//! Compiles the repository's `proto/` (protox: pure Rust, no system `protoc`) into the
//! messages and the client of `model_runtime.v1`: the one Rust copy of the wire types, which
//! the runtime re-exports as its own `pb`.

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
        .build_server(false)
        .compile_fds(descriptors)?;
    Ok(())
}

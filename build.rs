//! Compiles `proto/` with protox (pure Rust, no system `protoc`) and writes (the messages and
//! the client are `crates/client`'s, which `crate::pb` re-exports):
//!
//! - `server/model_runtime.v1.rs`: the server the runtime mounts, whose `ExecutionEvent` is the
//!   runtime's own `crate::service::WireEvent`, encoded straight from the store (every other
//!   message is `crate::pb`'s), and whose codec counts a request's lists before decoding it
//!   (`crate::service::codec`);
//! - `field_numbers.rs`: the field numbers of every message, as constants the hand-written
//!   event encoder uses, so the encoder names fields the .proto defines, never bare numbers;
//! - `model_runtime_descriptor.bin`: the descriptor set that server reflection serves.
//!
//! It also sets `MODEL_RUNTIME_COMMIT`, the commit `--version` shows: the variable of that
//! name when the build is given one (the container's build, which has no `.git`), else
//! `git rev-parse --short=12 HEAD`, else `unknown`.

use std::fmt::Write as _;
use std::path::PathBuf;

use prost_types::{DescriptorProto, FileDescriptorSet};

const PACKAGE: &str = "model_runtime.v1";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/model_runtime/v1/runtime.proto",
        "proto/model_runtime/v1/execution.proto",
        "proto/model_runtime/v1/events.proto",
        "proto/model_runtime/v1/input.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    commit();
    let descriptors = protox::compile(files, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("model_runtime_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    std::fs::write(out.join("field_numbers.rs"), field_numbers(&descriptors))?;
    let server = out.join("server");
    std::fs::create_dir_all(&server)?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .codec_path("crate::service::codec::Codec")
        .out_dir(server)
        .extern_path(
            ".model_runtime.v1.ExecutionEvent",
            "crate::service::WireEvent",
        )
        .extern_path(".model_runtime.v1", "crate::pb")
        .compile_fds(descriptors)?;
    Ok(())
}

/// The commit being built, for `--version`; the files that change with it are watched.
fn commit() {
    println!("cargo:rerun-if-env-changed=MODEL_RUNTIME_COMMIT");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let commit = std::env::var("MODEL_RUNTIME_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // HEAD, the branch it names and the packed refs: a commit moves one of them.
            for path in ["HEAD", "packed-refs"] {
                if let Some(file) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
                && let Some(file) = git(&["rev-parse", "--git-path", &branch])
            {
                println!("cargo:rerun-if-changed={file}");
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MODEL_RUNTIME_COMMIT={commit}");
}

/// `pub mod <message> { pub const <FIELD>: u32 = <number>; ... }` for every message of the
/// package, nested messages inside their parent's module.
fn field_numbers(set: &FileDescriptorSet) -> String {
    let mut code = String::new();
    for file in set.file.iter().filter(|f| f.package() == PACKAGE) {
        for message in &file.message_type {
            write_message(&mut code, message);
        }
    }
    code
}

fn write_message(code: &mut String, message: &DescriptorProto) {
    let _ = writeln!(
        code,
        "/// Field numbers of `{}`.\npub mod {} {{",
        message.name(),
        snake_case(message.name())
    );
    for field in &message.field {
        let _ = writeln!(
            code,
            "    /// `{}`.\n    pub const {}: u32 = {};",
            field.name(),
            field.name().to_ascii_uppercase(),
            field.number()
        );
    }
    for nested in message
        .nested_type
        .iter()
        .filter(|n| !n.options.as_ref().is_some_and(|o| o.map_entry()))
    {
        write_message(code, nested);
    }
    code.push_str("}\n");
}

fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

//! Replays every input under `fuzz/regressions/` through the fuzz targets' entry points: what
//! a fuzzer once found (or a seed that covers a shape) stays fixed. (The HTTP/1.1 client's,
//! `fuzz/regressions/h1/`, are replayed by its own crate's tests: `crates/h1/src/fuzz/tests.rs`.)

use std::path::Path;

use crate::{Config, Runtime};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    inputs
}

#[test]
fn requests() {
    let runtime = Runtime::new(Config::embedded_default().unwrap()).unwrap();
    for (name, bytes) in inputs("request") {
        eprintln!("request/{name}");
        crate::fuzz::request(&runtime, &bytes);
    }
}

#[test]
fn streams() {
    for (name, bytes) in inputs("stream") {
        eprintln!("stream/{name}");
        crate::fuzz::stream_input(&bytes);
    }
}

#[test]
fn event_streams() {
    for (name, bytes) in inputs("eventstream") {
        eprintln!("eventstream/{name}");
        crate::fuzz::eventstream_input(&bytes);
    }
}

#[test]
fn authorities() {
    for (name, bytes) in inputs("authority") {
        eprintln!("authority/{name}");
        crate::fuzz::authority_input(&bytes);
    }
}

#[test]
fn journals() {
    for (name, bytes) in inputs("journal") {
        eprintln!("journal/{name}");
        crate::fuzz::journal(&bytes);
    }
}

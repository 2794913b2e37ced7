//! An `ExecuteRequest`'s bytes, as the server takes them: counted on the wire, decoded,
//! converted and validated against the embedded default config.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use model_runtime::{Config, Runtime};

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    let config = Config::embedded_default().expect("the embedded default is valid");
    Runtime::new(config).expect("the embedded default's runtime")
});

fuzz_target!(|bytes: &[u8]| {
    model_runtime::fuzz::request(&RUNTIME, bytes);
});

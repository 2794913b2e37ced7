//! The file store's journal reader: record plaintexts decoded, and segments of genuinely
//! sealed and raw records replayed into a memory store. Never a panic on any input.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    model_runtime::fuzz::journal(bytes);
});

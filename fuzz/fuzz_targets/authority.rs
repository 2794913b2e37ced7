//! A client's HTTP/2 bytes on a Unix socket, cut into pieces at random, through the shim that
//! makes any `:authority` one h2 accepts (`server/authority/fuzz.rs` says how the input is
//! read): no panic, no more held than its bound, and the same bytes for h2 however they came.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| model_runtime::fuzz::authority_input(input));

//! A provider's response body, cut into pieces at random, through the SSE parser and each
//! adapter's decoder (`provider::fuzz::stream_input` says how the input is read).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| model_runtime::fuzz::stream_input(input));

//! A provider's HTTP/1.1 response, cut into pieces at random, through the runtime's client:
//! the head parser, the body's framing and the pool's reuse decision, against the same bytes
//! fed whole (`h1::fuzz::input` says how the input is read).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| h1::fuzz::input(input));

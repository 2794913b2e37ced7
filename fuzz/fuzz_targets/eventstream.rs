//! A Bedrock response body in AWS's binary event stream, cut into pieces at random, through
//! the event-stream parser and the Converse decoder (`provider::fuzz::eventstream_input` says
//! how the input is read).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| model_runtime::fuzz::eventstream_input(input));

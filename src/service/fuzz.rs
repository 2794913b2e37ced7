//! Entry points for the fuzzers (`fuzz/`) and the regression tests of what they found: not
//! an API.

use prost::Message;

use super::codec::Counted;
use super::decode;
use crate::pb;
use crate::runtime::Runtime;

/// A request's bytes as the server takes them: counted on the wire, decoded, converted and
/// validated against `runtime`'s config. Panics only if one of them does.
pub fn request(runtime: &Runtime, bytes: &[u8]) {
    if pb::ExecuteRequest::count(bytes).is_err() {
        return;
    }
    let Ok(wire) = pb::ExecuteRequest::decode(bytes) else {
        return;
    };
    if let Ok(request) = decode::execute_request(wire) {
        let _ = runtime.check(&request);
    }
}

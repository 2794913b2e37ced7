//! The fuzz targets' entry points (`fuzz/fuzz_targets/`), each beside what it fuzzes: public
//! with the `fuzzing` feature, and not part of the API.

pub use crate::provider::fuzz::{eventstream_input, stream_input};
pub use crate::server::authority_input;
pub use crate::service::fuzz::request;
pub use crate::store::fuzz::journal;

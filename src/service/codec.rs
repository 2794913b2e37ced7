//! The codec of the generated server: prost's encoder, and a decoder that counts a request's
//! lists on the wire before it builds anything.
//!
//! A message's wire size is bounded (`limits::max_request_bytes`), but not what decoding it
//! builds: an empty message or content part is two bytes on the wire and a hundred in memory,
//! so a 1 MiB request of them would decode to some 50 MiB. The decoder walks the bytes first
//! ([`scan`]) and refuses a request over the caps of `runtime::limits` with the same field
//! violation validation would give, before one element is allocated. A message that is not
//! valid protobuf is the caller's error: `INVALID_ARGUMENT`, not tonic's `INTERNAL`. A
//! compressed request reaches the decoder inflated (within the same bound: `compression`),
//! so it is counted as a plain one is.

mod scan;

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec as TonicCodec, DecodeBuf, Decoder as TonicDecoder};
use tonic_prost::ProstEncoder;

use crate::pb;

/// A request type whose lists are counted on the wire before it is decoded.
pub(crate) trait Counted: Message + Default {
    /// Checks the encoded message's lists against their caps.
    fn count(bytes: &[u8]) -> Result<(), Status> {
        let _ = bytes;
        Ok(())
    }
}

impl Counted for pb::ExecuteRequest {
    fn count(bytes: &[u8]) -> Result<(), Status> {
        scan::execute_request(bytes)
    }
}

impl Counted for pb::WatchRequest {}
impl Counted for pb::GetExecutionRequest {}
impl Counted for pb::CancelExecutionRequest {}
impl Counted for pb::GetRuntimeMetadataRequest {}
impl Counted for pb::StreamUsageRequest {}

/// Encodes `T` as prost does; decodes `U` after counting it.
#[derive(Debug)]
pub(crate) struct Codec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> TonicCodec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Counted + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = Decoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        Decoder(PhantomData)
    }
}

/// See [`Codec`].
#[derive(Debug)]
pub(crate) struct Decoder<U>(PhantomData<U>);

impl<U: Counted> TonicDecoder for Decoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // A gRPC message arrives whole in one contiguous buffer.
        let bytes = bytes::Buf::chunk(buf);
        U::count(bytes)?;
        U::decode(buf).map(Some).map_err(|_| {
            Status::invalid_argument("the request is not a valid protobuf message of its type")
        })
    }
}

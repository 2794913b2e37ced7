//! Where a hand-written event's fields go: counted ([`Len`]) or written ([`Put`]), by the
//! same code.

use prost::bytes::BufMut;
use prost::encoding::{WireType, encoded_len_varint, key_len};

use super::Fields;

/// A protobuf encoder's primitives. proto3 leaves fields at their default (0, "") out.
pub(super) trait Sink {
    /// A length-delimited field's key and length; its `len` bytes follow.
    fn key(&mut self, field: u32, len: usize);
    fn uint(&mut self, field: u32, value: u64);
    fn text(&mut self, field: u32, value: &str);
    /// An element of a repeated string, present even when empty.
    fn item(&mut self, field: u32, value: &str) {
        self.key(field, value.len());
        self.bytes_of(value);
    }
    /// The bytes of a string whose key and length are written (nothing when counting).
    fn bytes_of(&mut self, value: &str);
    /// A message field, present even when empty (as prost writes a `Some` message).
    fn message(&mut self, field: u32, value: &impl Fields);
}

/// The encoded length of a message's fields.
fn measure(value: &impl Fields) -> usize {
    let mut len = Len(0);
    value.fields(&mut len);
    len.0
}

/// Counts bytes. `key` counts the content too, which is written after it.
pub(super) struct Len(pub(super) usize);

impl Sink for Len {
    fn key(&mut self, field: u32, len: usize) {
        self.0 += key_len(field) + encoded_len_varint(len as u64) + len;
    }

    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.0 += key_len(field) + encoded_len_varint(value);
        }
    }

    fn text(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.key(field, value.len());
        }
    }

    fn bytes_of(&mut self, _value: &str) {
        // `key` counted them.
    }

    fn message(&mut self, field: u32, value: &impl Fields) {
        self.key(field, measure(value));
    }
}

/// Writes bytes. Keys, lengths, numbers and short strings gather in a small buffer that goes
/// out in one copy: a varint written byte by byte into a `BytesMut` checks its capacity at
/// every byte, which cost more than the rest of the encoding. Call `flush` at the end.
pub(super) struct Put<'a, B> {
    buf: &'a mut B,
    scratch: [u8; SCRATCH],
    used: usize,
}

/// Room for an event's fields up to its payload's text: id, sequence, time, type, state.
const SCRATCH: usize = 128;

impl<'a, B: BufMut> Put<'a, B> {
    pub(super) fn new(buf: &'a mut B) -> Self {
        Self {
            buf,
            scratch: [0; SCRATCH],
            used: 0,
        }
    }

    #[inline(always)]
    fn varint(&mut self, mut value: u64) {
        // A u64 takes at most ten bytes.
        if SCRATCH - self.used < 10 {
            self.flush();
        }
        // A key is a constant below 128 once inlined: one byte, the rest folds away.
        if value < 0x80 {
            self.scratch[self.used] = value as u8;
            self.used += 1;
            return;
        }
        // Its length first, so the bytes go into one checked slice: indexing the scratch a
        // byte at a time (a bounds check and a store of `used` per byte) cost three times as
        // much, and a timestamp's two five-byte numbers are in every event.
        let len = encoded_len_varint(value);
        let out = &mut self.scratch[self.used..self.used + len];
        for byte in &mut out[..len - 1] {
            *byte = (value as u8) | 0x80;
            value >>= 7;
        }
        out[len - 1] = value as u8;
        self.used += len;
    }

    #[inline(always)]
    fn bytes(&mut self, bytes: &[u8]) {
        if let Some(room) = self.scratch.get_mut(self.used..self.used + bytes.len()) {
            room.copy_from_slice(bytes);
            self.used += bytes.len();
        } else {
            self.flush().put_slice(bytes);
        }
    }

    /// The first `len` of `bytes`, copied whole (a copy of a known size is a few moves,
    /// one of a varying size a call).
    #[inline(always)]
    pub(super) fn fixed<const N: usize>(&mut self, bytes: &[u8; N], len: usize) {
        if SCRATCH - self.used < N {
            self.flush();
        }
        self.scratch[self.used..self.used + N].copy_from_slice(bytes);
        self.used += len;
    }

    /// Sends what is gathered on; returns the buffer, to write to directly.
    pub(super) fn flush(&mut self) -> &mut B {
        if self.used > 0 {
            self.buf.put_slice(&self.scratch[..self.used]);
            self.used = 0;
        }
        self.buf
    }
}

impl<B: BufMut> Sink for Put<'_, B> {
    #[inline(always)]
    fn key(&mut self, field: u32, len: usize) {
        self.varint(u64::from(field << 3 | WireType::LengthDelimited as u32));
        self.varint(len as u64);
    }

    #[inline(always)]
    fn uint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.varint(u64::from(field << 3 | WireType::Varint as u32));
            self.varint(value);
        }
    }

    #[inline(always)]
    fn text(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.key(field, value.len());
            self.bytes(value.as_bytes());
        }
    }

    fn bytes_of(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }

    fn message(&mut self, field: u32, value: &impl Fields) {
        self.key(field, measure(value));
        value.fields(self);
    }
}

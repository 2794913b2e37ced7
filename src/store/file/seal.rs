//! Sealing: every record of the journal is encrypted and authenticated with
//! XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`).
//!
//! A segment starts with a header naming the key that sealed it (by id, never by its bytes),
//! its number and a 16-byte random nonce prefix drawn when the segment was opened; the header
//! is authenticated by a tag of its own. A record's nonce is that prefix and the record's
//! counter (0, 1, 2, ... within the segment), so a nonce is never used twice: each segment has
//! its own random prefix and counts its own records. A record's header (its segment number,
//! length and counter) is the associated data of its seal, so a record moved to another
//! segment or place, or cut short, does not open.
//!
//! After the header come two tally slots: what the segment vouches for, rewritten in place
//! with every write (`segment.rs` says why and when). A slot is authenticated by a tag of its
//! own, over its fields and the segment's number, under the nonce of its own sequence number,
//! so no nonce serves twice: records count up from 0, tallies from 2^63, the header is 2^64-1.
//!
//! ```text
//! segment header (64 bytes): magic "MRJRNL\0\x01" | version u32 | kind u32 | key id [8]
//!                            | segment u64 | nonce prefix [16]
//!                            | tag [16] (authenticates the 48 bytes before it)
//! tally slot (48 bytes) x 2: sequence u64 | durable u64 | written u64 | next u64 | tag [16]
//! record: length u32 | counter u64 | check u32 | ciphertext [length] | tag [16]
//! ```
//! Integers are little-endian. `check` is FNV-1a of the record's first 12 bytes: a length
//! that was never written (a torn tail) is told apart from one that was, before it is trusted.
//! A slot never written is all zeros, and does not authenticate.

use std::fmt;

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};

use crate::config::StoreKey;

pub(super) const MAGIC: [u8; 8] = *b"MRJRNL\0\x01";
/// The format new segments are written in. Version 2 added the tally; version 3 writes the
/// events every execution appends (its routing plan, each attempt's start and usage facts, its
/// result) compact (`codec.rs`), and reads version 2's segments as they are. Version 1 (an
/// unreleased development format) is refused.
pub(super) const VERSION: u32 = 3;
/// The earliest format read.
pub(super) const EARLIEST: u32 = 2;
pub(super) const HEADER_LEN: usize = 64;
/// The header's authenticated fields end here; its tag follows.
const FIELDS: usize = 48;
/// One tally slot; the two follow the header.
pub(super) const TALLY_LEN: usize = 48;
/// Where a segment's records begin: after its header and its two tally slots.
pub(super) const RECORDS_AT: usize = HEADER_LEN + 2 * TALLY_LEN;
/// Tally nonces count from here: above every record counter, below the header's.
const TALLY_NONCES: u64 = 1 << 63;
pub(super) const RECORD_HEAD: usize = 16;
pub(super) const TAG_LEN: usize = 16;
/// What a segment file holds: appends as they came, or a compaction's base, which holds
/// everything up to its number (the segments before it, and the one of its number, are
/// spent once it exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Segment = 0,
    Base = 1,
}

/// What a segment vouches for: how many of its records must be there, and which segment
/// follows it. Rewritten with every write of the segment (`segment.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// Counts the tally's writes; the slot with the higher one is the segment's tally.
    pub sequence: u64,
    /// Records that were durable before the last write began: none may be missing.
    pub durable: u64,
    /// Records once the last write is durable.
    pub written: u64,
    /// The file that follows this one (0: none yet); once set, the segment is complete.
    pub next: u64,
}

/// A key's public name: the first 8 bytes of the tag the key puts on an empty message under
/// a fixed nonce. It tells keys apart and says nothing of the key; a segment's header names
/// the key that sealed it by it, and so do errors (16 hex digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub(super) [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// One key, ready to seal and open.
#[derive(Clone)]
pub(super) struct Sealer {
    cipher: XChaCha20Poly1305,
    id: KeyId,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealer({})", self.id)
    }
}

/// Why a record did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unauthentic;

impl Sealer {
    pub(super) fn new(key: &StoreKey) -> Self {
        let cipher = XChaCha20Poly1305::new(&Key::from(*key.expose()));
        let mut empty = [0u8; 0];
        let tag = cipher
            .encrypt_inout_detached(
                &XNonce::default(),
                b"model-runtime store key id",
                (&mut empty[..]).into(),
            )
            .map(|tag| {
                let mut id = [0; 8];
                id.copy_from_slice(&tag[..8]);
                id
            })
            .unwrap_or_default();
        Self {
            cipher,
            id: KeyId(tag),
        }
    }

    pub(super) fn id(&self) -> KeyId {
        self.id
    }

    /// A segment's header, its fields authenticated by its tag.
    pub(super) fn header(&self, kind: Kind, segment: u64, prefix: [u8; 16]) -> [u8; HEADER_LEN] {
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(kind as u32).to_le_bytes());
        header[16..24].copy_from_slice(&self.id.0);
        header[24..32].copy_from_slice(&segment.to_le_bytes());
        header[32..FIELDS].copy_from_slice(&prefix);
        self.tag_header(&mut header);
        header
    }

    /// Authenticates `header`'s fields with its tag.
    fn tag_header(&self, header: &mut [u8; HEADER_LEN]) {
        let tag = self.seal(
            &nonce(header_prefix(header), u64::MAX),
            &header[..FIELDS],
            &mut [],
        );
        header[FIELDS..].copy_from_slice(&tag);
    }

    /// `header` (as [`Sealer::header`] made it) as a segment of format `version` has it.
    #[cfg(test)]
    pub(super) fn restamp(&self, header: &mut [u8; HEADER_LEN], version: u32) {
        header[8..12].copy_from_slice(&version.to_le_bytes());
        self.tag_header(header);
    }

    /// Whether `header` (as [`Sealer::header`] made it) is authentic under this key.
    pub(super) fn check_header(&self, header: &[u8; HEADER_LEN]) -> Result<(), Unauthentic> {
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&header[FIELDS..]);
        self.open(
            &nonce(header_prefix(header), u64::MAX),
            &header[..FIELDS],
            &mut [],
            &tag,
        )
    }

    /// Tally slot `tally` of `segment`, its fields authenticated by its tag.
    pub(super) fn seal_tally(
        &self,
        segment: u64,
        prefix: [u8; 16],
        tally: &Tally,
    ) -> [u8; TALLY_LEN] {
        let mut slot = [0u8; TALLY_LEN];
        slot[..8].copy_from_slice(&tally.sequence.to_le_bytes());
        slot[8..16].copy_from_slice(&tally.durable.to_le_bytes());
        slot[16..24].copy_from_slice(&tally.written.to_le_bytes());
        slot[24..32].copy_from_slice(&tally.next.to_le_bytes());
        let tag = self.seal(
            &nonce(prefix, tally_nonce(tally.sequence)),
            &tally_associated(segment, &slot),
            &mut [],
        );
        slot[32..].copy_from_slice(&tag);
        slot
    }

    /// The tally a slot of `segment` holds, if it authenticates.
    pub(super) fn open_tally(
        &self,
        segment: u64,
        prefix: [u8; 16],
        slot: &[u8; TALLY_LEN],
    ) -> Option<Tally> {
        let field = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&slot[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        let tally = Tally {
            sequence: field(0),
            durable: field(8),
            written: field(16),
            next: field(24),
        };
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&slot[32..]);
        self.open(
            &nonce(prefix, tally_nonce(tally.sequence)),
            &tally_associated(segment, slot),
            &mut [],
            &tag,
        )
        .ok()
        .filter(|_| tally.durable <= tally.written)
        .map(|()| tally)
    }

    /// Seals `body` in place as record `counter` of `segment`; appends the record to `out`.
    pub(super) fn seal_record(
        &self,
        segment: u64,
        prefix: [u8; 16],
        counter: u64,
        body: &[u8],
        out: &mut Vec<u8>,
    ) {
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        let head = record_head(len, counter);
        out.extend_from_slice(&head);
        let start = out.len();
        out.extend_from_slice(body);
        let tag = self.seal(
            &nonce(prefix, counter),
            &associated(segment, len, counter),
            &mut out[start..],
        );
        out.extend_from_slice(&tag);
    }

    /// Opens record `counter` of `segment` in place: `body` is its ciphertext.
    pub(super) fn open_record(
        &self,
        segment: u64,
        prefix: [u8; 16],
        counter: u64,
        body: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), Unauthentic> {
        let len = u32::try_from(body.len()).map_err(|_| Unauthentic)?;
        self.open(
            &nonce(prefix, counter),
            &associated(segment, len, counter),
            body,
            tag,
        )
    }

    fn seal(&self, nonce: &XNonce, associated: &[u8], body: &mut [u8]) -> [u8; TAG_LEN] {
        // Sealing fails only for a message longer than the cipher's limit (256 GiB); records
        // are bounded far below it.
        let tag = self
            .cipher
            .encrypt_inout_detached(nonce, associated, body.into())
            .unwrap_or_default();
        let mut out = [0; TAG_LEN];
        out.copy_from_slice(&tag);
        out
    }

    fn open(
        &self,
        nonce: &XNonce,
        associated: &[u8],
        body: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), Unauthentic> {
        self.cipher
            .decrypt_inout_detached(nonce, associated, body.into(), &Tag::from(*tag))
            .map_err(|_| Unauthentic)
    }
}

/// The nonce prefix a header holds.
pub(super) fn header_prefix(header: &[u8; HEADER_LEN]) -> [u8; 16] {
    let mut prefix = [0u8; 16];
    prefix.copy_from_slice(&header[32..FIELDS]);
    prefix
}

/// The kind a header names, if it is one.
pub(super) fn header_kind(header: &[u8; HEADER_LEN]) -> Option<Kind> {
    match u32::from_le_bytes([header[12], header[13], header[14], header[15]]) {
        0 => Some(Kind::Segment),
        1 => Some(Kind::Base),
        _ => None,
    }
}

/// The key id a header names.
pub(super) fn header_key(header: &[u8; HEADER_LEN]) -> KeyId {
    let mut id = [0u8; 8];
    id.copy_from_slice(&header[16..24]);
    KeyId(id)
}

/// The segment number a header names.
pub(super) fn header_segment(header: &[u8; HEADER_LEN]) -> u64 {
    let mut segment = [0u8; 8];
    segment.copy_from_slice(&header[24..32]);
    u64::from_le_bytes(segment)
}

fn nonce(prefix: [u8; 16], counter: u64) -> XNonce {
    let mut nonce = [0u8; 24];
    nonce[..16].copy_from_slice(&prefix);
    nonce[16..].copy_from_slice(&counter.to_le_bytes());
    XNonce::from(nonce)
}

/// A tally's nonce counter: its sequence, above every record's and below the header's (a
/// sequence never reaches 2^62: that would take a write per nanosecond for 146 years).
fn tally_nonce(sequence: u64) -> u64 {
    TALLY_NONCES | (sequence & ((1 << 62) - 1))
}

/// What a tally's tag authenticates: the segment's number and the slot's fields.
fn tally_associated(segment: u64, slot: &[u8; TALLY_LEN]) -> [u8; 40] {
    let mut ad = [0u8; 40];
    ad[..8].copy_from_slice(&segment.to_le_bytes());
    ad[8..].copy_from_slice(&slot[..32]);
    ad
}

fn associated(segment: u64, len: u32, counter: u64) -> [u8; 20] {
    let mut ad = [0u8; 20];
    ad[..8].copy_from_slice(&segment.to_le_bytes());
    ad[8..12].copy_from_slice(&len.to_le_bytes());
    ad[12..].copy_from_slice(&counter.to_le_bytes());
    ad
}

/// A record's plaintext head: length, counter and their check.
pub(super) fn record_head(len: u32, counter: u64) -> [u8; RECORD_HEAD] {
    let mut head = [0u8; RECORD_HEAD];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..12].copy_from_slice(&counter.to_le_bytes());
    let check = fnv1a(&head[..12]);
    head[12..].copy_from_slice(&check.to_le_bytes());
    head
}

/// A record head's length and counter, if its check holds.
pub(super) fn parse_head(head: &[u8; RECORD_HEAD]) -> Option<(u32, u64)> {
    let mut check = [0u8; 4];
    check.copy_from_slice(&head[12..]);
    if fnv1a(&head[..12]) != u32::from_le_bytes(check) {
        return None;
    }
    let mut len = [0u8; 4];
    len.copy_from_slice(&head[..4]);
    let mut counter = [0u8; 8];
    counter.copy_from_slice(&head[4..12]);
    Some((u32::from_le_bytes(len), u64::from_le_bytes(counter)))
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash: u32, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

//! Execution ids: a time-ordered UUID (version 7) shown as `ex_` followed by 32 lowercase hex
//! digits; and the maps keyed by ids or by configured names, which need no flood-resistant
//! hash.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::str::FromStr;
use std::sync::Arc;

use uuid::Uuid;

const PREFIX: &str = "ex_";
/// The text form's length: the prefix and a UUID's 32 hex digits.
const TEXT_LEN: usize = PREFIX.len() + 32;
/// The random bytes a version 7 UUID takes (74 bits of them are kept).
const RANDOM_BYTES: usize = 10;

/// The identity of one execution. Cheap to copy; unguessable (74 random bits); ids made in a
/// later millisecond order after.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId(Uuid);

impl ExecutionId {
    /// A fresh id: a version 7 UUID, the millisecond it was made and then 74 bits of the
    /// operating system's random source. Ids made close in time sit close in a B-tree, so a
    /// database's indexes of them take new ones at one end, not at random pages (a
    /// PostgreSQL replica's creates took the database half the time that way; BENCHMARKS.md).
    pub fn new() -> Self {
        Self::at(std::time::SystemTime::now())
    }

    /// A fresh id made at `time` (a caller that has read the clock already passes its time).
    pub fn at(time: std::time::SystemTime) -> Self {
        let random = random_pool::next().unwrap_or_else(|| {
            let mut random = [0; RANDOM_BYTES];
            random.copy_from_slice(&Uuid::new_v4().as_bytes()[..RANDOM_BYTES]);
            random
        });
        let millis = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self(uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid())
    }

    /// The id's 16 bytes, as a journal stores it.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.into_bytes()
    }

    /// The id of 16 bytes from [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(Uuid::from_bytes(bytes))
    }

    /// The text form, written on the stack and copied once into its string (`to_string`
    /// would go through the formatting machinery).
    pub fn to_text(self) -> String {
        self.write_text(&mut [0; TEXT_LEN]).to_owned()
    }

    /// The text form in one shared allocation (the events of a stream share it).
    pub fn to_shared_text(self) -> Arc<str> {
        Arc::from(self.write_text(&mut [0; TEXT_LEN]))
    }

    /// Writes the text form into `buf`: the prefix, then 32 lowercase hex digits.
    fn write_text(self, buf: &mut [u8; TEXT_LEN]) -> &str {
        let (prefix, hex) = buf.split_at_mut(PREFIX.len());
        prefix.copy_from_slice(PREFIX.as_bytes());
        self.0.simple().encode_lower(hex);
        // ASCII throughout, so never the fallback.
        std::str::from_utf8(buf).unwrap_or(PREFIX)
    }
}

/// Random bytes for ids, fetched from the OS a few kilobytes at a time per thread instead of
/// one `getrandom` system call per id. The bytes are the OS's own, each used once.
mod random_pool {
    use super::{RANDOM_BYTES, RefCell};

    const IDS: usize = 256;

    struct Pool {
        bytes: [[u8; RANDOM_BYTES]; IDS],
        used: usize,
    }

    thread_local! {
        static POOL: RefCell<Pool> = const {
            RefCell::new(Pool { bytes: [[0; RANDOM_BYTES]; IDS], used: IDS })
        };
    }

    /// An id's fresh random bytes, or `None` if the OS would not give any.
    pub(super) fn next() -> Option<[u8; RANDOM_BYTES]> {
        POOL.with_borrow_mut(|pool| {
            if pool.used == IDS {
                getrandom::fill(pool.bytes.as_flattened_mut()).ok()?;
                pool.used = 0;
            }
            let bytes = std::mem::take(&mut pool.bytes[pool.used]);
            pool.used += 1;
            Some(bytes)
        })
    }
}

impl Default for ExecutionId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        f.write_str(self.0.simple().encode_lower(&mut Uuid::encode_buffer()))
    }
}

impl fmt::Debug for ExecutionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A map keyed by execution id. Nobody outside chooses ids, and each ends in 62 of the OS's
/// random bits (the last word the hasher folds in), so their own bits are a good hash and
/// SipHash's flood resistance buys nothing here.
pub(crate) type IdMap<V> = HashMap<ExecutionId, V, BuildHasherDefault<FoldHasher>>;

/// A map keyed by a configured name (an ability, a policy, a model). Only the configuration
/// puts names in it; a caller's request only looks one up, and a lookup cannot flood a table,
/// so SipHash's flood resistance buys nothing here either.
pub(crate) type NameMap<V> = HashMap<Arc<str>, V, BuildHasherDefault<FoldHasher>>;

/// Folds what it is fed into a word, eight bytes at a time (an id: its 16 bytes and their
/// length; a name: its bytes and an end mark), multiplying to spread the bits, as
/// `FxHasher` does. A last piece shorter than eight bytes is padded with zeros, so a name
/// and the same name with a NUL after it collide: a collision, never a wrong answer.
#[derive(Debug, Default)]
pub(crate) struct FoldHasher(u64);

impl Hasher for FoldHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A string that is not an execution id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("is not an execution id: expected `ex_` followed by 32 lowercase hex digits")]
pub struct MalformedId;

impl FromStr for ExecutionId {
    type Err = MalformedId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix(PREFIX).ok_or(MalformedId)?;
        let well_formed = hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(MalformedId);
        }
        Uuid::parse_str(hex).map(Self).map_err(|_| MalformedId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_its_text_form() {
        let id = ExecutionId::new();
        let text = id.to_string();
        assert!(text.starts_with("ex_") && text.len() == 35, "{text}");
        assert_eq!(text.parse::<ExecutionId>(), Ok(id));
        assert_eq!(id.to_text(), text);
        assert_eq!(&*id.to_shared_text(), text);
    }

    #[test]
    fn ids_are_version_7_and_distinct_across_pool_refills() {
        let ids: std::collections::HashSet<ExecutionId> =
            (0..1000).map(|_| ExecutionId::new()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| id.0.get_version_num() == 7));
    }

    #[test]
    fn an_id_made_in_a_later_millisecond_orders_after() {
        let first = ExecutionId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = ExecutionId::new();
        assert!(first < later, "{first} {later}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let (seconds, nanos) = later.0.get_timestamp().unwrap().to_unix();
        let made = u128::from(seconds) * 1000 + u128::from(nanos / 1_000_000);
        assert!(made <= now && now - made < 60_000, "{made} {now}");
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "ex_",
            "ex_123",
            "EX_0123456789abcdef0123456789abcdef",
            "ex_0123456789ABCDEF0123456789ABCDEF",
            "ex_0123456789abcdef0123456789abcdeg",
            "0123456789abcdef0123456789abcdef",
            "ex_0123456789abcdef0123456789abcdef0",
        ] {
            assert_eq!(bad.parse::<ExecutionId>(), Err(MalformedId), "{bad:?}");
        }
    }
}

//! Entry points for the journal's fuzzer (`fuzz/`, target `journal`) and the regression
//! tests of what it finds: not an API. They panic on what they find.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::codec;
use super::error::OpenError;
use super::replay;
use super::seal::{Kind, Sealer};
use super::segment::{self, Segment};
use crate::config::StoreKey;
use crate::store::{MemoryStore, StoreLimits};

/// A fuzzer's input. The first byte picks what it is:
/// - even: a record's plaintext, decoded, and the same bytes as one event's payload (an error
///   or a record or event; what decodes must encode back to something that decodes the same);
/// - odd: a segment's records area after a genuine header, with every record whose head
///   says so sealed genuinely (so a reader gets past authentication to decoding and to the
///   memory store's state machine), replayed into a store. Replay may refuse it, never panic.
pub fn journal(input: &[u8]) {
    let Some((&mode, bytes)) = input.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        plaintext(bytes);
    } else {
        let _ = segment(bytes);
    }
}

fn plaintext(bytes: &[u8]) {
    // The same bytes as one event's payload, as the PostgreSQL store keeps it.
    if let Ok(payload) = codec::decode_event(bytes) {
        let mut again = Vec::new();
        codec::event(&payload, &mut again);
        assert_eq!(
            codec::decode_event(&again).as_ref(),
            Ok(&payload),
            "a decoded event encodes to one that decodes differently"
        );
    }
    let Ok(record) = codec::decode(bytes) else {
        return;
    };
    let mut again = Vec::new();
    codec::encode(&record, &mut again);
    assert_eq!(
        codec::decode(&again).as_ref(),
        Ok(&record),
        "a decoded record encodes to one that decodes differently"
    );
}

/// The records area is pieces of `flag u8 | length u16 | bytes`: an even flag seals the
/// bytes as the next record, an odd one writes them raw (a head and body the reader must
/// judge). A piece cut short by the input's end is taken as it is.
fn segment(bytes: &[u8]) -> Option<Result<u64, OpenError>> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "model-runtime-fuzz-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::create_dir_all(&dir).is_err() {
        return None;
    }
    let key = StoreKey::parse(&[9u8; 32], "fuzz").unwrap_or_else(|e| panic!("{e}"));
    let sealer = Sealer::new(&key);
    let path = segment::path(&dir, Kind::Segment, 1);
    let written = Segment::create(&path, Kind::Segment, 1, &sealer).and_then(|mut out| {
        let mut sealed = Vec::new();
        let mut rest = bytes;
        while let [flag, a, b, tail @ ..] = rest {
            let len = usize::from(u16::from_le_bytes([*a, *b])).min(tail.len());
            let (piece, after) = tail.split_at(len);
            if flag % 2 == 0 {
                out.seal(&sealer, piece, &mut sealed);
            } else {
                sealed.extend_from_slice(piece);
            }
            rest = after;
        }
        out.write(&sealer, &sealed)
    });
    let replayed = written.is_ok().then(|| {
        let memory = MemoryStore::new(StoreLimits {
            max_executions: 1000,
            max_bytes: 1 << 30,
            retention: Duration::from_secs(60),
        });
        replay::replay(&dir, std::slice::from_ref(&sealer), &memory, false).map(|r| r.events)
    });
    let _ = std::fs::remove_dir_all(&dir);
    replayed
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::*;
    use crate::execution::fixtures as f;
    use crate::execution::{ExecutionId, Fingerprint, Idempotency};

    /// A segment input (mode odd) of `records`, each sealed.
    fn segment_input(records: &[codec::Record]) -> Vec<u8> {
        let mut input = vec![1u8];
        for record in records {
            let mut body = Vec::new();
            codec::encode(record, &mut body);
            input.push(0);
            input.extend_from_slice(&u16::try_from(body.len()).unwrap_or(u16::MAX).to_le_bytes());
            input.extend_from_slice(&body);
        }
        input
    }

    /// Well-formed inputs, one per mode: an append record of every kind of event, and a
    /// segment that creates an execution, runs it to its end and lets it expire.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        let id = ExecutionId::from_bytes([7; 16]);
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_780_000_000, 1);
        let mut record = vec![0u8];
        codec::encode(
            &codec::Record::Append {
                id,
                first: 2,
                at,
                payloads: f::every_kind_but_accepted(),
            },
            &mut record,
        );
        let journal = segment_input(&[
            codec::Record::Create {
                id,
                at,
                idempotency: Some(Idempotency {
                    key: "k".into(),
                    fingerprint: Fingerprint(3),
                }),
                labels: Arc::default(),
                accepted: f::accepted(),
            },
            codec::Record::Append {
                id,
                first: 2,
                at,
                payloads: vec![f::routing(), f::attempt_started(1), f::text(1, "hi")],
            },
            codec::Record::Append {
                id,
                first: 5,
                at,
                payloads: vec![f::completed(1, "hi")],
            },
            codec::Record::Expire { id },
        ]);
        vec![("seed-record", record), ("seed-segment", journal)]
    }

    #[test]
    fn the_seeds_run_clean() {
        let seeds = seeds();
        journal(&seeds[0].1);
        let replayed = segment(&seeds[1].1[1..]);
        assert!(
            matches!(replayed, Some(Ok(5))),
            "the segment replays whole: {replayed:?}"
        );
    }

    /// Writes the seeds to `fuzz/regressions/journal/`:
    /// `cargo test --lib write_the_journal_seeds -- --ignored`.
    #[test]
    #[ignore = "writes files into the source tree"]
    fn write_the_journal_seeds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/journal");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        for (name, input) in seeds() {
            std::fs::write(dir.join(name), input).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

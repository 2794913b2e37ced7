use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::fuzz::{CLIENT_PREFACE, through};
use super::hpack::tests::{GRPCIO, hex, literal};
use super::*;

const DATA: u8 = 0x0;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Head::write(&mut out, payload.len(), kind, flags, stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The second request grpcio sent on its connection: every field an index into what the
/// first added to the dynamic table, `:authority` among them.
const GRPCIO_INDEXED: &str = "c4c38386c2c1c0400c677270632d74696d656f757405353031306dbf";

/// A client's bytes and what h2 should read of them: the preface, grpcio's first two
/// requests, a Huffman-coded authority split over HEADERS (padded, with priority) and
/// CONTINUATION, a padded block with none, and frames of other kinds between them.
fn exchange() -> (Vec<u8>, Vec<u8>) {
    let mut sent = CLIENT_PREFACE.to_vec();
    let mut read = CLIENT_PREFACE.to_vec();
    let both = |sent: &mut Vec<u8>, read: &mut Vec<u8>, bytes: Vec<u8>| {
        sent.extend(&bytes);
        read.extend(bytes);
    };
    both(
        &mut sent,
        &mut read,
        frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]),
    );

    let first = hex(GRPCIO);
    sent.extend(frame(HEADERS, END_HEADERS, 1, &first));
    read.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &hpack::rewrite(&first).unwrap(),
    ));
    both(
        &mut sent,
        &mut read,
        frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]),
    );
    both(
        &mut sent,
        &mut read,
        frame(HEADERS, END_STREAM | END_HEADERS, 3, &hex(GRPCIO_INDEXED)),
    );
    both(&mut sent, &mut read, frame(PING, 0, 0, b"12345678"));

    // `:authority: %2Ftmp%2Fmr.sock`, Huffman-coded, without indexing.
    let mut fragment = vec![0x83, 0x86, 0x84, 0x01, 0x8c];
    fragment.extend(hex("5458534d6a8b0d362e8393af"));
    let priority = [0x80, 0, 0, 1, 15];
    let mut payload = vec![3];
    payload.extend(priority);
    payload.extend(&fragment[..7]);
    payload.extend([0; 3]);
    sent.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 5, &payload));
    sent.extend(frame(CONTINUATION, END_HEADERS, 5, &fragment[7..]));
    let mut valid = vec![0x83, 0x86, 0x84];
    valid.extend(literal(0x01, None, b"localhostxxxxxxx"));
    read.extend(frame(
        HEADERS,
        PRIORITY | END_STREAM | END_HEADERS,
        5,
        &[&priority[..], &valid].concat(),
    ));

    let mut padded = vec![2, 0x82, 0x86, 0x84];
    padded.extend(literal(0x41, None, b"localhost:50051"));
    padded.extend([0, 0]);
    both(
        &mut sent,
        &mut read,
        frame(HEADERS, PADDED | END_HEADERS, 7, &padded),
    );
    both(&mut sent, &mut read, frame(DATA, END_STREAM, 7, &[7; 40]));
    (sent, read)
}

#[test]
fn the_exchange_reads_the_same_cut_at_every_point() {
    let (sent, expected) = exchange();
    for size in [1, 5, 64, 64 * 1024] {
        assert_eq!(
            through(vec![sent.clone()], size).0,
            expected,
            "one read, reads of {size}"
        );
        for cut in 0..=sent.len() {
            let chunks = vec![sent[..cut].to_vec(), sent[cut..].to_vec()];
            assert_eq!(
                through(chunks, size).0,
                expected,
                "cut at {cut}, reads of {size}"
            );
        }
        let bytes = sent.iter().map(|&b| vec![b]).collect();
        assert_eq!(
            through(bytes, size).0,
            expected,
            "a byte a read, reads of {size}"
        );
    }
}

#[test]
fn what_needs_no_change_passes_byte_identical() {
    let mut sent = CLIENT_PREFACE.to_vec();
    sent.extend(frame(HEADERS, END_HEADERS, 1, &hex(GRPCIO_INDEXED)));
    let mut block = vec![0x82, 0x86, 0x84];
    block.extend(literal(0x41, None, b"localhost:50051"));
    sent.extend(frame(HEADERS, 0, 3, &block[..4]));
    sent.extend(frame(CONTINUATION, END_HEADERS, 3, &block[4..]));
    sent.extend(frame(DATA, END_STREAM, 3, &[1; 100]));
    for cut in 0..=sent.len() {
        let chunks = vec![sent[..cut].to_vec(), sent[cut..].to_vec()];
        assert_eq!(through(chunks, 4096).0, sent, "cut at {cut}");
    }
}

#[test]
fn a_block_with_nothing_to_replace_is_not_copied() {
    // grpcio's requests after its first: read in place, nothing held or copied.
    let mut sent = CLIENT_PREFACE.to_vec();
    for stream in [1, 3, 5] {
        sent.extend(frame(HEADERS, END_HEADERS, stream, &hex(GRPCIO_INDEXED)));
        sent.extend(frame(DATA, END_STREAM, stream, &[0; 5]));
    }
    let (read, _, room) = through(vec![sent.clone()], 4096);
    assert_eq!((read, room), (sent, 0));
}

#[test]
fn a_block_too_large_or_broken_passes_as_it_is() {
    let mut block = vec![0x82, 0x86, 0x84];
    block.extend(literal(0x41, None, b"%2Fmr.sock"));
    block.extend(literal(0x40, Some(b"x-large"), &[b'a'; 5000]));
    // Over 16 KiB in four frames: it passes (h2 refuses it for its size), held no more
    // than a bound.
    let mut large = CLIENT_PREFACE.to_vec();
    large.extend(frame(HEADERS, 0, 1, &block));
    for _ in 0..2 {
        large.extend(frame(CONTINUATION, 0, 1, &block[..5000]));
    }
    large.extend(frame(CONTINUATION, END_HEADERS, 1, &block[..5000]));
    for size in [7, 4096] {
        let bytes = large.chunks(1000).map(<[u8]>::to_vec).collect();
        let (read, most, _) = through(bytes, size);
        assert_eq!(read, large);
        assert!(most <= MAX_HELD + READ_CHUNK, "{most}");
    }
    // A HEADERS frame not followed by its CONTINUATION frame; padding longer than the frame.
    let mut broken = CLIENT_PREFACE.to_vec();
    broken.extend(frame(HEADERS, 0, 1, &block[..20]));
    broken.extend(frame(DATA, 0, 1, b"interleaved"));
    broken.extend(frame(
        HEADERS,
        PADDED | END_HEADERS,
        3,
        &[&[200][..], &block].concat(),
    ));
    assert_eq!(through(vec![broken.clone()], 4096).0, broken);
}

/// The shim in front of h2's own server: each request of `client`, as h2 accepted it, by
/// the authority of its URI.
async fn accepted(client: &[u8], shim: bool) -> Vec<String> {
    differential::accepted_headers(client.to_vec(), shim)
        .await
        .into_iter()
        .map(|(_, authority, _)| authority)
        .collect()
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

#[tokio::test(start_paused = true)]
async fn h2_accepts_what_the_shim_reads_and_keeps_its_table_in_step() {
    let (sent, _) = exchange();
    let through_shim = accepted(&sent, true).await;
    assert_eq!(
        through_shim,
        [
            "localhostxxxxxxxxxxxxx",
            // Indexed: h2's table holds the value the shim wrote.
            "localhostxxxxxxxxxxxxx",
            "localhostxxxxxxx",
            "localhost:50051"
        ]
    );
    // Without it h2 refuses every request with a socket path (the one with a valid
    // authority is accepted).
    assert_eq!(accepted(&sent, false).await, ["localhost:50051"]);
}

#[tokio::test(start_paused = true)]
async fn a_block_that_outgrows_a_frame_goes_on_in_continuation() {
    // 3 000 `%`, Huffman-coded (6 bits each: 010101, so 0x55 repeated), grow by 750 bytes
    // written raw: with a large header beside them the block no longer fits one frame.
    let mut block = vec![0x83, 0x86, 0x84, 0x41, 0xff, 0xcb, 0x10];
    block.extend([0x55; 2250]);
    block.extend(literal(0x40, Some(b"x-large"), &[b'a'; 13_800]));
    assert!(block.len() <= MAX_FRAME && block.len() + 750 > MAX_FRAME);
    let mut sent = CLIENT_PREFACE.to_vec();
    sent.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &block));
    let (read, _, _) = through(vec![sent.clone()], 64 * 1024);
    let first = Head::read(&read[PREFACE..]).unwrap();
    assert_eq!(
        (first.kind, first.flags, first.len),
        (HEADERS, END_STREAM, MAX_FRAME)
    );
    let next = Head::read(&read[PREFACE + HEAD + MAX_FRAME..]).unwrap();
    assert_eq!((next.kind, next.flags), (CONTINUATION, END_HEADERS));
    assert_eq!(read.len(), PREFACE + 2 * HEAD + MAX_FRAME + next.len);

    let mut value = b"localhost".to_vec();
    value.resize(3000, b'x');
    let expected = String::from_utf8(value).unwrap();
    assert_eq!(accepted(&sent, true).await, [expected]);
}

mod differential;

//! The shim read by a reader that hands out chosen pieces, for its tests and its fuzz target
//! (`fuzz/fuzz_targets/authority.rs`): whatever a client sends, however it arrives, the shim
//! never panics, never holds more than its bound, and what h2 reads does not depend on how
//! the bytes were cut.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::{AnyAuthority, MAX_HELD, READ_CHUNK};

/// The client connection preface, which passes before the first frame.
pub(super) const CLIENT_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A reader that hands out `chunks`, one per read at most.
pub(super) struct Chunks(pub(super) VecDeque<Vec<u8>>);

impl AsyncRead for Chunks {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let chunks = &mut self.get_mut().0;
        if let Some(chunk) = chunks.front_mut() {
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk[..n]);
            chunk.drain(..n);
            if chunk.is_empty() {
                chunks.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// What h2 reads through the shim from a client that sent `chunks`, in reads of at most
/// `size` bytes; the most the shim held at once; and the most room it had allocated.
pub(super) fn through(chunks: Vec<Vec<u8>>, size: usize) -> (Vec<u8>, usize, usize) {
    let mut shim = AnyAuthority::new(Chunks(
        chunks.into_iter().filter(|c| !c.is_empty()).collect(),
    ));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    let (mut most, mut room) = (0, 0);
    let mut space = vec![0; size.max(1)];
    loop {
        let mut buf = ReadBuf::new(&mut space);
        let Poll::Ready(read) = Pin::new(&mut shim).poll_read(&mut cx, &mut buf) else {
            panic!("a reader that never waits made the shim wait");
        };
        assert!(read.is_ok(), "an in-memory read failed: {read:?}");
        most = most.max(shim.held.len() + shim.ready.len());
        room = room.max(shim.held.capacity() + shim.ready.capacity());
        if buf.filled().is_empty() {
            return (out, most, room);
        }
        out.extend_from_slice(buf.filled());
    }
}

/// A fuzzer's input: the first byte picks the size of h2's reads (1 to 256 bytes, or 16 KiB
/// for 0), the second the length of the pieces the client's bytes arrive in (cycling from 1
/// to it); the rest follows the preface as the client's bytes. Read whole and in pieces, the
/// shim must give h2 the same bytes, holding no more than its bound either way.
pub fn input(data: &[u8]) {
    let [size, pieces, rest @ ..] = data else {
        return;
    };
    let size = if *size == 0 {
        16 * 1024
    } else {
        usize::from(*size)
    };
    let mut sent = CLIENT_PREFACE.to_vec();
    sent.extend_from_slice(rest);
    let (whole, most, _) = through(vec![sent.clone()], size);
    assert!(most <= MAX_HELD + READ_CHUNK, "held {most} bytes");
    let longest = usize::from(*pieces).max(1);
    let mut cut = Vec::new();
    let mut at = 0;
    let mut length = 1;
    while at < sent.len() {
        let end = (at + length).min(sent.len());
        cut.push(sent[at..end].to_vec());
        at = end;
        length = length % longest + 1;
    }
    let (read, most, _) = through(cut, size);
    assert!(most <= MAX_HELD + READ_CHUNK, "held {most} bytes");
    assert_eq!(read, whole, "the bytes h2 reads depend on how they arrived");
}

//! The shim against a maintained HPACK decoder: h2's own server. Random connections of header
//! blocks (literals with incremental indexing, without, never indexed; `:authority` by its
//! static name or a literal one; valid authorities and socket paths; later requests naming
//! earlier entries by their dynamic index; table size updates that evict) are read by h2
//! through the shim and without it. Every request h2 accepts without the shim it accepts
//! through it with the same headers; one it refuses (a socket path for authority) it accepts
//! through the shim with an authority of the same length; and what it accepts matches the
//! encoder's own account of each request, its dynamic table kept beside it (RFC 7541 §4).
//! Fed by the shim's own random frames too (cut anywhere, read in any size): nothing panics,
//! nothing is held past the bound.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::super::fuzz::{CLIENT_PREFACE, input};
use super::*;

/// One header field as a request's encoder writes it.
#[derive(Debug, Clone)]
enum Field {
    /// `:authority` as a literal; `named` writes its name literally (grpcio), else by static
    /// index 1; `kind` is the representation's first byte's pattern.
    Authority {
        value: String,
        kind: Kind,
        named: bool,
    },
    /// The dynamic entry `back` places behind the newest (0 the newest), when it holds one.
    Indexed { back: usize },
    /// A header of the test's own, a literal with a literal name.
    Other {
        name: String,
        value: String,
        kind: Kind,
    },
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Indexing,
    WithoutIndexing,
    NeverIndexed,
}

impl Kind {
    /// The first byte of a literal of this kind, its name index ORed in, and the prefix.
    fn first(self) -> (u8, u8) {
        match self {
            Self::Indexing => (0x40, 6),
            Self::WithoutIndexing => (0x00, 4),
            Self::NeverIndexed => (0x10, 4),
        }
    }
}

/// An authority: a valid one, or a socket path h2 refuses.
fn authority() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,12}(:[0-9]{1,5})?",
        "%2F[a-z]{1,10}%2F[a-z]{1,8}\\.sock",
        "[a-z]{1,6}/[a-z]{1,6}\\.sock",
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Indexing),
        Just(Kind::WithoutIndexing),
        Just(Kind::NeverIndexed)
    ]
}

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        (0usize..6).prop_map(|back| Field::Indexed { back }),
        ("x-[a-z]{1,10}", "[ -~]{0,24}", kind()).prop_map(|(name, value, kind)| Field::Other {
            name,
            value,
            kind
        }),
    ]
}

/// How a request gives its authority: a literal, or the `back`-th newest authority entry of
/// the dynamic table (a literal when there is none).
fn authority_field() -> impl Strategy<Value = Field> {
    prop_oneof![
        (authority(), kind(), any::<bool>()).prop_map(|(value, kind, named)| Field::Authority {
            value,
            kind,
            named
        }),
        (0usize..3).prop_map(|back| Field::Indexed { back }),
    ]
}

/// A request: a table size update first (or none), its authority, then its other fields.
fn request() -> impl Strategy<Value = (Option<usize>, Field, Vec<Field>)> {
    (
        prop::option::weighted(0.2, 0usize..=4096),
        authority_field(),
        prop::collection::vec(field(), 0..6),
    )
}

/// An HPACK integer with `prefix` bits in `first`'s low bits (RFC 7541 §5.1).
fn integer(out: &mut Vec<u8>, first: u8, prefix: u8, mut value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | u8::try_from(value).unwrap());
        return;
    }
    out.push(first | u8::try_from(max).unwrap());
    value -= max;
    while value >= 128 {
        out.push(u8::try_from(value % 128).unwrap() | 0x80);
        value /= 128;
    }
    out.push(u8::try_from(value).unwrap());
}

/// A raw (H = 0) string.
fn string(out: &mut Vec<u8>, text: &str) {
    integer(out, 0, 7, text.len());
    out.extend_from_slice(text.as_bytes());
}

/// The encoder's dynamic table: newest first, with its size bound (RFC 7541 §4).
#[derive(Default)]
struct Table {
    entries: VecDeque<(String, String)>,
    max: usize,
}

impl Table {
    fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum()
    }

    fn evict(&mut self) {
        while self.size() > self.max {
            self.entries.pop_back();
        }
    }

    fn add(&mut self, name: &str, value: &str) {
        self.entries.push_front((name.to_owned(), value.to_owned()));
        self.evict();
    }
}

/// The requests as blocks, and what each carries: its authority and its other headers.
type Encoded = (Vec<Vec<u8>>, Vec<(String, Vec<(String, String)>)>);

/// A literal of `kind` named `name` (`None`: `:authority` by its static index) valued
/// `value`, added to `table` when it is indexed.
fn literal_field(
    block: &mut Vec<u8>,
    table: &mut Table,
    kind: Kind,
    name: Option<&str>,
    value: &str,
) {
    let (first, prefix) = kind.first();
    match name {
        Some(name) => {
            integer(block, first, prefix, 0);
            string(block, name);
        }
        None => integer(block, first, prefix, 1),
    }
    string(block, value);
    if matches!(kind, Kind::Indexing) {
        table.add(name.unwrap_or(":authority"), value);
    }
}

fn encode(requests: &[(Option<usize>, Field, Vec<Field>)]) -> Encoded {
    let mut table = Table {
        max: 4096,
        ..Table::default()
    };
    let mut blocks = Vec::new();
    let mut carried = Vec::new();
    for (update, authority, fields) in requests {
        let mut block = Vec::new();
        if let Some(size) = update {
            integer(&mut block, 0x20, 5, *size);
            table.max = *size;
            table.evict();
        }
        // `:method GET`, `:scheme http`, `:path /`; pseudo-headers come first in a block (h2
        // refuses one after a regular header), so the authority follows them at once.
        block.extend([0x82, 0x86, 0x84]);
        let named_back = |back: usize, table: &Table| {
            table
                .entries
                .iter()
                .enumerate()
                .filter(|(_, (name, _))| name == ":authority")
                .nth(back)
                .map(|(at, (_, value))| (at, value.clone()))
        };
        let value = match authority {
            Field::Authority { value, kind, named } => {
                let name = named.then_some(":authority");
                literal_field(&mut block, &mut table, *kind, name, value);
                value.clone()
            }
            Field::Indexed { back } => match named_back(*back, &table) {
                Some((at, value)) => {
                    integer(&mut block, 0x80, 7, 62 + at);
                    value
                }
                None => {
                    literal_field(
                        &mut block,
                        &mut table,
                        Kind::WithoutIndexing,
                        None,
                        "localhost",
                    );
                    "localhost".to_owned()
                }
            },
            Field::Other { .. } => unreachable!("an authority field"),
        };
        let mut headers = Vec::new();
        for field in fields {
            match field {
                Field::Indexed { back } => {
                    let Some((name, value)) = table.entries.get(*back).cloned() else {
                        continue;
                    };
                    if name == ":authority" {
                        continue;
                    }
                    integer(&mut block, 0x80, 7, 62 + back);
                    headers.push((name, value));
                }
                Field::Other { name, value, kind } => {
                    literal_field(&mut block, &mut table, *kind, Some(name), value);
                    headers.push((name.clone(), value.clone()));
                }
                Field::Authority { .. } => unreachable!("one authority a request"),
            }
        }
        carried.push((value, headers));
        blocks.push(block);
    }
    (blocks, carried)
}

/// Each request h2 accepted of `client`, through the shim or not: the stream it came on, its
/// authority, and its headers (those of the test's own, in order). Until nothing more comes
/// (the clock is paused: it moves once all else waits); the client stays connected, since at
/// its end h2 drops streams not yet accepted.
pub(super) async fn accepted_headers(
    client: Vec<u8>,
    shim: bool,
) -> Vec<(u32, String, Vec<(String, String)>)> {
    let (mut near, far) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(async move {
        let io: Box<dyn Io> = if shim {
            Box::new(AnyAuthority::new(far))
        } else {
            Box::new(far)
        };
        let mut conn = h2::server::handshake(io).await.unwrap();
        let mut requests = Vec::new();
        let next = Duration::from_secs(1);
        while let Ok(Some(accepted)) = tokio::time::timeout(next, conn.accept()).await {
            let Ok((request, mut respond)) = accepted else {
                break;
            };
            let stream = u32::from(respond.stream_id());
            let authority = request
                .uri()
                .authority()
                .map(ToString::to_string)
                .unwrap_or_default();
            let headers = request
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            requests.push((stream, authority, headers));
            respond
                .send_response(http::Response::new(()), true)
                .unwrap();
        }
        requests
    });
    near.write_all(&client).await.unwrap();
    let requests = server.await.unwrap();
    drop(near);
    requests
}

/// Whether h2 takes `value` as an authority.
fn valid(value: &str) -> bool {
    value.parse::<http::uri::Authority>().is_ok()
}

/// The headers h2 gives for `carried`: names lowercase, repeated ones together in order of
/// first appearance (as `HeaderMap` iterates).
fn as_h2_gives(carried: &[(String, String)]) -> Vec<(String, String)> {
    let mut map = http::HeaderMap::new();
    for (name, value) in carried {
        map.append(
            http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    map.iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn h2_reads_through_the_shim_what_the_encoder_wrote(
        requests in prop::collection::vec(request(), 1..10)
    ) {
        let (blocks, carried) = encode(&requests);
        // The preface ends with the client's SETTINGS.
        let mut client = CLIENT_PREFACE.to_vec();
        client.extend(frame(SETTINGS, 0, 0, &[]));
        for (i, block) in blocks.iter().enumerate() {
            let stream = u32::try_from(2 * i + 1).unwrap();
            client.extend(frame(HEADERS, END_STREAM | END_HEADERS, stream, block));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let (through, direct) = runtime.block_on(async {
            (
                accepted_headers(client.clone(), true).await,
                accepted_headers(client, false).await,
            )
        });
        // Through the shim, every request; each with what the encoder wrote, its
        // authority replaced by one of the same length where h2 would refuse it.
        prop_assert_eq!(through.len(), carried.len());
        for ((stream, got, headers), (wrote, own)) in through.iter().zip(&carried) {
            if valid(wrote) {
                prop_assert_eq!(got, wrote, "stream {}", stream);
            } else {
                prop_assert_eq!(got.len(), wrote.len(), "stream {}", stream);
                prop_assert!(valid(got));
            }
            prop_assert_eq!(headers, &as_h2_gives(own), "stream {}", stream);
        }
        // Without it, exactly the requests with a valid authority, the same.
        let expected: Vec<_> = through
            .iter()
            .zip(&carried)
            .filter(|(_, (wrote, _))| valid(wrote))
            .map(|(seen, _)| seen.clone())
            .collect();
        prop_assert_eq!(direct, expected);
    }

    #[test]
    fn random_frames_read_the_same_however_they_arrive(
        frames in prop::collection::vec(
            (prop_oneof![Just(HEADERS), Just(CONTINUATION), Just(DATA), Just(SETTINGS)],
             any::<u8>(), 0u32..8, prop::collection::vec(any::<u8>(), 0..300)),
            0..12),
        size in any::<u8>(),
        pieces in any::<u8>(),
    ) {
        let mut data = vec![size, pieces];
        for (kind, flags, stream, payload) in frames {
            data.extend(frame(kind, flags, stream, &payload));
        }
        input(&data);
    }
}

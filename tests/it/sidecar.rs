//! Sidecar mode: `serve --listen unix:/path` serves the same API on a Unix domain socket,
//! created with mode 0660 and removed at shutdown; `exec`, `health` and `bench` reach it
//! with `--addr unix:/path`. On the socket any `:authority` is accepted, as gRPC C-core
//! (grpcio) sends the socket's path, percent-encoded; over TCP such a call is refused.

use crate::common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use common::process::{run, start_serve, wait_for};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn a_unix_socket_serves_the_whole_api_and_goes_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("model-runtime.sock");
    let listen = format!("unix:{}", socket.display());
    let (mut server, addr) = start_serve(&["serve", "--listen", &listen], &[], LIMIT);
    assert_eq!(addr, listen);
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660, "{mode:o}");

    // A full execution over the socket.
    let exec = run(
        &[
            "exec",
            "--addr",
            &addr,
            "--ability",
            "chat",
            "hello sidecar world",
        ],
        LIMIT,
    );
    assert!(exec.status.success(), "{exec:?}");
    assert_eq!(
        String::from_utf8_lossy(&exec.stdout).trim(),
        "hello sidecar world"
    );
    let health = run(&["health", "--addr", &addr], LIMIT);
    assert!(health.status.success(), "{health:?}");
    let bench = run(
        &[
            "bench",
            "--addr",
            &addr,
            "--executions",
            "50",
            "--concurrency",
            "4",
            "--json",
        ],
        LIMIT,
    );
    assert!(bench.status.success(), "{bench:?}");
    let stdout = String::from_utf8_lossy(&bench.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["executions"], 50, "{report}");

    // A second server on the same socket is refused while the first answers on it.
    let second = run(&["serve", "--listen", &listen], LIMIT);
    assert_eq!(second.status.code(), Some(1), "{second:?}");
    assert!(socket.exists());

    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_for(&mut server.0, LIMIT).expect("the server stops");
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the socket file is removed at shutdown");
}

#[test]
fn a_config_listens_on_a_socket_whose_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let default = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config/default.toml"),
    )
    .unwrap();
    let config_at = |socket: &std::path::Path| {
        let text = default.replace(
            "listen = \"127.0.0.1:50051\"",
            &format!("listen = \"unix:{}\"", socket.display()),
        );
        assert_ne!(text, default, "the default config's listen line moved");
        let path = dir.path().join("sidecar.toml");
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };

    let missing = dir.path().join("run/model-runtime");
    let config = config_at(&missing.join("mr.sock"));
    let out = run(&["serve", "--config", &config], LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("directory {} does not exist", missing.display())),
        "{stderr}"
    );

    std::fs::create_dir_all(&missing).unwrap();
    let (_server, addr) = start_serve(&["serve", "--config", &config], &[], LIMIT);
    assert_eq!(addr, format!("unix:{}", missing.join("mr.sock").display()));
    let health = run(&["health", "--addr", &addr], LIMIT);
    assert!(health.status.success(), "{health:?}");
}

/// `serve --listen unix:PATH` on what is already at PATH; its exit code and stderr.
fn serve_on(socket: &std::path::Path) -> (Option<i32>, String) {
    let out = run(
        &["serve", "--listen", &format!("unix:{}", socket.display())],
        LIMIT,
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_file_that_is_not_a_socket_is_never_taken() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal-1.seg");
    std::fs::write(&file, b"acknowledged records").unwrap();
    let (code, stderr) = serve_on(&file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), b"acknowledged records");

    // Nor through a symlink: neither the link nor what it points to is touched.
    let link = dir.path().join("mr.sock");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let (code, stderr) = serve_on(&link);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read(&file).unwrap(), b"acknowledged records");
}

#[test]
fn only_a_socket_whose_connect_is_refused_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mr.sock");

    // A live server whose accept backlog is full: a connect is not refused but would block
    // (EAGAIN). It is not taken over.
    let live = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
    live.bind(&socket2::SockAddr::unix(&socket).unwrap())
        .unwrap();
    live.listen(0).unwrap();
    let mut waiting = Vec::new();
    loop {
        let client =
            socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        client.set_nonblocking(true).unwrap();
        match client.connect(&socket2::SockAddr::unix(&socket).unwrap()) {
            Ok(()) => waiting.push(client),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling the backlog: {e}"),
        }
        assert!(waiting.len() < 1000, "the backlog never filled");
    }
    let (code, stderr) = serve_on(&socket);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("may be in use"), "{stderr}");
    // The live server still has its socket: a waiting connection is accepted on it.
    assert!(live.accept().is_ok());
    drop((live, waiting));

    // Its server gone, the file stays; a connect is refused, so a new server takes it.
    assert!(socket.exists());
    let listen = format!("unix:{}", socket.display());
    let (mut server, _) = start_serve(&["serve", "--listen", &listen], &[], LIMIT);
    let health = run(&["health", "--addr", &listen], LIMIT);
    assert!(health.status.success(), "{health:?}");

    // At its stop it removes the path only if it is still its socket.
    std::fs::remove_file(&socket).unwrap();
    std::fs::write(&socket, b"put here since").unwrap();
    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_for(&mut server.0, LIMIT).expect("the server stops");
    assert!(status.success(), "{status:?}");
    assert_eq!(std::fs::read(&socket).unwrap(), b"put here since");
}

/// How a call written by hand ended: its response DATA, or the stream's reset code.
#[derive(Clone, Debug, PartialEq)]
enum Ended {
    Data(Vec<u8>),
    Reset(u32),
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// A raw (not Huffman-coded) HPACK string.
fn hpack_string(text: &[u8]) -> Vec<u8> {
    assert!(text.len() < 127);
    [&[text.len() as u8][..], text].concat()
}

/// Two health checks written by hand, as grpcio writes them: the first names `authority`
/// in a literal that adds it to the dynamic table, with the name written out; the second
/// refers to that entry by index. (h2's client refuses to send an invalid authority.)
fn health_checks<S: Read + Write>(mut io: S, authority: &str) -> Vec<Ended> {
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    const SETTINGS: u8 = 4;
    const GOAWAY: u8 = 7;
    const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;
    const ACK: u8 = 1;
    // :method POST, :scheme http, then literals without indexing: :path (static 4),
    // content-type (static 31), te.
    let mut common = vec![0x83, 0x86, 0x04];
    common.extend(hpack_string(b"/grpc.health.v1.Health/Check"));
    common.extend([0x0f, 0x10]);
    common.extend(hpack_string(b"application/grpc"));
    common.push(0x00);
    common.extend(hpack_string(b"te"));
    common.extend(hpack_string(b"trailers"));
    let mut first = vec![0x40];
    first.extend(hpack_string(b":authority"));
    first.extend(hpack_string(authority.as_bytes()));
    first.extend(&common);
    // Dynamic index 62: the one entry the first block added.
    let second = [&[0xbe][..], &common].concat();
    let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    sent.extend(frame(SETTINGS, 0, 0, &[]));
    for (stream, block) in [(1, first), (3, second)] {
        sent.extend(frame(HEADERS, END_HEADERS, stream, &block));
        // An empty HealthCheckRequest: a gRPC message of no bytes.
        sent.extend(frame(DATA, END_STREAM, stream, &[0; 5]));
    }
    io.write_all(&sent).unwrap();

    let mut data: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut ended = HashMap::new();
    while ended.len() < 2 {
        let mut head = [0; 9];
        io.read_exact(&mut head).unwrap();
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
        let mut payload = vec![0; len];
        io.read_exact(&mut payload).unwrap();
        match kind {
            SETTINGS if flags & ACK == 0 => io.write_all(&frame(SETTINGS, ACK, 0, &[])).unwrap(),
            DATA => data.entry(stream).or_default().extend(&payload),
            RST_STREAM => {
                let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
                ended.insert(stream, Ended::Reset(code));
            }
            GOAWAY => panic!("the server closed the connection: {payload:?}"),
            _ => {}
        }
        if matches!(kind, DATA | HEADERS) && flags & END_STREAM != 0 {
            ended.insert(
                stream,
                Ended::Data(data.remove(&stream).unwrap_or_default()),
            );
        }
    }
    vec![ended.remove(&1).unwrap(), ended.remove(&3).unwrap()]
}

#[test]
fn the_socket_accepts_the_authority_grpcio_sends_and_tcp_still_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("mr.sock");
    // What gRPC C-core sends for `unix:PATH`: the path, percent-encoded.
    let authority = socket.display().to_string().replace('/', "%2F");
    assert!(authority.contains("%2F"));
    // SERVING, as a gRPC message: not compressed, two bytes, field 1 = 1.
    let serving = Ended::Data(vec![0, 0, 0, 0, 2, 0x08, 0x01]);

    let listen = format!("unix:{}", socket.display());
    let (_unix, _) = start_serve(&["serve", "--listen", &listen], &[], LIMIT);
    let io = UnixStream::connect(&socket).unwrap();
    io.set_read_timeout(Some(LIMIT)).unwrap();
    assert_eq!(health_checks(io, &authority), [serving.clone(), serving]);

    // Over TCP h2 refuses it, as it always did: the stream is reset with PROTOCOL_ERROR.
    let (_tcp, addr) = start_serve(&["serve", "--listen", "127.0.0.1:0"], &[], LIMIT);
    let io = std::net::TcpStream::connect(&addr).unwrap();
    io.set_read_timeout(Some(LIMIT)).unwrap();
    assert_eq!(
        health_checks(io, &authority),
        [Ended::Reset(1), Ended::Reset(1)]
    );
}
